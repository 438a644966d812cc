// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// nonDNS are the runs of characters that a DNS label cannot have.
var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

func dev(pool, device string) failfastplugin.DeviceID {
	return failfastplugin.DeviceID{Pool: pool, Device: device}
}

// faultPlugin fails each claim whose name is in faults with a DeviceFault
// for those devices, the claim "transient" with a plain error, and prepares
// every other claim.
type faultPlugin struct {
	scriptedPlugin
	faults map[string][]failfastplugin.DeviceID
	// message, if set, is the text of the faults.
	message string
}

func (p faultPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, ok := p.faults[claim.Name]
		switch {
		case ok:
			result[claim.UID] = kubeletplugin.PrepareResult{Err: failfastplugin.DeviceFault(faultError(claim.Name, p.message, devices), devices...)}
		case claim.Name == "transient":
			result[claim.UID] = kubeletplugin.PrepareResult{Err: errors.New("device busy")}
		default:
			result[claim.UID] = kubeletplugin.PrepareResult{}
		}
	}
	return result, nil
}

func faultError(claim, message string, devices []failfastplugin.DeviceID) error {
	if message != "" {
		return errors.New(message)
	}
	names := make([]string, len(devices))
	for i, device := range devices {
		names[i] = device.String()
	}
	return fmt.Errorf("claim %s: %s broken", claim, strings.Join(names, ", "))
}

func claimsNamed(names ...string) []*resourceapi.ResourceClaim {
	claims := make([]*resourceapi.ResourceClaim, len(names))
	for i, name := range names {
		claims[i] = allocatedClaim(name)
	}
	return claims
}

// startFaults returns DeviceFaults publishing to publisher, with resources
// published and in the API.
func startFaults(t *testing.T, cfg failfastplugin.DeviceFaultConfig, publisher *apiPublisher, resources map[string]int) *failfastplugin.DeviceFaults {
	t.Helper()
	if cfg.DriverName == "" {
		cfg.DriverName = publisher.driverName
	}
	if cfg.NodeName == "" {
		cfg.NodeName = faultNode
	}
	if cfg.KubeClient == nil {
		cfg.KubeClient = publisher.client
	}
	faults, err := failfastplugin.NewDeviceFaults(cfg)
	if err != nil {
		t.Fatalf("NewDeviceFaults: %v", err)
	}
	faults.SetPublisher(publisher)
	if err := faults.PublishResources(t.Context(), pools(resources)); err != nil {
		t.Fatalf("PublishResources: %v", err)
	}
	publisher.settle(t)
	return faults
}

