// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// validCDIName are the CDI device names container-device-interface accepts.
var validCDIName = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?$`)

// prepareOne prepares claim, through the device faults of the driver's
// publisher if it has them (taint mode, see newTestDriver).
func prepareOne(t *testing.T, d *Driver, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	var plugin kubeletplugin.DRAPlugin = d
	d.mu.Lock()
	if faults, ok := d.publisher.(faultingPublisher); ok {
		plugin = faults.Wrap(d)
	}
	d.mu.Unlock()
	got, err := plugin.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatalf("PrepareResourceClaims: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d results, want 1", len(got))
	}
	return got[claim.UID]
}

func unprepareOne(t *testing.T, d *Driver, claim *resourceapi.ResourceClaim) error {
	t.Helper()
	ref := kubeletplugin.NamespacedObject{UID: claim.UID}
	ref.Namespace, ref.Name = claim.Namespace, claim.Name
	got, err := d.UnprepareResourceClaims(t.Context(), []kubeletplugin.NamespacedObject{ref})
	if err != nil {
		t.Fatalf("UnprepareResourceClaims: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d results, want 1", len(got))
	}
	return got[claim.UID]
}

func TestNew(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg     Config
		wantErr string
	}{
		"defaults":            {cfg: Config{NodeName: testNode, CDIDir: "cdi"}},
		"no node":             {cfg: Config{CDIDir: "cdi"}, wantErr: "node name"},
		"no CDI dir":          {cfg: Config{NodeName: testNode}, wantErr: "CDI directory"},
		"too many devices":    {cfg: Config{NodeName: testNode, CDIDir: "cdi", NumDevices: MaxDevices + 1}, wantErr: "between 1 and 256"},
		"negative devices":    {cfg: Config{NodeName: testNode, CDIDir: "cdi", NumDevices: -1}, wantErr: "between 1 and 256"},
		"most devices":        {cfg: Config{NodeName: testNode, CDIDir: "cdi", NumDevices: 256, BrokenDevices: []string{"dev-255"}}},
		"unknown broken":      {cfg: Config{NodeName: testNode, CDIDir: "cdi", BrokenDevices: []string{"dev-4"}}, wantErr: `broken device "dev-4": unknown device`},
		"known broken":        {cfg: Config{NodeName: testNode, CDIDir: "cdi", BrokenDevices: []string{"dev-3"}}},
		"many devices broken": {cfg: Config{NodeName: testNode, CDIDir: "cdi", NumDevices: 20, BrokenDevices: []string{"dev-19"}}},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := New(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.DriverName() != DefaultDriverName {
				t.Errorf("driver name = %q", d.DriverName())
			}
		})
	}
}

func TestResources(t *testing.T) {
	d, publisher := newTestDriver(t, Config{NumDevices: 3})
	if publisher.count() != 1 {
		t.Fatalf("published %d times, want 1", publisher.count())
	}
	resources := publisher.published[0]
	pool, ok := resources.Pools[testNode]
	if !ok || len(resources.Pools) != 1 || len(pool.Slices) != 1 {
		t.Fatalf("want one pool %q with one slice, got %+v", testNode, resources)
	}
	devices := pool.Slices[0].Devices
	var names []string
	for i, device := range devices {
		names = append(names, device.Name)
		if index := device.Attributes["index"].IntValue; index == nil || *index != int64(i) {
			t.Errorf("device %s: index = %v, want %d", device.Name, index, i)
		}
		if model := device.Attributes["model"].StringValue; model == nil || *model != DeviceModel {
			t.Errorf("device %s: model = %v", device.Name, model)
		}
		if len(device.Taints) != 0 {
			t.Errorf("device %s tainted from the start", device.Name)
		}
	}
	if want := []string{"dev-0", "dev-1", "dev-2"}; !reflect.DeepEqual(names, want) {
		t.Errorf("devices = %v, want %v", names, want)
	}
	if !reflect.DeepEqual(d.Resources(), resources) {
		t.Errorf("Resources() differs from what was published")
	}
}

func TestPrepareWritesAndUnprepareRemovesCDI(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	claim := newClaim("two-requests", []resourceapi.DeviceRequestAllocationResult{
		result("gpu", "dev-0"),
		result("gpu", "dev-2"),
		result("my-nic/fast", "dev-3"),
		// Not ours: ignored.
		{Request: "other", Driver: "gpu.other.test", Pool: "p", Device: "x"},
	})
	specPath := CDISpecPath(d.cdiDir, testDriver, claim.UID)

	for range 2 { // idempotent
		res := prepareOne(t, d, claim)
		if res.Err != nil {
			t.Fatalf("prepare: %v", res.Err)
		}
		var gotDevices []string
		for _, device := range res.Devices {
			if device.PoolName != testNode || len(device.CDIDeviceIDs) != 1 || !strings.HasPrefix(device.CDIDeviceIDs[0], "dra-failfast.test/device=uid-two-requests-") {
				t.Errorf("unexpected device %+v", device)
			}
			gotDevices = append(gotDevices, device.Requests[0]+":"+device.DeviceName)
		}
		if want := []string{"gpu:dev-0", "gpu:dev-2", "my-nic/fast:dev-3"}; !reflect.DeepEqual(gotDevices, want) {
			t.Errorf("devices = %v, want %v", gotDevices, want)
		}

		data, err := os.ReadFile(specPath)
		if err != nil {
			t.Fatalf("CDI spec not written: %v", err)
		}
		var spec cdiSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			t.Fatalf("CDI spec: %v", err)
		}
		// What container runtimes read it with.
		var upstream cdispecs.Spec
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&upstream); err != nil {
			t.Fatalf("CDI spec does not decode as a CDI spec: %v", err)
		}
		if err := cdispecs.ValidateVersion(&upstream); err != nil {
			t.Errorf("CDI spec version: %v", err)
		}
		for _, device := range upstream.Devices {
			if !validCDIName.MatchString(device.Name) {
				t.Errorf("invalid CDI device name %q", device.Name)
			}
		}
		if spec.Version != CDIVersion || spec.Kind != "dra-failfast.test/device" || len(spec.Devices) != 3 {
			t.Fatalf("CDI spec = %s", data)
		}
		wantEnv := [][]string{
			{"DRA_DEVICE_GPU=dev-0,dev-2", "DRA_CLAIM=ns/two-requests"},
			{"DRA_DEVICE_GPU=dev-0,dev-2", "DRA_CLAIM=ns/two-requests"},
			{"DRA_DEVICE_MY_NIC=dev-3", "DRA_CLAIM=ns/two-requests"},
		}
		for i, device := range spec.Devices {
			if got := "dra-failfast.test/device=" + device.Name; got != res.Devices[i].CDIDeviceIDs[0] {
				t.Errorf("CDI device %d = %s, returned %s", i, got, res.Devices[i].CDIDeviceIDs[0])
			}
			if !reflect.DeepEqual(device.ContainerEdits.Env, wantEnv[i]) {
				t.Errorf("CDI device %s env = %q, want %q", device.Name, device.ContainerEdits.Env, wantEnv[i])
			}
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(d.cdiDir, ".*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	if stats := d.Stats().Claims[string(claim.UID)]; !stats.Prepared || stats.PrepareCalls != 2 || !reflect.DeepEqual(stats.Devices, []string{"dev-0", "dev-2", "dev-3"}) {
		t.Errorf("stats = %+v", stats)
	}

	for range 2 { // idempotent
		if err := unprepareOne(t, d, claim); err != nil {
			t.Fatalf("unprepare: %v", err)
		}
		if _, err := os.Stat(specPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("CDI spec still there: %v", err)
		}
	}
	if stats := d.Stats().Claims[string(claim.UID)]; stats.Prepared || stats.UnprepareCalls != 2 {
		t.Errorf("stats = %+v", stats)
	}
}

func TestPrepareWithoutOurDevices(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	claim := newClaim("foreign", []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: "gpu.other.test", Pool: "p", Device: "x"}})
	res := prepareOne(t, d, claim)
	if res.Err != nil || len(res.Devices) != 0 {
		t.Fatalf("got %+v, want success without devices", res)
	}
	if entries, _ := os.ReadDir(d.cdiDir); len(entries) != 0 {
		t.Errorf("CDI dir not empty: %v", entries)
	}
}

func TestUnknownDeviceIsPermanent(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	for name, res := range map[string]resourceapi.DeviceRequestAllocationResult{
		"device": result("dev", "dev-9"),
		"pool":   {Request: "dev", Driver: testDriver, Pool: "node-2", Device: "dev-0"},
	} {
		t.Run(name, func(t *testing.T) {
			got := prepareOne(t, d, newClaim("unknown-"+name, []resourceapi.DeviceRequestAllocationResult{res}))
			if !failfastplugin.IsPermanent(got.Err) || !strings.Contains(got.Err.Error(), "does not exist") {
				t.Errorf("got %v, want a permanent 'does not exist' error", got.Err)
			}
		})
	}
}

func TestTransientThenSucceed(t *testing.T) {
	for name, tc := range map[string]struct {
		parameters string
		calls      int
		// wantFail[i]: call i+1 fails.
		wantFail []bool
		wantMsg  string
	}{
		"no config": {
			calls:    2,
			wantFail: []bool{false, false},
		},
		"succeed": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed"}`,
			calls:      2,
			wantFail:   []bool{false, false},
		},
		"two failures": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":2,"message":"try again"}`,
			calls:      5,
			wantFail:   []bool{true, true, false, false, false},
			wantMsg:    "try again",
		},
		"one failure": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1}`,
			calls:      3,
			wantFail:   []bool{true, false, false},
			wantMsg:    "injected transient failure (failure 1 of 1)",
		},
		"forever": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":0}`,
			calls:      6,
			wantFail:   []bool{true, true, true, true, true, true},
			wantMsg:    "of unlimited",
		},
		"forever without failures": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient"}`,
			calls:      3,
			wantFail:   []bool{true, true, true},
		},
		"permanent": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"gone for good"}`,
			calls:      3,
			wantFail:   []bool{true, true, true},
			wantMsg:    "claim ns/c: gone for good",
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDriver(t, Config{})
			var configs []resourceapi.DeviceAllocationConfiguration
			if tc.parameters != "" {
				configs = append(configs, claimConfig(tc.parameters, "dev"))
			}
			claim := newClaim("c", oneDevice("dev-0"), configs...)
			wantPermanent := name == "permanent"
			specPath := CDISpecPath(d.cdiDir, testDriver, claim.UID)
			for i := range tc.calls {
				res := prepareOne(t, d, claim)
				failed := res.Err != nil
				if failed != tc.wantFail[i] {
					t.Fatalf("call %d: err = %v, want failure %v", i+1, res.Err, tc.wantFail[i])
				}
				_, statErr := os.Stat(specPath)
				if failed {
					if failfastplugin.IsPermanent(res.Err) != wantPermanent {
						t.Errorf("call %d: permanent = %v, want %v: %v", i+1, !wantPermanent, wantPermanent, res.Err)
					}
					if !strings.Contains(res.Err.Error(), tc.wantMsg) || !strings.Contains(res.Err.Error(), "ns/c") {
						t.Errorf("call %d: error %q does not contain %q and the claim", i+1, res.Err, tc.wantMsg)
					}
					if statErr == nil {
						t.Errorf("call %d: CDI spec written for a failed claim", i+1)
					}
				} else if statErr != nil {
					t.Errorf("call %d: CDI spec missing: %v", i+1, statErr)
				}
				stats := d.Stats().Claims[string(claim.UID)]
				if stats.PrepareCalls != i+1 || stats.Prepared == failed || (stats.LastError != "") != failed || stats.Permanent != (failed && wantPermanent) {
					t.Errorf("call %d: stats = %+v", i+1, stats)
				}
			}
		})
	}
}

// TestTransientCountIsPerClaim: each claim has its own count, and Reset
// clears the counters but not the count behind Transient.
func TestTransientCountIsPerClaim(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	const twice = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":2}`
	a := newClaim("a", oneDevice("dev-0"), claimConfig(twice))
	b := newClaim("b", oneDevice("dev-1"), claimConfig(twice))
	if res := prepareOne(t, d, a); res.Err == nil {
		t.Fatal("a: first call succeeded")
	}
	got, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got[a.UID].Err == nil || got[b.UID].Err == nil {
		t.Fatalf("second call of a / first of b: want failures, got %v / %v", got[a.UID].Err, got[b.UID].Err)
	}
	d.Reset()
	if res := prepareOne(t, d, a); res.Err != nil {
		t.Fatalf("a: third call failed after Reset: %v", res.Err)
	}
	if res := prepareOne(t, d, b); res.Err == nil {
		t.Fatal("b: second call succeeded")
	}
	stats := d.Stats()
	if stats.Claims[string(a.UID)].PrepareCalls != 1 || stats.Claims[string(b.UID)].PrepareCalls != 1 {
		t.Errorf("counters not reset: %+v", stats.Claims)
	}
}

