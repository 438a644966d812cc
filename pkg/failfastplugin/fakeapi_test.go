// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	rulesapi "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/failfastplugintest"
)

const faultNode = "node-1"

// newFaultAPI returns a fake API server that has the driver's Node and
// another one, node-2, and serves DeviceTaintRules in resource.k8s.io/v1.
func newFaultAPI(t *testing.T) *failfastplugintest.Clientset {
	t.Helper()
	return failfastplugintest.ServeDeviceTaintRules(t, fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: faultNode, UID: "node-1-uid"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", UID: "node-2-uid"}},
	), "v1")
}

// serveRules makes client serve DeviceTaintRules in the versions given
// instead (none: not at all).
func serveRules(t *testing.T, client *failfastplugintest.Clientset, versions ...string) *failfastplugintest.Clientset {
	t.Helper()
	return failfastplugintest.ServeDeviceTaintRules(t, client.Clientset, versions...)
}

// taintsInAPI returns the taints of the DeviceTaintRules in the API, by the
// device they select.
func taintsInAPI(t *testing.T, client *failfastplugintest.Clientset) map[failfastplugin.DeviceID][]rulesapi.DeviceTaint {
	t.Helper()
	rules := rulesInAPI(t, client)
	taints := map[failfastplugin.DeviceID][]rulesapi.DeviceTaint{}
	for device, list := range rules {
		for _, rule := range list {
			taints[device] = append(taints[device], rule.Spec.Taint)
		}
	}
	return taints
}

// rulesInAPI returns the DeviceTaintRules in the API, by the device they
// select.
func rulesInAPI(t *testing.T, client *failfastplugintest.Clientset) map[failfastplugin.DeviceID][]rulesapi.DeviceTaintRule {
	t.Helper()
	list, err := client.ResourceV1beta2().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[failfastplugin.DeviceID][]rulesapi.DeviceTaintRule{}
	for _, rule := range list.Items {
		selector := rule.Spec.DeviceSelector
		if selector == nil || selector.Pool == nil || selector.Device == nil {
			t.Fatalf("rule %s selects no single device: %+v", rule.Name, selector)
		}
		device := failfastplugin.DeviceID{Pool: *selector.Pool, Device: *selector.Device}
		rules[device] = append(rules[device], rule)
	}
	return rules
}

// sortedDevices returns the keys of m, sorted.
func sortedDevices[V any](m map[failfastplugin.DeviceID]V) []failfastplugin.DeviceID {
	devices := slices.Collect(maps.Keys(m))
	slices.SortFunc(devices, func(a, b failfastplugin.DeviceID) int { return strings.Compare(a.String(), b.String()) })
	return devices
}

// pools returns resources with one slice per pool holding devices dev-0 ...
// dev-<n-1>.
func pools(devicesPerPool map[string]int) resourceslice.DriverResources {
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	for name, n := range devicesPerPool {
		var devices []resourceapi.Device
		for i := range n {
			devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("dev-%d", i)})
		}
		resources.Pools[name] = resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: devices}}}
	}
	return resources
}

// taintFailures returns the counter of taint failures of driverName by
// reason.
func taintFailures(t *testing.T, driverName string) map[string]float64 {
	t.Helper()
	return counterValues(t, failfastplugin.DeviceTaintFailuresMetric, driverName, "reason")
}

// counterValues returns the values of the counter metric of driverName in
// legacyregistry, by label (none counted yet: empty).
func counterValues(t *testing.T, metric, driverName, label string) map[string]float64 {
	t.Helper()
	values, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, metric, map[string]string{"driver_name": driverName}, label)
	if err != nil {
		return map[string]float64{}
	}
	return values
}

func ptrTo[T any](v T) *T { return &v }