func TestDeviceFaultError(t *testing.T) {
	base := errors.New("device pool/dev-1 is broken")
	a, b := dev("pool", "dev-1"), dev("other", "dev-1")
	if failfastplugin.DeviceFault(nil, a) != nil {
		t.Error("DeviceFault(nil) != nil")
	}
	fault := failfastplugin.DeviceFault(base, a, b)
	if fault.Error() != base.Error() || !errors.Is(fault, base) || !failfastplugin.IsPermanent(fault) {
		t.Errorf("DeviceFault changed the error: %q, Is(base) = %v, permanent = %v", fault, errors.Is(fault, base), failfastplugin.IsPermanent(fault))
	}
	for name, tc := range map[string]struct {
		err  error
		want []failfastplugin.DeviceID
	}{
		"nil":               {err: nil},
		"plain":             {err: base},
		"permanent":         {err: failfastplugin.Permanent(base)},
		"fault":             {err: fault, want: []failfastplugin.DeviceID{a, b}},
		"wrapped with %w":   {err: fmt.Errorf("claim x: %w", fault), want: []failfastplugin.DeviceID{a, b}},
		"formatted with %v": {err: fmt.Errorf("claim x: %v", fault)},
		"joined, each once": {
			err:  errors.Join(failfastplugin.DeviceFault(base, b), errors.New("other"), failfastplugin.DeviceFault(base, a, b)),
			want: []failfastplugin.DeviceID{b, a},
		},
		"no devices": {err: failfastplugin.DeviceFault(base)},
	} {
		t.Run(name, func(t *testing.T) {
			if got := failfastplugin.FaultDevices(tc.err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FaultDevices = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeviceFault calls the wrapped plugin's PrepareResourceClaims directly,
// as kubeletplugin does, and looks into the fake API server the moment it
// returns.
func TestDeviceFault(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg       failfastplugin.DeviceFaultConfig
		resources map[string]int
		// delay, dropTaints and publishErr configure the publisher.
		delay      time.Duration
		dropTaints bool
		publishErr error
		// listErr fails listing ResourceSlices.
		listErr error
		// message replaces the text of the faults.
		message string
		faults  map[string][]failfastplugin.DeviceID
		// wantTainted are the devices with the taint in the API when
		// the call returns (unless noWait), and in the library (unless
		// wantInLibrary is set).
		wantTainted   []failfastplugin.DeviceID
		wantInLibrary []failfastplugin.DeviceID
		// wantPublished counts the publications of the call.
		wantPublished int
		// wantNotTainted is in the message of the claims whose devices
		// did not all get tainted; the others keep their text.
		wantNotTainted map[string]string
		wantFailures   map[string]float64
		noWait         bool
		// wantTaint, if set, is the taint of the first tainted device.
		wantTaint *resourceapi.DeviceTaint
	}{
		"one device": {
			delay:         100 * time.Millisecond,
			faults:        map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantPublished: 1,
			wantTaint: &resourceapi.DeviceTaint{
				Key:    failfastplugin.DefaultDeviceFaultTaintKey,
				Value:  "claim-broken-pool-a-dev-1-broken",
				Effect: resourceapi.DeviceTaintEffectNoSchedule,
			},
		},
		"two devices of a claim, one publication": {
			delay:         50 * time.Millisecond,
			faults:        map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-2"), dev("pool-a", "dev-1")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-a", "dev-2")},
			wantPublished: 1,
		},
		"two claims of a call, one publication": {
			delay:         50 * time.Millisecond,
			faults:        map[string][]failfastplugin.DeviceID{"broken-1": {dev("pool-a", "dev-1")}, "broken-2": {dev("pool-a", "dev-3")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-a", "dev-3")},
			wantPublished: 1,
		},
		"device of another pool": {
			resources:     map[string]int{"pool-a": 4, "pool-b": 2},
			faults:        map[string][]failfastplugin.DeviceID{"broken": {dev("pool-b", "dev-1")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-b", "dev-1")},
			wantPublished: 1,
		},
		"unknown device": {
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-9")}},
			wantNotTainted: map[string]string{"broken": `device pool-a/dev-9 not tainted: pool "pool-a" of the driver has no such device`},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureUnknownDevice: 1},
		},
		"unknown pool": {
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-z", "dev-0")}},
			wantNotTainted: map[string]string{"broken": `device pool-z/dev-0 not tainted: the driver publishes no pool "pool-z"`},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureUnknownDevice: 1},
		},
		"known and unknown device": {
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1"), dev("pool-a", "dev-9")}, "other": {dev("pool-a", "dev-2")}},
			wantTainted:    []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-a", "dev-2")},
			wantPublished:  1,
			wantNotTainted: map[string]string{"broken": `device pool-a/dev-9 not tainted: pool "pool-a" of the driver has no such device`},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureUnknownDevice: 1},
		},
		"publishing fails": {
			publishErr:     errors.New("no NodeName was set"),
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1"), dev("pool-a", "dev-2")}},
			wantNotTainted: map[string]string{"broken": "devices pool-a/dev-1, pool-a/dev-2 not tainted: publish ResourceSlices: no NodeName was set"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailurePublish: 2},
		},
		"taint never visible": {
			cfg:            failfastplugin.DeviceFaultConfig{WaitTimeout: 300 * time.Millisecond},
			dropTaints:     true,
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantInLibrary:  []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantPublished:  1,
			wantNotTainted: map[string]string{"broken": "device pool-a/dev-1 not tainted: taint not visible in the API within 300ms"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureNotVisible: 1},
		},
		"listing fails": {
			cfg:            failfastplugin.DeviceFaultConfig{WaitTimeout: 200 * time.Millisecond},
			listErr:        errors.New("forbidden"),
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantInLibrary:  []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantTainted:    []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantPublished:  1,
			wantNotTainted: map[string]string{"broken": "device pool-a/dev-1 not tainted: taint not visible in the API within 200ms, listing ResourceSlices failed: forbidden"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureNotVisible: 1},
		},
		"slice too large for taints": {
			resources:      map[string]int{"pool-a": resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures + 1},
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantNotTainted: map[string]string{"broken": "device pool-a/dev-1 not tainted: its ResourceSlice has 65 devices, a slice with taints may have at most 64"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureNotTaintable: 1},
		},
		"message too long for the kubelet": {
			message:        strings.Repeat("x", 300),
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-9")}},
			wantNotTainted: map[string]string{"broken": `(device pool-a/dev-9 not tainted: pool "pool-a" of the driver has no such device)`},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureUnknownDevice: 1},
		},
		"no wait": {
			cfg:           failfastplugin.DeviceFaultConfig{WaitTimeout: -1},
			delay:         time.Hour,
			faults:        map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantPublished: 1,
			noWait:        true,
		},
		"own taint": {
			cfg: failfastplugin.DeviceFaultConfig{TaintKey: "gpu.example.com/broken", TaintValue: "ecc", TaintEffect: resourceapi.DeviceTaintEffectNoExecute},
			// A message that is no label value at all.
			message:       "💥",
			faults:        map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-0")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-a", "dev-0")},
			wantPublished: 1,
			wantTaint:     &resourceapi.DeviceTaint{Key: "gpu.example.com/broken", Value: "ecc", Effect: resourceapi.DeviceTaintEffectNoExecute},
		},
		"default value for a message that is no label value": {
			message:       "💥",
			faults:        map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-0")}},
			wantTainted:   []failfastplugin.DeviceID{dev("pool-a", "dev-0")},
			wantPublished: 1,
			wantTaint:     &resourceapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Value: "device-fault", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		},
	} {
		t.Run(name, func(t *testing.T) {
			driverName := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(name), "-"), "-") + ".dra-failfast.test"
			publisher := newAPIPublisher(driverName)
			resources := tc.resources
			if resources == nil {
				resources = map[string]int{"pool-a": 4}
			}
			faults := startFaults(t, tc.cfg, publisher, resources)
			publisher.delay, publisher.dropTaints, publisher.err = tc.delay, tc.dropTaints, tc.publishErr
			// failList fails listing ResourceSlices during the call.
			var failList atomic.Bool
			if tc.listErr != nil {
				failList.Store(true)
				publisher.client.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
					return failList.Load(), nil, tc.listErr
				})
			}
			published := publisher.count()
			failuresBefore := taintFailures(t, driverName)

			names := []string{"healthy", "transient"}
			for claim := range tc.faults {
				names = append(names, claim)
			}
			start := time.Now()
			result, err := faults.Wrap(faultPlugin{faults: tc.faults, message: tc.message}).PrepareResourceClaims(t.Context(), claimsNamed(names...))
			elapsed := time.Since(start)
			failList.Store(false)
			if err != nil {
				t.Fatal(err)
			}
			// Right when the call returns, before anything else.
			inAPI := taintsInAPI(t, publisher.client)
			t.Logf("prepare call with device faults took %v", elapsed)

			if res := result["uid-healthy"]; res.Err != nil {
				t.Errorf("healthy claim: %v", res.Err)
			}
			if res := result["uid-transient"]; res.Err == nil || failfastplugin.IsPermanent(res.Err) {
				t.Errorf("transient claim: %v", res.Err)
			}
			for claim, devices := range tc.faults {
				res := result[types.UID("uid-"+claim)]
				original := faultError(claim, tc.message, devices)
				if !failfastplugin.IsPermanent(res.Err) {
					t.Errorf("claim %s: not permanent: %v", claim, res.Err)
					continue
				}
				if got := failfastplugin.FaultDevices(res.Err); !reflect.DeepEqual(got, devices) {
					t.Errorf("claim %s: devices %v, want %v", claim, got, devices)
				}
				want, notTainted := tc.wantNotTainted[claim]
				switch {
				case !notTainted && res.Err.Error() != original.Error():
					t.Errorf("claim %s: message %q, want the driver's %q", claim, res.Err, original)
				case notTainted && !strings.Contains(res.Err.Error(), want):
					t.Errorf("claim %s: message %q does not say %q", claim, res.Err, want)
				case notTainted && len(res.Err.Error()) > 256:
					t.Errorf("claim %s: message has %d bytes, the kubelet keeps 256: %q", claim, len(res.Err.Error()), res.Err)
				case notTainted && !strings.HasPrefix(res.Err.Error(), original.Error()[:min(len(original.Error()), 64)]):
					t.Errorf("claim %s: message %q does not start with the driver's %q", claim, res.Err, original)
				}
			}

			if got := publisher.count() - published; got != tc.wantPublished {
				t.Errorf("%d publications, want %d", got, tc.wantPublished)
			}
			key := failfastplugin.DefaultDeviceFaultTaintKey
			if tc.cfg.TaintKey != "" {
				key = tc.cfg.TaintKey
			}
			wantInLibrary := tc.wantTainted
			if tc.wantInLibrary != nil {
				wantInLibrary = tc.wantInLibrary
			}
			if got := faults.TaintedDevices(); !reflect.DeepEqual(got, wantInLibrary) {
				t.Errorf("TaintedDevices = %v, want %v", got, wantInLibrary)
			}
			if tc.wantPublished > 0 {
				if got := taintedIn(publisher.last(), key); !reflect.DeepEqual(got, wantInLibrary) {
					t.Errorf("published taints on %v, want %v", got, wantInLibrary)
				}
			}
			if !tc.noWait {
				var gotInAPI []failfastplugin.DeviceID
				for device := range inAPI {
					gotInAPI = append(gotInAPI, device)
				}
				slices.SortFunc(gotInAPI, func(a, b failfastplugin.DeviceID) int { return strings.Compare(a.String(), b.String()) })
				if !reflect.DeepEqual(gotInAPI, tc.wantTainted) {
					t.Errorf("tainted in the API when the call returned: %v, want %v", gotInAPI, tc.wantTainted)
				}
			} else if elapsed > 5*time.Second {
				t.Errorf("call took %v without waiting", elapsed)
			}
			if tc.wantTaint != nil && len(tc.wantTainted) > 0 {
				taints := inAPI[tc.wantTainted[0]]
				if len(taints) != 1 {
					t.Fatalf("taints of %s = %+v, want one", tc.wantTainted[0], taints)
				}
				taint := taints[0]
				if taint.TimeAdded == nil || time.Since(taint.TimeAdded.Time) > time.Minute {
					t.Errorf("TimeAdded = %v, want now", taint.TimeAdded)
				}
				taint.TimeAdded = nil
				if !reflect.DeepEqual(taint, *tc.wantTaint) {
					t.Errorf("taint = %+v, want %+v", taint, *tc.wantTaint)
				}
			}

			failures := taintFailures(t, driverName)
			for reason := range failures {
				failures[reason] -= failuresBefore[reason]
				if failures[reason] == 0 {
					delete(failures, reason)
				}
			}
			if len(failures)+len(tc.wantFailures) > 0 && !reflect.DeepEqual(failures, tc.wantFailures) {
				t.Errorf("taint failures counted = %v, want %v", failures, tc.wantFailures)
			}
		})
	}
}