func TestBrokenDevice(t *testing.T) {
	for name, tc := range map[string]struct {
		taint       bool
		devices     []resourceapi.DeviceRequestAllocationResult
		wantMsg     string
		wantTainted []string
	}{
		"no taint mode": {
			devices: oneDevice("dev-1"),
			wantMsg: "claim ns/broken: device dev-1 is broken",
		},
		"taint mode": {
			taint:       true,
			devices:     oneDevice("dev-1"),
			wantMsg:     "claim ns/broken: device dev-1 is broken",
			wantTainted: []string{"dev-1"},
		},
		"two broken devices, one healthy": {
			taint:       true,
			devices:     []resourceapi.DeviceRequestAllocationResult{result("a", "dev-0"), result("b", "dev-2"), result("c", "dev-1")},
			wantMsg:     "device dev-2 is broken, device dev-1 is broken",
			wantTainted: []string{"dev-1", "dev-2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, publisher := newTestDriver(t, Config{BrokenDevices: []string{"dev-1", "dev-2"}, TaintBroken: tc.taint})
			claim := newClaim("broken", tc.devices)
			for call := 1; call <= 2; call++ {
				res := prepareOne(t, d, claim)
				if !failfastplugin.IsPermanent(res.Err) || !strings.Contains(res.Err.Error(), tc.wantMsg) || strings.Contains(res.Err.Error(), "not tainted") {
					t.Fatalf("call %d: got %v, want permanent error containing %q", call, res.Err, tc.wantMsg)
				}
				// Taint mode reports the broken devices to the library.
				var faultDevices []string
				for _, device := range failfastplugin.FaultDevices(res.Err) {
					if device.Pool == testNode {
						faultDevices = append(faultDevices, device.Device)
					}
				}
				slices.Sort(faultDevices)
				if !reflect.DeepEqual(faultDevices, tc.wantTainted) {
					t.Errorf("call %d: device fault for %v, want %v", call, faultDevices, tc.wantTainted)
				}
				got := publisher.taints()
				slices.Sort(got)
				if !reflect.DeepEqual(got, tc.wantTainted) {
					t.Errorf("call %d: taint rules for %v, want %v", call, got, tc.wantTainted)
				}
			}
			// The taints are rules of their own: nothing republished.
			if publisher.count() != 1 {
				t.Errorf("published %d times, want 1", publisher.count())
			}
			if got := d.Stats().TaintedDevices; !reflect.DeepEqual(got, tc.wantTainted) && len(got)+len(tc.wantTainted) > 0 {
				t.Errorf("stats: tainted = %v, want %v", got, tc.wantTainted)
			}

			// A claim on a healthy device is not affected.
			if res := prepareOne(t, d, newClaim("healthy", oneDevice("dev-3"))); res.Err != nil {
				t.Errorf("healthy device: %v", res.Err)
			}

			// Repaired: the claim succeeds and the taint goes away.
			for _, device := range []string{"dev-1", "dev-2"} {
				if err := d.SetBroken(t.Context(), device, false); err != nil {
					t.Fatal(err)
				}
			}
			if got := publisher.taints(); len(got) != 0 {
				t.Errorf("taints after repair: %v", got)
			}
			if res := prepareOne(t, d, claim); res.Err != nil {
				t.Errorf("after repair: %v", res.Err)
			}
		})
	}
}

