// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

const testNode = "node-1"

// gpuClaim is a claim allocated gpus of testNode for request "gpu", with
// the opaque config parameters (none when empty).
func gpuClaim(name, parameters string, gpus ...string) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, gpu := range gpus {
		claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driverName, Pool: testNode, Device: gpu})
	}
	if parameters != "" {
		entry := resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(parameters)}}}
		claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: entry}}
		claim.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, DeviceConfiguration: entry}}
	}
	return claim
}

func newTestDriver(t *testing.T, broken ...string) *driver {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "broken")
	if err := os.WriteFile(file, []byte(strings.Join(broken, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &driver{pool: testNode, cdiDir: dir, broken: brokenFromFile(file)}
}

func TestValidateConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		parameters string
		wantErr    string
	}{
		"exclusive":      {parameters: `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"Exclusive"}`},
		"time slicing":   {parameters: `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"TimeSlicing"}`},
		"default":        {parameters: `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig"}`},
		"bad sharing":    {parameters: `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"MPS"}`, wantErr: `sharing must be Exclusive or TimeSlicing, got "MPS"`},
		"unknown field":  {parameters: `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharng":"TimeSlicing"}`, wantErr: `unknown field "sharng"`},
		"wrong kind":     {parameters: `{"apiVersion":"gpu.example.com/v1alpha1","kind":"CPUConfig"}`, wantErr: `apiVersion/kind must be gpu.example.com/v1alpha1/GPUConfig`},
		"not an object":  {parameters: `[1]`, wantErr: "not a GPUConfig"},
		"empty document": {parameters: ``, wantErr: "not a GPUConfig"},
	} {
		t.Run(name, func(t *testing.T) {
			err := validateConfig(t.Context(), admission.OpaqueConfig{Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(tc.parameters)}})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validateConfig(%s) = %v, want error containing %q", tc.parameters, err, tc.wantErr)
			}
		})
	}
}

// TestPrepareAndUnprepare: a healthy claim gets a CDI spec with one device
// per GPU, carrying its config; unprepare removes the spec, twice without
// harm.
func TestPrepareAndUnprepare(t *testing.T) {
	d := newTestDriver(t)
	claim := gpuClaim("ok", `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"TimeSlicing"}`, "gpu-0", "gpu-2")
	result, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatal(err)
	}
	got := result[claim.UID]
	if got.Err != nil {
		t.Fatalf("prepare: %v", got.Err)
	}
	want := []kubeletplugin.Device{
		{Requests: []string{"gpu"}, PoolName: testNode, DeviceName: "gpu-0", CDIDeviceIDs: []string{"gpu.example.com/gpu=uid-ok-gpu-0"}},
		{Requests: []string{"gpu"}, PoolName: testNode, DeviceName: "gpu-2", CDIDeviceIDs: []string{"gpu.example.com/gpu=uid-ok-gpu-2"}},
	}
	if !reflect.DeepEqual(got.Devices, want) {
		t.Errorf("devices = %+v, want %+v", got.Devices, want)
	}
	data, err := os.ReadFile(cdiSpecPath(d.cdiDir, claim.UID))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != cdiKind || len(spec.Devices) != 2 ||
		!reflect.DeepEqual(spec.Devices[1].ContainerEdits.Env, []string{"DRA_GPU_DEVICE_GPU=gpu-2", "DRA_GPU_SHARING_GPU=TimeSlicing"}) {
		t.Errorf("CDI spec = %s", data)
	}

	for range 2 {
		unprepared, err := d.UnprepareResourceClaims(t.Context(), []kubeletplugin.NamespacedObject{{UID: claim.UID}})
		if err != nil || unprepared[claim.UID] != nil {
			t.Fatalf("unprepare: %v, %v", err, unprepared[claim.UID])
		}
	}
	if _, err := os.Stat(cdiSpecPath(d.cdiDir, claim.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}
}