// TestDeviceFaultNotEnabled: without StartWithDeviceFaults or
// DeviceFaults.Wrap, a device fault still fails the claim permanently and
// says why there is no taint, and a driver serving legacyregistry shows the
// count.
func TestDeviceFaultNotEnabled(t *testing.T) {
	before := taintFailures(t, "")[failfastplugin.TaintFailureNotEnabled]
	faults := map[string][]failfastplugin.DeviceID{"broken": {dev("pool", "dev-1")}}
	result, err := failfastplugin.Wrap(faultPlugin{faults: faults}).PrepareResourceClaims(t.Context(), claimsNamed("broken"))
	if err != nil {
		t.Fatal(err)
	}
	res := result["uid-broken"]
	want := "claim broken: pool/dev-1 broken (device pool/dev-1 not tainted: device faults are not enabled, start the driver with failfastplugin.StartWithDeviceFaults)"
	if !failfastplugin.IsPermanent(res.Err) || res.Err.Error() != want {
		t.Errorf("got %q (permanent: %v), want permanent %q", res.Err, failfastplugin.IsPermanent(res.Err), want)
	}
	if after := taintFailures(t, "")[failfastplugin.TaintFailureNotEnabled]; after-before != 1 {
		t.Errorf("counted %v not_enabled failures, want 1", after-before)
	}

	server := httptest.NewServer(legacyregistry.Handler())
	t.Cleanup(server.Close)
	resp, err := server.Client().Get(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if line := failfastplugin.DeviceTaintFailuresMetric + `{driver_name="",reason="not_enabled"}`; !strings.Contains(string(body), line) {
		t.Errorf("/metrics does not contain %s:\n%s", line, body)
	}
}

// TestDeviceFaultsConcurrent: claims failing at the same time on different
// devices (and two on the same one) each return only once their own device's
// taint is in the API, and every taint gets there.
func TestDeviceFaultsConcurrent(t *testing.T) {
	const devices = 8
	publisher := newAPIPublisher("concurrent.dra-failfast.test")
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, publisher, map[string]int{"pool": devices})
	publisher.delay = 30 * time.Millisecond
	published := publisher.count()

	var wg sync.WaitGroup
	errs := make(chan error, devices+1)
	for i := range devices + 1 {
		// Claims 0 and 8 both fault dev-0.
		device := dev("pool", fmt.Sprintf("dev-%d", i%devices))
		wg.Go(func() {
			claim := fmt.Sprintf("broken-%d", i)
			// Each call has a plugin of its own: the map is not shared.
			plugin := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{claim: {device}}})
			result, err := plugin.PrepareResourceClaims(t.Context(), claimsNamed(claim))
			if err != nil {
				errs <- err
				return
			}
			res := result[types.UID("uid-"+claim)]
			if want := fmt.Sprintf("claim %s: %s broken", claim, device); !failfastplugin.IsPermanent(res.Err) || res.Err.Error() != want {
				errs <- fmt.Errorf("claim %s: got %v, want permanent %q", claim, res.Err, want)
				return
			}
			list, err := publisher.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				errs <- err
				return
			}
			for _, slice := range list.Items {
				for _, d := range slice.Spec.Devices {
					if d.Name == device.Device && len(d.Taints) == 1 {
						return
					}
				}
			}
			errs <- fmt.Errorf("claim %s returned before the taint of %s was in the API", claim, device)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	publisher.settle(t)
	if got := len(taintsInAPI(t, publisher.client)); got != devices {
		t.Errorf("%d devices tainted in the API, want %d", got, devices)
	}
	if got := len(faults.TaintedDevices()); got != devices {
		t.Errorf("TaintedDevices has %d devices, want %d", got, devices)
	}
	// One publication per new taint at most: the second fault of dev-0
	// publishes nothing, concurrent ones may share one.
	if got := publisher.count() - published; got < 1 || got > devices {
		t.Errorf("%d publications for %d new taints", got, devices)
	}
}