func TestSetBroken(t *testing.T) {
	d, publisher := newTestDriver(t, Config{TaintBroken: true})
	claim := newClaim("c", oneDevice("dev-3"))
	if err := d.SetBroken(t.Context(), "dev-3", true); err != nil {
		t.Fatal(err)
	}
	if publisher.count() != 1 {
		t.Errorf("breaking a device published (%d times): the taint must wait for a prepare call", publisher.count())
	}
	if got := d.Stats().BrokenDevices; !reflect.DeepEqual(got, []string{"dev-3"}) {
		t.Errorf("broken = %v", got)
	}
	if res := prepareOne(t, d, claim); !failfastplugin.IsPermanent(res.Err) {
		t.Fatalf("got %v, want permanent", res.Err)
	}
	if got := publisher.taints(); !reflect.DeepEqual(got, []string{"dev-3"}) {
		t.Errorf("taints = %v", got)
	}
	if err := d.SetBroken(t.Context(), "dev-7", true); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("unknown device: err = %v", err)
	}
	if err := d.SetBroken(t.Context(), "dev-3", false); err != nil {
		t.Fatal(err)
	}
	if got := publisher.taints(); len(got) != 0 {
		t.Errorf("taints after repair = %v", got)
	}
	stats := d.Stats()
	if len(stats.BrokenDevices) != 0 || len(stats.TaintedDevices) != 0 {
		t.Errorf("stats = %+v", stats)
	}
}