// TestPrepareInvalidConfig: invalid config that got past the webhook fails
// the claim permanently, with the validator's words, and prepares nothing;
// the other claim of the same call is prepared.
func TestPrepareInvalidConfig(t *testing.T) {
	d := newTestDriver(t)
	bad := gpuClaim("bad", `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"MPS"}`, "gpu-0")
	good := gpuClaim("good", "", "gpu-1")
	result, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{bad, good})
	if err != nil {
		t.Fatal(err)
	}
	err = result[bad.UID].Err
	var invalid *admission.InvalidConfigError
	if !failfastplugin.IsPermanent(err) || !errors.As(err, &invalid) || !strings.Contains(err.Error(), `sharing must be Exclusive or TimeSlicing, got "MPS"`) {
		t.Errorf("invalid config: %v, want a permanent InvalidConfigError with the validator's words", err)
	}
	if _, statErr := os.Stat(cdiSpecPath(d.cdiDir, bad.UID)); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("CDI spec written for a claim with invalid config")
	}
	if result[good.UID].Err != nil || len(result[good.UID].Devices) != 1 {
		t.Errorf("the other claim: %+v", result[good.UID])
	}
}

// TestPrepareBrokenGPU: a broken GPU fails the claim permanently with a
// DeviceFault that names exactly the broken GPUs of the claim; a claim on
// healthy GPUs is prepared. A health check that cannot be read is no verdict:
// the error stays transient.
func TestPrepareBrokenGPU(t *testing.T) {
	d := newTestDriver(t, "gpu-1", "gpu-3 # fan failure")
	broken := gpuClaim("broken", "", "gpu-0", "gpu-1", "gpu-3")
	healthy := gpuClaim("healthy", "", "gpu-2")
	result, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{broken, healthy})
	if err != nil {
		t.Fatal(err)
	}
	err = result[broken.UID].Err
	wantDevices := []failfastplugin.DeviceID{{Pool: testNode, Device: "gpu-1"}, {Pool: testNode, Device: "gpu-3"}}
	if !failfastplugin.IsPermanent(err) || !reflect.DeepEqual(failfastplugin.FaultDevices(err), wantDevices) || err.Error() != "GPU gpu-1, gpu-3 failed its health check" {
		t.Errorf("broken GPUs: %v (devices %v), want a permanent DeviceFault on %v", err, failfastplugin.FaultDevices(err), wantDevices)
	}
	if result[healthy.UID].Err != nil {
		t.Errorf("healthy claim: %v", result[healthy.UID].Err)
	}

	d.broken = func() (map[string]bool, error) { return nil, errors.New("health endpoint down") }
	result, _ = d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{broken})
	if err := result[broken.UID].Err; err == nil || failfastplugin.IsPermanent(err) {
		t.Errorf("unknown health: %v, want a transient error", err)
	}
}

// fakeFaults records ClearDeviceFault; a cleared device is no longer
// tainted.
type fakeFaults struct {
	mu      sync.Mutex
	tainted []failfastplugin.DeviceID
	cleared []failfastplugin.DeviceID
}

func (f *fakeFaults) TaintedDevices() []failfastplugin.DeviceID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tainted)
}

func (f *fakeFaults) ClearDeviceFault(_ context.Context, devices ...failfastplugin.DeviceID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleared = append(f.cleared, devices...)
	f.tainted = slices.DeleteFunc(f.tainted, func(d failfastplugin.DeviceID) bool { return slices.Contains(devices, d) })
	return nil
}

func (f *fakeFaults) clearedDevices() []failfastplugin.DeviceID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cleared)
}