// TestDeviceFaultRepublishAndClear: the driver's later publications keep the
// taints, ClearDeviceFault removes them, a new fault taints again.
func TestDeviceFaultRepublishAndClear(t *testing.T) {
	ctx := t.Context()
	publisher := newAPIPublisher("republish.dra-failfast.test")
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, publisher, map[string]int{"pool-a": 2, "pool-b": 2})
	broken := dev("pool-a", "dev-1")
	plugin := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}})
	prepare := func() error {
		t.Helper()
		result, err := plugin.PrepareResourceClaims(ctx, claimsNamed("broken"))
		if err != nil {
			t.Fatal(err)
		}
		return result["uid-broken"].Err
	}
	if err := prepare(); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Fatalf("first fault: %v", err)
	}
	taintAdded := taintsInAPI(t, publisher.client)[broken]
	if len(taintAdded) != 1 {
		t.Fatalf("taints after the fault = %+v", taintAdded)
	}

	// The same fault again: nothing new to publish, no wait for a taint
	// already seen in the API (the wait holds up every other prepare call),
	// still permanent.
	published := publisher.count()
	lists := sliceLists(publisher.client)
	if err := prepare(); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Errorf("second fault: %v", err)
	}
	if publisher.count() != published {
		t.Errorf("the second fault of a tainted device published again")
	}
	if got := sliceLists(publisher.client) - lists; got != 0 {
		t.Errorf("the second fault of a device whose taint was seen in the API listed ResourceSlices %d times, want 0", got)
	}

	// The driver publishes something else: a device more in pool-a.
	if err := faults.PublishResources(ctx, pools(map[string]int{"pool-a": 3, "pool-b": 2})); err != nil {
		t.Fatal(err)
	}
	publisher.settle(t)
	inAPI := taintsInAPI(t, publisher.client)
	if want := []failfastplugin.DeviceID{broken}; !reflect.DeepEqual(taintedIn(publisher.last(), failfastplugin.DefaultDeviceFaultTaintKey), want) || len(inAPI) != 1 {
		t.Errorf("after republishing: published taints on %v, in the API %v, want %v", taintedIn(publisher.last(), failfastplugin.DefaultDeviceFaultTaintKey), inAPI, want)
	}
	if got := inAPI[broken]; len(got) != 1 || !got[0].TimeAdded.Equal(taintAdded[0].TimeAdded) || got[0].Value != taintAdded[0].Value {
		t.Errorf("taint changed by republishing: %+v, was %+v", got, taintAdded)
	}

	// Clearing a device without a fault publishes nothing.
	published = publisher.count()
	if err := faults.ClearDeviceFault(ctx, dev("pool-b", "dev-1")); err != nil {
		t.Fatal(err)
	}
	if publisher.count() != published {
		t.Error("clearing a device without a fault published")
	}
	if err := faults.ClearDeviceFault(ctx, broken); err != nil {
		t.Fatal(err)
	}
	publisher.settle(t)
	if got := taintsInAPI(t, publisher.client); len(got) != 0 || len(faults.TaintedDevices()) != 0 {
		t.Errorf("after ClearDeviceFault: taints in the API %v, TaintedDevices %v", got, faults.TaintedDevices())
	}
	// Later publications stay clean.
	if err := faults.PublishResources(ctx, pools(map[string]int{"pool-a": 3, "pool-b": 2})); err != nil {
		t.Fatal(err)
	}
	if got := taintedIn(publisher.last(), failfastplugin.DefaultDeviceFaultTaintKey); len(got) != 0 {
		t.Errorf("republished taints on %v after ClearDeviceFault", got)
	}

	// A new fault taints again.
	if err := prepare(); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Errorf("fault after clearing: %v", err)
	}
	if got := taintsInAPI(t, publisher.client); len(got[broken]) != 1 {
		t.Errorf("taints in the API after a new fault: %v", got)
	}

	// The driver no longer publishes the device: a fault on it says so at
	// once instead of waiting for a taint that cannot come.
	if err := faults.PublishResources(ctx, pools(map[string]int{"pool-a": 1, "pool-b": 2})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := prepare(); !failfastplugin.IsPermanent(err) || !strings.Contains(err.Error(), `device pool-a/dev-1 not tainted: pool "pool-a" of the driver has no such device`) {
		t.Errorf("fault of a device no longer published: %v", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("fault of a device no longer published took %v", elapsed)
	}
}

// TestDeviceFaultBeforePublishing: a fault before the driver published
// anything cannot taint, and says so.
func TestDeviceFaultBeforePublishing(t *testing.T) {
	faults, err := failfastplugin.NewDeviceFaults(failfastplugin.DeviceFaultConfig{WaitTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	result, err := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {dev("pool", "dev-0")}}}).
		PrepareResourceClaims(t.Context(), claimsNamed("broken"))
	if err != nil {
		t.Fatal(err)
	}
	if err := result["uid-broken"].Err; !failfastplugin.IsPermanent(err) || !strings.HasSuffix(err.Error(), "(device pool/dev-0 not tainted: the driver has not published ResourceSlices yet)") {
		t.Errorf("got %v", err)
	}
	// Publishing without a publisher keeps the resources but fails.
	if err := faults.PublishResources(t.Context(), pools(map[string]int{"pool": 1})); err == nil {
		t.Error("PublishResources without a publisher succeeded")
	}
}

