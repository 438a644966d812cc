// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	resourcerules "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// resourceGroup is the API group of DeviceTaintRules.
	resourceGroup = "resource.k8s.io"
	// deviceTaintRules is the resource name of DeviceTaintRules.
	deviceTaintRules = "devicetaintrules"
)

// DeviceTaintRuleVersions are the versions of resource.k8s.io in which an API
// server may serve DeviceTaintRules, the preferred first: v1 (Kubernetes
// 1.37 and later, on by default), v1beta2 (1.36, with the
// DRADeviceTaintRules feature gate and runtime-config
// resource.k8s.io/v1beta2=true), v1alpha3 (1.35, with the DRADeviceTaints
// and DRADeviceTaintRules feature gates and runtime-config
// resource.k8s.io/v1alpha3=true). The library writes its rules through the
// first that the API server serves, found by discovery, so that it needs
// neither a Kubernetes version nor a k8s.io/api version that knows v1: the
// fields it writes are the same in each.
var DeviceTaintRuleVersions = []string{"v1", "v1beta2", "v1alpha3"}

// ErrDeviceTaintRulesNotServed is wrapped by the error of a fault, Load or
// ClearDeviceFault when the API server serves DeviceTaintRules in none of
// DeviceTaintRuleVersions.
var ErrDeviceTaintRulesNotServed = errors.New("the API server serves DeviceTaintRules in none of resource.k8s.io/" +
	strings.Join(DeviceTaintRuleVersions, ", ") +
	" (Kubernetes 1.37: served by default; 1.36: feature gate DRADeviceTaintRules and runtime-config resource.k8s.io/v1beta2=true; 1.35: feature gates DRADeviceTaints and DRADeviceTaintRules and runtime-config resource.k8s.io/v1alpha3=true)")

// deviceTaintRule is a DeviceTaintRule as the library reads and writes it,
// in any of DeviceTaintRuleVersions: their JSON is the same for the fields
// the library uses, and k8s.io/api has the v1beta2 types from v0.36 on.
type deviceTaintRule = resourcerules.DeviceTaintRule

// ruleAPI reads and writes DeviceTaintRules in one version of
// resource.k8s.io, over the REST client of the driver's clientset, in JSON.
type ruleAPI struct {
	client  rest.Interface
	version string
}

// restClientOf returns the REST client that ruleAPI uses: the clientset's,
// whose paths ruleAPI sets itself (package failfastplugintest gives a fake
// clientset one).
func restClientOf(kube kubernetes.Interface) rest.Interface {
	return kube.ResourceV1beta2().RESTClient()
}

func (a *ruleAPI) path(name ...string) string {
	return strings.Join(append([]string{"/apis", resourceGroup, a.version, deviceTaintRules}, name...), "/")
}

// do sends req with body (nil: none) as JSON and decodes the answer into
// into, asking for JSON whatever content type the clientset prefers.
func (a *ruleAPI) do(ctx context.Context, req *rest.Request, body, into any) error {
	req = req.SetHeader("Accept", "application/json")
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req = req.SetHeader("Content-Type", "application/json").Body(data)
	}
	result := req.Do(ctx)
	// Error, not Raw's error: it decodes the API server's Status (NotFound,
	// AlreadyExists, Forbidden and the server's own message).
	if err := result.Error(); err != nil {
		return err
	}
	raw, err := result.Raw()
	if err != nil {
		return err
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("decode the answer of %s: %w", resourceGroup+"/"+a.version, err)
	}
	return nil
}

func (a *ruleAPI) create(ctx context.Context, rule *deviceTaintRule) (*deviceTaintRule, error) {
	rule = rule.DeepCopy()
	rule.APIVersion, rule.Kind = resourceGroup+"/"+a.version, "DeviceTaintRule"
	created := &deviceTaintRule{}
	return created, a.do(ctx, a.client.Post().AbsPath(a.path()), rule, created)
}

func (a *ruleAPI) get(ctx context.Context, name string) (*deviceTaintRule, error) {
	rule := &deviceTaintRule{}
	return rule, a.do(ctx, a.client.Get().AbsPath(a.path(name)), nil, rule)
}

func (a *ruleAPI) delete(ctx context.Context, name string) error {
	return a.do(ctx, a.client.Delete().AbsPath(a.path(name)), nil, nil)
}

// list lists one page of the DeviceTaintRules that labelSelector selects: at
// most limit, from the continue token from (empty: the first page). The
// answer's Continue is the token of the next page, empty after the last.
func (a *ruleAPI) list(ctx context.Context, labelSelector string, limit int64, from string) (*resourcerules.DeviceTaintRuleList, error) {
	list := &resourcerules.DeviceTaintRuleList{}
	req := a.client.Get().AbsPath(a.path()).Param("labelSelector", labelSelector).Param("limit", strconv.FormatInt(limit, 10))
	if from != "" {
		req = req.Param("continue", from)
	}
	return list, a.do(ctx, req, nil, list)
}

// ruleAPIFinder finds the version in which the API server serves
// DeviceTaintRules, by discovery, once it succeeded.
type ruleAPIFinder struct {
	kube kubernetes.Interface

	mu    sync.Mutex
	found *ruleAPI
	// running is closed when the discovery under way ends (nil: none),
	// failed is why the last one failed.
	running chan struct{}
	failed  error
}

// get returns the rules API of the preferred version the API server serves.
// It waits for a discovery until ctx ends (discovery takes no context), and
// a failed one is tried again at the next call: ErrDeviceTaintRulesNotServed
// when the API server serves DeviceTaintRules in no version.
func (f *ruleAPIFinder) get(ctx context.Context) (*ruleAPI, error) {
	f.mu.Lock()
	if f.found != nil {
		defer f.mu.Unlock()
		return f.found, nil
	}
	if f.running == nil {
		done := make(chan struct{})
		f.running = done
		go func() {
			defer close(done)
			api, err := f.discover()
			f.mu.Lock()
			defer f.mu.Unlock()
			f.found, f.failed, f.running = api, err, nil
		}()
	}
	done := f.running
	f.mu.Unlock()
	select {
	case <-done:
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.found != nil {
			return f.found, nil
		}
		return nil, f.failed
	case <-ctx.Done():
		return nil, fmt.Errorf("discover which version of %s serves DeviceTaintRules: %w", resourceGroup, context.Cause(ctx))
	}
}

func (f *ruleAPIFinder) discover() (*ruleAPI, error) {
	for _, version := range DeviceTaintRuleVersions {
		resources, err := f.kube.Discovery().ServerResourcesForGroupVersion(resourceGroup + "/" + version)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("discover %s/%s: %w", resourceGroup, version, err)
		}
		if servesDeviceTaintRules(resources) {
			return &ruleAPI{client: restClientOf(f.kube), version: version}, nil
		}
	}
	return nil, ErrDeviceTaintRulesNotServed
}

func servesDeviceTaintRules(resources *metav1.APIResourceList) bool {
	if resources == nil {
		return false
	}
	for _, resource := range resources.APIResources {
		if resource.Name == deviceTaintRules {
			return true
		}
	}
	return false
}