func TestCounters(t *testing.T) {
	d, _ := newTestDriver(t, Config{BrokenDevices: []string{"dev-1"}})
	ok := newClaim("ok", oneDevice("dev-0"))
	broken := newClaim("broken", oneDevice("dev-1"))
	for range 3 {
		prepareOne(t, d, ok)
	}
	prepareOne(t, d, broken)
	_ = unprepareOne(t, d, ok)
	// Unprepare of a claim the driver never saw (e.g. before a restart).
	_ = unprepareOne(t, d, newClaim("unseen", nil))

	stats := d.Stats()
	want := map[string]ClaimStats{
		"uid-ok":     {Namespace: testNamespace, Name: "ok", PrepareCalls: 3, UnprepareCalls: 1, Devices: []string{"dev-0"}},
		"uid-broken": {Namespace: testNamespace, Name: "broken", PrepareCalls: 1, LastError: "claim ns/broken: device dev-1 is broken", Permanent: true, Devices: []string{"dev-1"}},
		"uid-unseen": {Namespace: testNamespace, Name: "unseen", UnprepareCalls: 1},
	}
	for uid, claim := range stats.Claims {
		if claim.LastPrepare == nil && claim.PrepareCalls > 0 || claim.LastUnprepare == nil && claim.UnprepareCalls > 0 ||
			claim.LastPrepareAnswered == nil && claim.PrepareCalls > 0 {
			t.Errorf("%s: call times missing: %+v", uid, claim)
		}
		if len(claim.PrepareTimes) != claim.PrepareCalls || len(claim.UnprepareTimes) != claim.UnprepareCalls {
			t.Errorf("%s: %d prepare and %d unprepare times recorded for %d and %d calls", uid,
				len(claim.PrepareTimes), len(claim.UnprepareTimes), claim.PrepareCalls, claim.UnprepareCalls)
		}
		if claim.LastPrepareAnswered != nil && claim.LastPrepareAnswered.Before(*claim.LastPrepare) {
			t.Errorf("%s: answered %v before the call %v", uid, claim.LastPrepareAnswered, claim.LastPrepare)
		}
		claim.LastPrepare, claim.LastUnprepare, claim.LastPrepareAnswered = nil, nil, nil
		claim.PrepareTimes, claim.UnprepareTimes = nil, nil
		stats.Claims[uid] = claim
	}
	if !reflect.DeepEqual(stats.Claims, want) {
		t.Errorf("claims =\n%+v\nwant\n%+v", stats.Claims, want)
	}
	if got, ok := stats.Claim(testNamespace, "broken"); !ok || got.PrepareCalls != 1 {
		t.Errorf("Claim(ns, broken) = %+v, %v", got, ok)
	}
	if _, ok := stats.Claim("other", "broken"); ok {
		t.Error("Claim(other, broken) found")
	}
	if prepares, unprepares := stats.Total(); prepares != 4 || unprepares != 2 {
		t.Errorf("Total() = %d, %d", prepares, unprepares)
	}

	d.Reset()
	if stats := d.Stats(); len(stats.Claims) != 0 || !reflect.DeepEqual(stats.BrokenDevices, []string{"dev-1"}) {
		t.Errorf("after Reset: %+v", stats)
	}
}

func TestCDINames(t *testing.T) {
	if got := envName("my-nic.x/sub"); got != "MY_NIC_X_SUB" {
		t.Errorf("envName = %q", got)
	}
	if got := cdiDeviceName("uid", "req/sub", "dev-0"); got != "uid-req_sub-dev-0" || !validCDIName.MatchString(got) {
		t.Errorf("cdiDeviceName = %q", got)
	}
}

// A claim retried forever records at most MaxRecordedCalls call times.
func TestCallTimesBounded(t *testing.T) {
	d, _ := newTestDriver(t, Config{BrokenDevices: []string{"dev-1"}})
	broken := newClaim("broken", oneDevice("dev-1"))
	for range MaxRecordedCalls + 3 {
		prepareOne(t, d, broken)
	}
	stats := d.Stats()
	claim, ok := stats.Claim(testNamespace, "broken")
	if !ok || claim.PrepareCalls != MaxRecordedCalls+3 || len(claim.PrepareTimes) != MaxRecordedCalls {
		t.Errorf("%d calls, %d times recorded, want %d and %d", claim.PrepareCalls, len(claim.PrepareTimes), MaxRecordedCalls+3, MaxRecordedCalls)
	}
}
