// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

const (
	permanentConfig = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"from the config"}`
)

func TestResourcesInSeveralSlices(t *testing.T) {
	for name, tc := range map[string]struct {
		devices        int
		wantSliceSizes []int
	}{
		"one":           {devices: 1, wantSliceSizes: []int{1}},
		"one full":      {devices: 64, wantSliceSizes: []int{64}},
		"one more":      {devices: 65, wantSliceSizes: []int{64, 1}},
		"200":           {devices: 200, wantSliceSizes: []int{64, 64, 64, 8}},
		"most possible": {devices: MaxDevices, wantSliceSizes: []int{64, 64, 64, 64}},
	} {
		t.Run(name, func(t *testing.T) {
			d, publisher := newTestDriver(t, Config{NumDevices: tc.devices, BrokenDevices: []string{DeviceName(tc.devices - 1)}, TaintBroken: true})
			if res := prepareOne(t, d, newClaim("c", oneDevice(DeviceName(tc.devices-1)))); !failfastplugin.IsPermanent(res.Err) || strings.Contains(res.Err.Error(), "not tainted") {
				t.Fatalf("prepare on the broken device: %v", res.Err)
			}
			resources := publisher.last()
			pool, ok := resources.Pools[testNode]
			if !ok || len(resources.Pools) != 1 {
				t.Fatalf("want one pool %q, got %+v", testNode, resources)
			}
			var sizes []int
			next := 0
			for _, slice := range pool.Slices {
				sizes = append(sizes, len(slice.Devices))
				for _, device := range slice.Devices {
					if device.Name != DeviceName(next) {
						t.Fatalf("device %d is %s, want %s", next, device.Name, DeviceName(next))
					}
					next++
				}
			}
			if !reflect.DeepEqual(sizes, tc.wantSliceSizes) {
				t.Errorf("slice sizes = %v, want %v", sizes, tc.wantSliceSizes)
			}
			if got := publisher.taints(); !reflect.DeepEqual(got, []string{DeviceName(tc.devices - 1)}) {
				t.Errorf("tainted = %v", got)
			}
		})
	}
}

func TestMessageRepeat(t *testing.T) {
	const controlChars = "\u001b[31mred\u001b[0m\nsecond line\t"
	for name, tc := range map[string]struct {
		parameters string
		want       string
	}{
		"permanent, control characters unchanged": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"\u001b[31mred\u001b[0m\nsecond line\t","messageRepeat":3}`,
			want:       "claim ns/c: " + strings.Repeat(controlChars, 3),
		},
		"transient": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","message":"ab","messageRepeat":4}`,
			want:       "claim ns/c: abababab (failure 1 of unlimited)",
		},
		"default text": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","messageRepeat":2}`,
			want:       "claim ns/c: injected permanent failureinjected permanent failure",
		},
		"once": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"x","messageRepeat":1}`,
			want:       "claim ns/c: x",
		},
		"large": {
			parameters: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"0123456789","messageRepeat":100000}`,
			want:       "claim ns/c: " + strings.Repeat("0123456789", 100000),
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDriver(t, Config{})
			res := prepareOne(t, d, newClaim("c", oneDevice("dev-0"), claimConfig(tc.parameters)))
			if res.Err == nil || res.Err.Error() != tc.want {
				got := "<nil>"
				if res.Err != nil {
					got = abbreviate(res.Err.Error())
				}
				t.Errorf("error = %s, want %s", got, abbreviate(tc.want))
			}
		})
	}
}

func TestUnprepareFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		configs []string
		// wantFail[i]: unprepare call i+1 fails.
		wantFail []bool
	}{
		"none": {
			wantFail: []bool{false, false},
		},
		"two": {
			configs:  []string{`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":2}`},
			wantFail: []bool{true, true, false, false},
		},
		"zero": {
			configs:  []string{`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":0}`},
			wantFail: []bool{false},
		},
		"with a transient prepare": {
			configs:  []string{`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1,"unprepareFailures":1}`},
			wantFail: []bool{true, false},
		},
		"largest of several configs": {
			configs: []string{
				`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":3}`,
				`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1,"unprepareFailures":1}`,
			},
			wantFail: []bool{true, true, true, false},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDriver(t, Config{})
			var configs []resourceapi.DeviceAllocationConfiguration
			for _, config := range tc.configs {
				configs = append(configs, claimConfig(config))
			}
			claim := newClaim("c", oneDevice("dev-0"), configs...)
			for res := prepareOne(t, d, claim); res.Err != nil; res = prepareOne(t, d, claim) {
			}
			specPath := CDISpecPath(d.cdiDir, testDriver, claim.UID)
			for i, wantFail := range tc.wantFail {
				err := unprepareOne(t, d, claim)
				if (err != nil) != wantFail {
					t.Fatalf("unprepare call %d: err = %v, want failure %v", i+1, err, wantFail)
				}
				_, statErr := os.Stat(specPath)
				stats := d.Stats().Claims[string(claim.UID)]
				if wantFail {
					if failfastplugin.IsPermanent(err) || !strings.Contains(err.Error(), "claim ns/c: injected unprepare failure") {
						t.Errorf("unprepare call %d: error %v, want a plain injected failure", i+1, err)
					}
					if statErr != nil {
						t.Errorf("unprepare call %d failed but removed the CDI spec: %v", i+1, statErr)
					}
					if !stats.Prepared || stats.LastUnprepareError != err.Error() {
						t.Errorf("unprepare call %d: stats = %+v", i+1, stats)
					}
				} else if !errors.Is(statErr, os.ErrNotExist) || stats.Prepared || stats.LastUnprepareError != "" {
					t.Errorf("unprepare call %d succeeded: CDI spec %v, stats %+v", i+1, statErr, stats)
				}
				if stats.UnprepareCalls != i+1 {
					t.Errorf("unprepare call %d: counted %d", i+1, stats.UnprepareCalls)
				}
			}
		})
	}
}