func TestNewDeviceFaults(t *testing.T) {
	client := newAPIPublisher("config.dra-failfast.test").client
	complete := failfastplugin.DeviceFaultConfig{DriverName: "d", NodeName: "n", KubeClient: client}
	for name, tc := range map[string]struct {
		cfg     failfastplugin.DeviceFaultConfig
		wantErr string
	}{
		"defaults":                  {cfg: complete},
		"no wait, nothing else":     {cfg: failfastplugin.DeviceFaultConfig{WaitTimeout: -1}},
		"waiting needs the names":   {cfg: failfastplugin.DeviceFaultConfig{}, wantErr: "driver name must be set; node name must be set; Kubernetes client must be set"},
		"invalid key":               {cfg: failfastplugin.DeviceFaultConfig{WaitTimeout: -1, TaintKey: "broken device"}, wantErr: `taint key "broken device"`},
		"invalid value":             {cfg: failfastplugin.DeviceFaultConfig{WaitTimeout: -1, TaintValue: "a b"}, wantErr: `taint value "a b"`},
		"invalid effect":            {cfg: failfastplugin.DeviceFaultConfig{WaitTimeout: -1, TaintEffect: "PreferNoSchedule"}, wantErr: `taint effect "PreferNoSchedule" is not one of NoSchedule, NoExecute, None`},
		"effect None is fine":       {cfg: failfastplugin.DeviceFaultConfig{WaitTimeout: -1, TaintEffect: resourceapi.DeviceTaintEffectNone}},
		"prefixed key is fine":      {cfg: failfastplugin.DeviceFaultConfig{WaitTimeout: -1, TaintKey: "gpu.example.com/ecc-error"}},
		"several problems together": {cfg: failfastplugin.DeviceFaultConfig{TaintKey: "-", NodeName: "n", DriverName: "d"}, wantErr: `taint key "-": `},
	} {
		t.Run(name, func(t *testing.T) {
			faults, err := failfastplugin.NewDeviceFaults(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := faults.Config()
			if cfg.TaintKey == "" || cfg.TaintEffect == "" || cfg.WaitTimeout == 0 {
				t.Errorf("defaults not applied: %+v", cfg)
			}
		})
	}
	faults, err := failfastplugin.NewDeviceFaults(complete)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := faults.Config(); cfg.TaintKey != failfastplugin.DefaultDeviceFaultTaintKey || cfg.TaintEffect != resourceapi.DeviceTaintEffectNoSchedule ||
		cfg.WaitTimeout != failfastplugin.DefaultDeviceFaultWaitTimeout || cfg.TaintValue != "" {
		t.Errorf("defaults = %+v", cfg)
	}
}

// sliceLists counts the ResourceSlice lists that client served: each is a
// look at the API while waiting for a taint.
func sliceLists(client *fake.Clientset) int {
	n := 0
	for _, action := range client.Actions() {
		if action.GetVerb() == "list" && action.GetResource().Resource == "resourceslices" {
			n++
		}
	}
	return n
}

// BenchmarkDeviceFaultTaintWait measures how long a prepare call with a
// DeviceFault holds up the driver (kubeletplugin serializes prepare calls)
// against a slow API: every ResourceSlice list and every publication takes
// apiLatency. "first fault" taints a device anew each time (publish, then
// wait until the taint is visible); "repeated fault" reports a device whose
// taint the API already showed, which must not wait again. Reports the p50
// and p99 of the prepare call.
//
//	go test -run '^$' -bench DeviceFaultTaintWait -benchtime 20x ./pkg/failfastplugin
func BenchmarkDeviceFaultTaintWait(b *testing.B) {
	const apiLatency = 200 * time.Millisecond
	for _, repeated := range []bool{false, true} {
		name := "first fault"
		if repeated {
			name = "repeated fault"
		}
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			publisher := newAPIPublisher("bench.dra-failfast.test")
			publisher.delay = apiLatency
			publisher.client.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
				time.Sleep(apiLatency)
				return false, nil, nil
			})
			faults, err := failfastplugin.NewDeviceFaults(failfastplugin.DeviceFaultConfig{DriverName: publisher.driverName, NodeName: faultNode, KubeClient: publisher.client})
			if err != nil {
				b.Fatal(err)
			}
			faults.SetPublisher(publisher)
			if err := faults.PublishResources(ctx, pools(map[string]int{"pool": 2})); err != nil {
				b.Fatal(err)
			}
			broken := dev("pool", "dev-1")
			plugin := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}})
			prepare := func() time.Duration {
				start := time.Now()
				result, err := plugin.PrepareResourceClaims(ctx, claimsNamed("broken"))
				elapsed := time.Since(start)
				if err != nil || strings.Contains(result["uid-broken"].Err.Error(), "not tainted") {
					b.Fatalf("prepare: %v, %v", err, result["uid-broken"].Err)
				}
				return elapsed
			}
			if repeated {
				prepare() // the taint is seen once
			}
			var samples []time.Duration
			b.ResetTimer()
			for b.Loop() {
				if !repeated {
					b.StopTimer()
					if err := faults.ClearDeviceFault(ctx, broken); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				samples = append(samples, prepare())
			}
			b.StopTimer()
			slices.Sort(samples)
			quantile := func(q float64) float64 {
				return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))].Milliseconds())
			}
			b.ReportMetric(quantile(0.5), "p50-ms")
			b.ReportMetric(quantile(0.99), "p99-ms")
		})
	}
}