// TestWatchRepairs: a GPU that recovers while the driver runs is untainted
// at a later health check, without a restart; one still broken keeps its
// taint, and a health check that cannot be read clears nothing and is tried
// again.
func TestWatchRepairs(t *testing.T) {
	var mu sync.Mutex
	broken := map[string]bool{"gpu-0": true, "gpu-1": true}
	healthDown := true
	calls := 0
	d := &driver{pool: testNode, broken: func() (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if healthDown {
			return nil, errors.New("health endpoint down")
		}
		return maps.Clone(broken), nil
	}}
	// change runs f under the health check's lock, then waits for two more
	// checks: the second began after the change.
	change := func(f func()) {
		t.Helper()
		mu.Lock()
		f()
		want := calls + 2
		mu.Unlock()
		if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return calls >= want, nil
		}); err != nil {
			t.Fatalf("the health check did not run again: %v", err)
		}
	}
	faults := &fakeFaults{tainted: []failfastplugin.DeviceID{{Pool: testNode, Device: "gpu-0"}, {Pool: testNode, Device: "gpu-1"}}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.watchRepairs(ctx, faults, 5*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()

	change(func() {}) // the health check cannot be read
	if cleared := faults.clearedDevices(); len(cleared) != 0 {
		t.Fatalf("health check down: cleared %v", cleared)
	}
	change(func() { healthDown = false }) // both still broken
	if cleared := faults.clearedDevices(); len(cleared) != 0 {
		t.Fatalf("both GPUs broken: cleared %v", cleared)
	}
	change(func() { delete(broken, "gpu-1") }) // gpu-1 repaired
	if cleared, want := faults.clearedDevices(), []failfastplugin.DeviceID{{Pool: testNode, Device: "gpu-1"}}; !reflect.DeepEqual(cleared, want) {
		t.Errorf("gpu-1 repaired: cleared %v, want %v", cleared, want)
	}
	if tainted, want := faults.TaintedDevices(), []failfastplugin.DeviceID{{Pool: testNode, Device: "gpu-0"}}; !reflect.DeepEqual(tainted, want) {
		t.Errorf("tainted %v, want %v", tainted, want)
	}
}

// TestClearRepaired: at start, the faults of this node's GPUs that are
// healthy now are cleared; broken GPUs, other pools and an unreadable
// health check keep theirs.
func TestClearRepaired(t *testing.T) {
	d := newTestDriver(t, "gpu-1")
	faults := &fakeFaults{tainted: []failfastplugin.DeviceID{
		{Pool: testNode, Device: "gpu-0"}, {Pool: testNode, Device: "gpu-1"}, {Pool: "other-node", Device: "gpu-2"},
	}}
	if err := d.clearRepaired(t.Context(), faults); err != nil {
		t.Fatal(err)
	}
	if want := []failfastplugin.DeviceID{{Pool: testNode, Device: "gpu-0"}}; !reflect.DeepEqual(faults.cleared, want) {
		t.Errorf("cleared %v, want %v", faults.cleared, want)
	}
	faults.cleared = nil
	d.broken = func() (map[string]bool, error) { return nil, errors.New("health endpoint down") }
	if err := d.clearRepaired(t.Context(), faults); err == nil || len(faults.cleared) != 0 {
		t.Errorf("unknown health: err %v, cleared %v; want an error and nothing cleared", err, faults.cleared)
	}
}

// TestPrepareForeignPool: a GPU of another node is a transient error (the
// claim is on the wrong node: nothing about the device is known).
func TestPrepareForeignPool(t *testing.T) {
	d := newTestDriver(t)
	claim := gpuClaim("foreign", "", "gpu-0")
	claim.Status.Allocation.Devices.Results[0].Pool = "node-2"
	result, _ := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{claim})
	if err := result[claim.UID].Err; err == nil || failfastplugin.IsPermanent(err) {
		t.Errorf("GPU of another node: %v, want a transient error", err)
	}
}

func TestAppliesTo(t *testing.T) {
	for _, tc := range []struct {
		requests []string
		request  string
		want     bool
	}{
		{nil, "gpu", true},
		{[]string{"gpu"}, "gpu", true},
		{[]string{"gpu"}, "gpu/small", true},
		{[]string{"gpu/small"}, "gpu/small", true},
		{[]string{"other"}, "gpu", false},
		{[]string{"gpu/large"}, "gpu/small", false},
	} {
		if got := appliesTo(tc.requests, tc.request); got != tc.want {
			t.Errorf("appliesTo(%v, %q) = %v, want %v", tc.requests, tc.request, got, tc.want)
		}
	}
}

type fakeRegistration struct {
	status *registerapi.RegistrationStatus
}

func (f fakeRegistration) RegistrationStatus() *registerapi.RegistrationStatus { return f.status }

func TestHealthz(t *testing.T) {
	for name, tc := range map[string]struct {
		status *registerapi.RegistrationStatus
		want   int
	}{
		"not yet":    {want: http.StatusServiceUnavailable},
		"refused":    {status: &registerapi.RegistrationStatus{PluginRegistered: false, Error: "no"}, want: http.StatusServiceUnavailable},
		"registered": {status: &registerapi.RegistrationStatus{PluginRegistered: true}, want: http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			recorder := httptest.NewRecorder()
			httpHandler(fakeRegistration{tc.status}).ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if recorder.Code != tc.want {
				t.Errorf("/healthz = %d, want %d", recorder.Code, tc.want)
			}
		})
	}
	recorder := httptest.NewRecorder()
	httpHandler(fakeRegistration{}).ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if recorder.Code != http.StatusOK {
		t.Errorf("/metrics = %d", recorder.Code)
	}
}