func TestBehaviorOverride(t *testing.T) {
	ctx := t.Context()
	d, _ := newTestDriver(t, Config{})
	claim := newClaim("c", oneDevice("dev-0"), claimConfig(permanentConfig))
	other := newClaim("other", oneDevice("dev-1"), claimConfig(permanentConfig))
	other.Namespace = "other-ns"
	invalid := newClaim("invalid", oneDevice("dev-2"), claimConfig(`{"prepare":"Sometimes"}`))

	if res := prepareOne(t, d, claim); !failfastplugin.IsPermanent(res.Err) || !strings.Contains(res.Err.Error(), "from the config") {
		t.Fatalf("before the override: %v", res.Err)
	}

	// Succeed overrides the config, also an invalid one, in this namespace only.
	if err := d.SetBehavior(ctx, testNamespace, BehaviorSpec{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*resourceapi.ResourceClaim{claim, invalid} {
		if res := prepareOne(t, d, c); res.Err != nil {
			t.Errorf("%s with a Succeed override: %v", c.Name, res.Err)
		}
	}
	if res := prepareOne(t, d, other); !failfastplugin.IsPermanent(res.Err) {
		t.Errorf("claim of another namespace: %v, want its config's permanent error", res.Err)
	}
	if got := d.Stats().Behaviors; !reflect.DeepEqual(got, map[string]BehaviorSpec{testNamespace: {Prepare: PrepareSucceed}}) {
		t.Errorf("stats behaviors = %+v", got)
	}

	// Transient counts the calls made while the override is set, per claim.
	transient := BehaviorSpec{Prepare: PrepareTransient, Failures: ptr.To[int64](2), Message: "override"}
	if err := d.SetBehavior(ctx, testNamespace, transient); err != nil {
		t.Fatal(err)
	}
	for call, wantFail := range []bool{true, true, false} {
		res := prepareOne(t, d, claim)
		if (res.Err != nil) != wantFail || failfastplugin.IsPermanent(res.Err) {
			t.Fatalf("transient override, call %d: %v", call+1, res.Err)
		}
		if wantFail && !strings.Contains(res.Err.Error(), "claim ns/c: override (failure") {
			t.Errorf("call %d: error %q", call+1, res.Err)
		}
	}
	// Setting it again starts from zero.
	if err := d.SetBehavior(ctx, testNamespace, transient); err != nil {
		t.Fatal(err)
	}
	if res := prepareOne(t, d, claim); res.Err == nil || !strings.Contains(res.Err.Error(), "(failure 1 of 2)") {
		t.Errorf("after setting the override again: %v", res.Err)
	}

	// Invalid: rejected, the old override stays.
	err := d.SetBehavior(ctx, testNamespace, BehaviorSpec{Prepare: "Sometimes"})
	if !errors.Is(err, ErrInvalidBehavior) || !strings.Contains(err.Error(), `prepare "Sometimes" is not one of`) {
		t.Errorf("invalid override: err = %v", err)
	}
	if err := d.SetBehavior(ctx, "", BehaviorSpec{}); err == nil {
		t.Error("override without namespace accepted")
	}
	if got := d.Stats().Behaviors[testNamespace]; got.Prepare != PrepareTransient {
		t.Errorf("override after an invalid one = %+v", got)
	}

	// Cleared: the config counts again.
	d.ClearBehavior(ctx, testNamespace)
	if res := prepareOne(t, d, claim); !failfastplugin.IsPermanent(res.Err) {
		t.Errorf("after ClearBehavior: %v", res.Err)
	}
	if got := d.Stats().Behaviors; got != nil {
		t.Errorf("stats behaviors after clear = %+v", got)
	}
	d.ClearBehavior(ctx, "never-set")
}

// TestUnprepareFailuresOverride: a restarted driver knows nothing about
// the claims that its predecessor prepared; an override still makes their
// unprepare calls fail, and it wins over what a prepare call saw.
func TestUnprepareFailuresOverride(t *testing.T) {
	ctx := t.Context()
	d, _ := newTestDriver(t, Config{})
	claim := newClaim("c", oneDevice("dev-0"))
	if err := d.SetBehavior(ctx, testNamespace, BehaviorSpec{UnprepareFailures: ptr.To[int64](1)}); err != nil {
		t.Fatal(err)
	}
	// Never prepared by this process.
	if err := unprepareOne(t, d, claim); err == nil || !strings.Contains(err.Error(), "(failure 1 of 1)") {
		t.Errorf("first unprepare: %v", err)
	}
	if err := unprepareOne(t, d, claim); err != nil {
		t.Errorf("second unprepare: %v", err)
	}

	// The override wins over what the prepare call saw.
	configured := newClaim("configured", oneDevice("dev-1"), claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":5}`))
	d.ClearBehavior(ctx, testNamespace)
	if res := prepareOne(t, d, configured); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := d.SetBehavior(ctx, testNamespace, BehaviorSpec{}); err != nil {
		t.Fatal(err)
	}
	if err := unprepareOne(t, d, configured); err != nil {
		t.Errorf("unprepare with an override without unprepareFailures: %v", err)
	}
	// Without the override, the value the prepare call saw applies again,
	// counting all unprepare calls of the claim.
	d.ClearBehavior(ctx, testNamespace)
	if err := unprepareOne(t, d, configured); err == nil || !strings.Contains(err.Error(), "(failure 2 of 5)") {
		t.Errorf("unprepare after clearing the override: %v", err)
	}
}

func TestRepublish(t *testing.T) {
	d, err := New(Config{NodeName: testNode, CDIDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Republish(t.Context()); !errors.Is(err, ErrNotPublishing) {
		t.Errorf("Republish before SetPublisher: %v", err)
	}
	publisher := &fakePublisher{}
	if err := d.SetPublisher(t.Context(), publisher); err != nil {
		t.Fatal(err)
	}
	for want := 2; want <= 3; want++ {
		if err := d.Republish(t.Context()); err != nil {
			t.Fatal(err)
		}
		if publisher.count() != want {
			t.Errorf("published %d times, want %d: unchanged resources must be handed over again", publisher.count(), want)
		}
	}
}

// TestPrepareBehaviorJSON: the embedded BehaviorSpec encodes flat, as the
// opaque config always looked.
func TestPrepareBehaviorJSON(t *testing.T) {
	behavior := PrepareBehavior{
		APIVersion:   ConfigAPIVersion,
		Kind:         ConfigKind,
		BehaviorSpec: BehaviorSpec{Prepare: PrepareTransient, Failures: ptr.To[int64](2), Message: "m", Wire: &WireSpec{ErrorType: ptr.To[int64](-1)}},
	}
	data, err := json.Marshal(behavior)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":2,"message":"m","wire":{"errorType":-1}}`
	if string(data) != want {
		t.Errorf("JSON = %s\nwant   %s", data, want)
	}
	parsed, err := ParsePrepareBehavior(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*parsed, behavior) {
		t.Errorf("round trip = %+v, want %+v", *parsed, behavior)
	}
}
