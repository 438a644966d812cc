// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"context"
	"fmt"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/failfastplugintest"
	rulesapi "k8s.io/api/resource/v1beta2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

const (
	testDriver    = "driver.dra-failfast.test"
	testNode      = "node-1"
	testNamespace = "ns"
)

// testClass is the DeviceClass of the requests of newClaim.
const testClass = "test-class"

// newClaim returns an allocated claim with results of the test driver on
// testNode (and whatever configs are given). Its spec has what the scheduler
// allocated from: a request of testClass for each request of the results and
// the configs from the claim, in the same order.
func newClaim(name string, results []resourceapi.DeviceRequestAllocationResult, configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: results, Config: configs},
			},
		},
	}
	for _, result := range results {
		if !slices.ContainsFunc(claim.Spec.Devices.Requests, func(r resourceapi.DeviceRequest) bool { return r.Name == result.Request }) {
			claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourceapi.DeviceRequest{
				Name:    result.Request,
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: testClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			})
		}
	}
	for _, config := range configs {
		if config.Source == resourceapi.AllocationConfigSourceClaim {
			claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{Requests: config.Requests, DeviceConfiguration: config.DeviceConfiguration})
		}
	}
	return claim
}

func result(request, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: testDriver, Pool: testNode, Device: device}
}

func oneDevice(device string) []resourceapi.DeviceRequestAllocationResult {
	return []resourceapi.DeviceRequestAllocationResult{result("dev", device)}
}

// claimConfig is an opaque config from the claim for the test driver.
func claimConfig(parameters string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return opaqueConfig(testDriver, resourceapi.AllocationConfigSourceClaim, parameters, requests...)
}

func opaqueConfig(driver string, source resourceapi.AllocationConfigSource, parameters string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source:   source,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver:     driver,
				Parameters: runtime.RawExtension{Raw: []byte(parameters)},
			},
		},
	}
}

// fakePublisher records what gets published.
type fakePublisher struct {
	// client is the fake API server of the device faults in taint mode.
	client *failfastplugintest.Clientset

	mu        sync.Mutex
	published []resourceslice.DriverResources
}

func (p *fakePublisher) PublishResources(_ context.Context, resources resourceslice.DriverResources) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published = append(p.published, resources)
	return nil
}

func (p *fakePublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.published)
}

// taints returns the devices with a device fault rule in the (fake) API,
// sorted; nil without taint mode.
func (p *fakePublisher) taints() []string {
	if p.client == nil {
		return nil
	}
	list, err := p.client.ResourceV1beta2().DeviceTaintRules().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	return ruleDevices(list.Items)
}

// ruleDevices returns the devices that rules taint with the device fault
// taint, sorted.
func ruleDevices(rules []rulesapi.DeviceTaintRule) []string {
	var tainted []string
	for _, rule := range rules {
		if taint := rule.Spec.Taint; taint.Key == failfastplugin.DefaultDeviceFaultTaintKey && taint.Effect == rulesapi.DeviceTaintEffectNoSchedule &&
			rule.Spec.DeviceSelector != nil && rule.Spec.DeviceSelector.Device != nil {
			tainted = append(tainted, *rule.Spec.DeviceSelector.Device)
		}
	}
	slices.Sort(tainted)
	return tainted
}

// faultingPublisher is the publisher of a driver in taint mode: it
// publishes like fakePublisher and keeps device faults in a fake API server,
// as failfastplugin.Helper does.
type faultingPublisher struct {
	*fakePublisher
	*failfastplugin.DeviceFaults
}

// newTestDriver returns a driver for testNode with a CDI dir in t.TempDir()
// and a fake publisher. In taint mode, the publisher also keeps
// failfastplugin's device faults in a fake API server, and prepareOne calls
// the driver through them, as StartWithDeviceFaults does.
func newTestDriver(t *testing.T, cfg Config) (*Driver, *fakePublisher) {
	t.Helper()
	cfg.NodeName = testNode
	if cfg.CDIDir == "" {
		cfg.CDIDir = t.TempDir()
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	publisher := &fakePublisher{}
	var driverPublisher Publisher = publisher
	if cfg.TaintBroken {
		publisher.client = fakeClusterClient(t)
		faults, err := failfastplugin.NewDeviceFaults(failfastplugin.DeviceFaultConfig{DriverName: d.DriverName(), NodeName: testNode, KubeClient: publisher.client})
		if err != nil {
			t.Fatal(err)
		}
		if err := faults.Load(t.Context()); err != nil {
			t.Fatal(err)
		}
		driverPublisher = faultingPublisher{fakePublisher: publisher, DeviceFaults: faults}
	}
	if err := d.SetPublisher(t.Context(), driverPublisher); err != nil {
		t.Fatalf("SetPublisher: %v", err)
	}
	return d, publisher
}

// last returns the last publication.
func (p *fakePublisher) last() resourceslice.DriverResources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published[len(p.published)-1]
}

// fakeClusterClient is a fake API server with the test node and claims, for
// a driver started with Start; it serves DeviceTaintRules in
// resource.k8s.io/v1, as Kubernetes 1.37 does.
func fakeClusterClient(t testing.TB, claims ...*resourceapi.ResourceClaim) *failfastplugintest.Clientset {
	objects := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}}
	for _, claim := range claims {
		objects = append(objects, claim)
	}
	client := fake.NewClientset(objects...)
	// The fake does not implement generateName, which the ResourceSlice
	// controller uses.
	var generated atomic.Int64
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if slice, ok := action.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice); ok && slice.Name == "" && slice.GenerateName != "" {
			slice.Name = fmt.Sprintf("%s%d", slice.GenerateName, generated.Add(1))
		}
		return false, nil, nil
	})
	return failfastplugintest.ServeDeviceTaintRules(t, client, "v1")
}
