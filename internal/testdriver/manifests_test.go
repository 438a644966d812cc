// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// TestManifests decodes the demo manifests (demo/) strictly and checks that
// the example claims do what their names say.
func TestManifests(t *testing.T) {
	decoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	files, err := filepath.Glob(filepath.Join("..", "..", "demo", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	templates := map[string]*resourceapi.ResourceClaimTemplate{}
	pods := map[string]*corev1.Pod{}
	var classes []*resourceapi.DeviceClass
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			switch obj := obj.(type) {
			case *resourceapi.DeviceClass:
				classes = append(classes, obj)
			case *resourceapi.ResourceClaimTemplate:
				templates[obj.Name] = obj
			case *corev1.Pod:
				pods[obj.Name] = obj
			default:
				t.Errorf("%s: unexpected %T", file, obj)
			}
		}
	}

	if len(classes) != 1 || classes[0].Name != "dra-failfast.test" || len(classes[0].Spec.Selectors) != 1 ||
		classes[0].Spec.Selectors[0].CEL == nil || classes[0].Spec.Selectors[0].CEL.Expression != `device.driver == "driver.dra-failfast.test"` {
		t.Errorf("DeviceClass = %+v", classes)
	}

	for _, pod := range pods {
		if len(pod.Spec.Containers) != 1 {
			t.Errorf("pod %s: want one container", pod.Name)
			continue
		}
		container := pod.Spec.Containers[0]
		if container.Image != "dra-failfast.local/workload:v1" || container.ImagePullPolicy != corev1.PullNever {
			t.Errorf("pod %s: image %s, pull policy %s", pod.Name, container.Image, container.ImagePullPolicy)
		}
		for _, claim := range pod.Spec.ResourceClaims {
			if claim.ResourceClaimTemplateName == nil || templates[*claim.ResourceClaimTemplateName] == nil {
				t.Errorf("pod %s: claim %s has no template in demo/", pod.Name, claim.Name)
			}
		}
	}

	for name, want := range map[string]struct {
		permanent bool
		failures  int
	}{
		"healthy":            {},
		"transient":          {failures: 1},
		"permanent":          {permanent: true},
		"permanent-injected": {permanent: true},
	} {
		t.Run(name, func(t *testing.T) {
			template := templates[name]
			if template == nil || pods[name] == nil {
				t.Fatalf("template or pod %q missing", name)
			}
			d, _ := newTestDriver(t, Config{})
			// What the scheduler would allocate: the claim's configs copied.
			var results []resourceapi.DeviceRequestAllocationResult
			for _, request := range template.Spec.Spec.Devices.Requests {
				if request.Exactly == nil || request.Exactly.DeviceClassName != "dra-failfast.test" {
					t.Fatalf("request %s: want exactly one device of class dra-failfast.test", request.Name)
				}
				results = append(results, result(request.Name, "dev-0"))
			}
			var configs []resourceapi.DeviceAllocationConfiguration
			for _, config := range template.Spec.Spec.Devices.Config {
				configs = append(configs, resourceapi.DeviceAllocationConfiguration{
					Source:              resourceapi.AllocationConfigSourceClaim,
					Requests:            config.Requests,
					DeviceConfiguration: config.DeviceConfiguration,
				})
				// The API server stores the parameters as JSON.
				if raw := config.Opaque.Parameters.Raw; len(raw) > 0 && !strings.HasPrefix(string(raw), "{") {
					t.Fatalf("parameters not JSON: %s", raw)
				}
			}
			claim := newClaim(name, results, configs...)
			for call := 1; call <= want.failures+1; call++ {
				res := prepareOne(t, d, claim)
				if want.permanent {
					if !failfastplugin.IsPermanent(res.Err) {
						t.Fatalf("call %d: got %v, want permanent", call, res.Err)
					}
					return
				}
				if failed := res.Err != nil; failed != (call <= want.failures) {
					t.Fatalf("call %d: err = %v", call, res.Err)
				}
			}
		})
	}
}
