// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

const faultNode = "node-1"

// apiPublisher stands in for the kubeletplugin helper's ResourceSlice
// controller: like it, PublishResources returns at once and the slices reach
// the (fake) API server later, after delay. One slice per pool, named after
// the pool.
type apiPublisher struct {
	client     *fake.Clientset
	driverName string
	delay      time.Duration
	// dropTaints makes the API server drop device taints, like one with
	// the DRADeviceTaints feature off: the taints never become visible.
	dropTaints bool
	// err fails PublishResources.
	err error

	mu        sync.Mutex
	published []resourceslice.DriverResources
	seq       int
	applied   int
	wg        sync.WaitGroup
	applyErrs []error
}

func newAPIPublisher(driverName string) *apiPublisher {
	return &apiPublisher{client: fake.NewClientset(), driverName: driverName}
}

func (p *apiPublisher) PublishResources(ctx context.Context, resources resourceslice.DriverResources) error {
	if p.err != nil {
		return p.err
	}
	resources = *resources.DeepCopy()
	p.mu.Lock()
	p.published = append(p.published, resources)
	p.seq++
	seq := p.seq
	p.mu.Unlock()
	p.wg.Go(func() {
		time.Sleep(p.delay)
		p.mu.Lock()
		defer p.mu.Unlock()
		if seq < p.applied {
			return // a newer state is in the API already
		}
		p.applied = seq
		if err := p.apply(context.Background(), resources); err != nil {
			p.applyErrs = append(p.applyErrs, err)
		}
	})
	return nil
}

func (p *apiPublisher) apply(ctx context.Context, resources resourceslice.DriverResources) error {
	slicesAPI := p.client.ResourceV1().ResourceSlices()
	for poolName, pool := range resources.Pools {
		for i, slice := range pool.Slices {
			devices := slices.Clone(slice.Devices)
			if p.dropTaints {
				for j := range devices {
					devices[j].Taints = nil
				}
			}
			object := &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", faultNode, poolName, i)},
				Spec: resourceapi.ResourceSliceSpec{
					Driver:   p.driverName,
					NodeName: ptrTo(faultNode),
					Pool:     resourceapi.ResourcePool{Name: poolName, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
					Devices:  devices,
				},
			}
			_, err := slicesAPI.Update(ctx, object, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				_, err = slicesAPI.Create(ctx, object, metav1.CreateOptions{})
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// settle waits until everything published is in the API.
func (p *apiPublisher) settle(t *testing.T) {
	t.Helper()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.applyErrs) > 0 {
		t.Fatalf("fake API: %v", p.applyErrs)
	}
}

func (p *apiPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.published)
}

func (p *apiPublisher) last() resourceslice.DriverResources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published[len(p.published)-1]
}

// taintsInAPI returns the taints of every device in the API, by device.
func taintsInAPI(t *testing.T, client *fake.Clientset) map[failfastplugin.DeviceID][]resourceapi.DeviceTaint {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taints := map[failfastplugin.DeviceID][]resourceapi.DeviceTaint{}
	for _, slice := range list.Items {
		for _, device := range slice.Spec.Devices {
			if len(device.Taints) > 0 {
				taints[failfastplugin.DeviceID{Pool: slice.Spec.Pool.Name, Device: device.Name}] = device.Taints
			}
		}
	}
	return taints
}

// taintedIn returns the devices in resources with a taint of key, sorted.
func taintedIn(resources resourceslice.DriverResources, key string) []failfastplugin.DeviceID {
	var tainted []failfastplugin.DeviceID
	for poolName, pool := range resources.Pools {
		for _, slice := range pool.Slices {
			for _, device := range slice.Devices {
				if slices.ContainsFunc(device.Taints, func(t resourceapi.DeviceTaint) bool { return t.Key == key }) {
					tainted = append(tainted, failfastplugin.DeviceID{Pool: poolName, Device: device.Name})
				}
			}
		}
	}
	slices.SortFunc(tainted, func(a, b failfastplugin.DeviceID) int { return strings.Compare(a.String(), b.String()) })
	return tainted
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
	values, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, failfastplugin.DeviceTaintFailuresMetric,
		map[string]string{"driver_name": driverName}, "reason")
	if err != nil {
		// Nothing counted yet.
		return map[string]float64{}
	}
	return values
}

func ptrTo[T any](v T) *T { return &v }
