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
	rulesapi "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/failfastplugintest"
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
	// class, if set, is the class of the faults (DeviceFaultClass).
	class string
}

func (p faultPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, ok := p.faults[claim.Name]
		switch {
		case ok:
			result[claim.UID] = kubeletplugin.PrepareResult{Err: failfastplugin.DeviceFaultClass(p.class, faultError(claim.Name, p.message, devices), devices...)}
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

// startFaults returns DeviceFaults on client, loaded.
func startFaults(t *testing.T, cfg failfastplugin.DeviceFaultConfig, client *failfastplugintest.Clientset, driverName string) *failfastplugin.DeviceFaults {
	t.Helper()
	if cfg.DriverName == "" {
		cfg.DriverName = driverName
	}
	if cfg.NodeName == "" {
		cfg.NodeName = faultNode
	}
	if cfg.KubeClient == nil {
		cfg.KubeClient = client
	}
	faults, err := failfastplugin.NewDeviceFaults(cfg)
	if err != nil {
		t.Fatalf("NewDeviceFaults: %v", err)
	}
	// In the background, as StartWithDeviceFaults does: the retries of
	// taints end with the test.
	faults.LoadInBackground(t.Context())
	<-faults.Loaded()
	if err := faults.LoadErr(); err != nil {
		t.Fatalf("Load: %v", err)
	}
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
		cfg failfastplugin.DeviceFaultConfig
		// createErr fails creating DeviceTaintRules, after createDelay.
		createErr   error
		createDelay time.Duration
		// squat, if set, is a device whose rule name another rule takes
		// first, selecting another device (squatTaint, if set: the
		// device itself, with that taint).
		squat      *failfastplugin.DeviceID
		squatTaint *rulesapi.DeviceTaint
		// message replaces the text of the faults, class is their class.
		message string
		class   string
		faults  map[string][]failfastplugin.DeviceID
		// wantPending are the devices left for a retry.
		wantPending []failfastplugin.DeviceID
		// wantTainted are the devices with a rule in the API when the
		// call returns, and in the library.
		wantTainted []failfastplugin.DeviceID
		// wantNotTainted is in the message of the claims whose devices
		// did not all get tainted; the others keep their text.
		wantNotTainted map[string]string
		wantFailures   map[string]float64
		// wantTaint, if set, is the taint of the first tainted device.
		wantTaint *rulesapi.DeviceTaint
	}{
		"one device": {
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			// Not the error's text: that stays in the pod's status.
			wantTaint: &rulesapi.DeviceTaint{
				Key:    failfastplugin.DefaultDeviceFaultTaintKey,
				Value:  "device-fault",
				Effect: rulesapi.DeviceTaintEffectNoSchedule,
			},
		},
		"the fault's class": {
			class:       "xid-79",
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantTaint:   &rulesapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Value: "xid-79", Effect: rulesapi.DeviceTaintEffectNoSchedule},
		},
		"a class that is no label value": {
			class:       "ECC: double bit",
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
			wantTaint:   &rulesapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Value: "ECC-double-bit", Effect: rulesapi.DeviceTaintEffectNoSchedule},
		},
		"two devices of a claim": {
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-2"), dev("pool-a", "dev-1")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-a", "dev-2")},
		},
		"two claims of a call": {
			faults:      map[string][]failfastplugin.DeviceID{"broken-1": {dev("pool-a", "dev-1")}, "broken-2": {dev("pool-a", "dev-3")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-a", "dev-3")},
		},
		"same device name in two pools": {
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1"), dev("pool-b", "dev-1")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-b", "dev-1")},
		},
		"pool of a shared, not node-local slice": {
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("rack-7/switch-2", "port-3")}},
			wantTainted: []failfastplugin.DeviceID{dev("rack-7/switch-2", "port-3")},
		},
		"creating fails": {
			createErr:      errors.New("etcd is down"),
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1"), dev("pool-a", "dev-2")}},
			wantNotTainted: map[string]string{"broken": "devices pool-a/dev-1, pool-a/dev-2 not tainted: create DeviceTaintRule: etcd is down"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailurePublish: 2},
			wantPending:    []failfastplugin.DeviceID{dev("pool-a", "dev-1"), dev("pool-a", "dev-2")},
		},
		"API server without DeviceTaintRules": {
			createErr:      apierrors.NewNotFound(resourceapi.Resource("devicetaintrules"), ""),
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantNotTainted: map[string]string{"broken": "the API server does not serve DeviceTaintRules"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailurePublish: 1},
			wantPending:    []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
		},
		"the API server does not answer in time": {
			cfg:            failfastplugin.DeviceFaultConfig{WaitTimeout: 50 * time.Millisecond},
			createErr:      context.DeadlineExceeded,
			createDelay:    200 * time.Millisecond,
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantNotTainted: map[string]string{"broken": "create DeviceTaintRule: no answer from the API server within 50ms"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailurePublish: 1},
			wantPending:    []failfastplugin.DeviceID{dev("pool-a", "dev-1")},
		},
		"the rule's name taken by a rule for another device": {
			squat:          &failfastplugin.DeviceID{Pool: "pool-a", Device: "dev-1"},
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}, "other": {dev("pool-a", "dev-2")}},
			wantTainted:    []failfastplugin.DeviceID{dev("pool-a", "dev-2")},
			wantNotTainted: map[string]string{"broken": "exists and does not select this device"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureRuleConflict: 1},
		},
		"the rule's name taken by a rule that does not taint": {
			squat:          &failfastplugin.DeviceID{Pool: "pool-a", Device: "dev-1"},
			squatTaint:     &rulesapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Effect: rulesapi.DeviceTaintEffectNone},
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantNotTainted: map[string]string{"broken": `has taint effect "None", not "NoSchedule"`},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureRuleConflict: 1},
		},
		"the rule's name taken by a rule with another key": {
			squat:          &failfastplugin.DeviceID{Pool: "pool-a", Device: "dev-1"},
			squatTaint:     &rulesapi.DeviceTaint{Key: "example.com/other", Effect: rulesapi.DeviceTaintEffectNoSchedule},
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-1")}},
			wantNotTainted: map[string]string{"broken": `has taint key "example.com/other"`},
			wantFailures:   map[string]float64{failfastplugin.TaintFailureRuleConflict: 1},
		},
		"message too long for the kubelet": {
			message:        strings.Repeat("x", 300),
			createErr:      errors.New("etcd is down"),
			faults:         map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-9")}},
			wantNotTainted: map[string]string{"broken": "(device pool-a/dev-9 not tainted: create DeviceTaintRule: etcd is down)"},
			wantFailures:   map[string]float64{failfastplugin.TaintFailurePublish: 1},
			wantPending:    []failfastplugin.DeviceID{dev("pool-a", "dev-9")},
		},
		"own taint": {
			cfg: failfastplugin.DeviceFaultConfig{TaintKey: "gpu.example.com/broken", TaintValue: "ecc", TaintEffect: resourceapi.DeviceTaintEffectNoExecute},
			// A message that is no label value at all.
			message:     "💥",
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-0")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-0")},
			wantTaint:   &rulesapi.DeviceTaint{Key: "gpu.example.com/broken", Value: "ecc", Effect: rulesapi.DeviceTaintEffectNoExecute},
		},
		"default value for a message that is no label value": {
			message:     "💥",
			faults:      map[string][]failfastplugin.DeviceID{"broken": {dev("pool-a", "dev-0")}},
			wantTainted: []failfastplugin.DeviceID{dev("pool-a", "dev-0")},
			wantTaint:   &rulesapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Value: "device-fault", Effect: rulesapi.DeviceTaintEffectNoSchedule},
		},
	} {
		t.Run(name, func(t *testing.T) {
			driverName := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(name), "-"), "-")
			driverName = driverName[:min(len(driverName), 40)] + ".dra-failfast.test"
			client := newFaultAPI(t)
			faults := startFaults(t, tc.cfg, client, driverName)
			if tc.createErr != nil {
				client.PrependReactor("create", "devicetaintrules", func(k8stesting.Action) (bool, runtime.Object, error) {
					time.Sleep(tc.createDelay)
					return true, nil, tc.createErr
				})
			}
			if tc.squat != nil {
				// Someone who may write rules took the name, for a
				// device of their own.
				squatter := &rulesapi.DeviceTaintRule{
					ObjectMeta: metav1.ObjectMeta{Name: faults.RuleName(*tc.squat)},
					Spec: rulesapi.DeviceTaintRuleSpec{
						DeviceSelector: &rulesapi.DeviceTaintSelector{Driver: ptrTo(driverName), Pool: ptrTo("pool-z"), Device: ptrTo(tc.squat.Device)},
						Taint:          rulesapi.DeviceTaint{Key: "squat", Effect: rulesapi.DeviceTaintEffectNone},
					},
				}
				if tc.squatTaint != nil {
					squatter.Spec.DeviceSelector.Pool = ptrTo(tc.squat.Pool)
					squatter.Spec.Taint = *tc.squatTaint
				}
				if _, err := client.ResourceV1beta2().DeviceTaintRules().Create(t.Context(), squatter, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			failuresBefore := taintFailures(t, driverName)

			names := []string{"healthy", "transient"}
			for claim := range tc.faults {
				names = append(names, claim)
			}
			result, err := faults.Wrap(faultPlugin{faults: tc.faults, message: tc.message, class: tc.class}).PrepareResourceClaims(t.Context(), claimsNamed(names...))
			if err != nil {
				t.Fatal(err)
			}
			// Right when the call returns, before anything else.
			rules := rulesInAPI(t, client)
			if tc.squat != nil {
				delete(rules, failfastplugin.DeviceID{Pool: "pool-z", Device: tc.squat.Device})
				if tc.squatTaint != nil {
					delete(rules, *tc.squat)
				}
			}

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

			if got := faults.TaintedDevices(); !reflect.DeepEqual(got, tc.wantTainted) {
				t.Errorf("TaintedDevices = %v, want %v", got, tc.wantTainted)
			}
			if got := faults.PendingTaints(); !reflect.DeepEqual(got, tc.wantPending) {
				t.Errorf("PendingTaints = %v, want %v", got, tc.wantPending)
			}
			if got := sortedDevices(rules); !reflect.DeepEqual(got, tc.wantTainted) && len(got)+len(tc.wantTainted) > 0 {
				t.Errorf("devices with a DeviceTaintRule when the call returned: %v, want %v", got, tc.wantTainted)
			}
			for device, list := range rules {
				if len(list) != 1 {
					t.Errorf("device %s has %d rules, want 1", device, len(list))
					continue
				}
				rule := list[0]
				selector := rule.Spec.DeviceSelector
				if selector.Driver == nil || *selector.Driver != driverName {
					t.Errorf("rule %s: driver %v, want %s", rule.Name, selector.Driver, driverName)
				}
				// Exactly what the admission policy admits: nothing else.
				wantLabels := map[string]string{failfastplugin.DeviceTaintRuleDriverLabel: driverName, failfastplugin.DeviceTaintRuleNodeLabel: faultNode}
				if !reflect.DeepEqual(rule.Labels, wantLabels) || !reflect.DeepEqual(rule.Annotations, map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: faultNode}) || len(rule.Finalizers) > 0 {
					t.Errorf("rule %s: labels %v, annotations %v, finalizers %v; want the driver and the node, nothing else", rule.Name, rule.Labels, rule.Annotations, rule.Finalizers)
				}
				if owners := rule.OwnerReferences; len(owners) != 1 || owners[0].Kind != "Node" || owners[0].Name != faultNode || owners[0].UID != "node-1-uid" {
					t.Errorf("rule %s: owners %+v, want the Node", rule.Name, owners)
				}
				if !strings.HasPrefix(rule.Name, device.Device+"-") || len(validation.IsDNS1123Subdomain(rule.Name)) > 0 {
					t.Errorf("rule %s: name does not start with its device's, or is no valid object name: %v", rule.Name, validation.IsDNS1123Subdomain(rule.Name))
				}
			}
			if tc.wantTaint != nil {
				taint := rules[tc.wantTainted[0]][0].Spec.Taint
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

	// A driver serving its own registry sees the same count.
	own := metrics.NewKubeRegistry()
	if err := failfastplugin.RegisterMetricsWith(own); err != nil {
		t.Fatal(err)
	}
	values, err := testutil.GetCounterValuesFromGatherer(own, failfastplugin.DeviceTaintFailuresMetric, map[string]string{"driver_name": ""}, "reason")
	if err != nil || values[failfastplugin.TaintFailureNotEnabled] != taintFailures(t, "")[failfastplugin.TaintFailureNotEnabled] {
		t.Errorf("the driver's own registry: %v (%v), want the global registry's count", values, err)
	}
	if err := failfastplugin.RegisterMetricsWith(own); err == nil || !strings.Contains(err.Error(), failfastplugin.DeviceTaintFailuresMetric) {
		t.Errorf("registering twice in one registry: %v, want an error naming the metric", err)
	}
}

// TestDeviceFaultsConcurrent: claims failing at the same time on different
// devices (and two on the same one) each return only once their own device's
// rule is in the API, and every device gets exactly one.
func TestDeviceFaultsConcurrent(t *testing.T) {
	const devices = 8
	client := newFaultAPI(t)
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, "concurrent.dra-failfast.test")

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
			if _, err := client.ResourceV1beta2().DeviceTaintRules().Get(context.Background(), ruleNameOf(t, client, device), metav1.GetOptions{}); err != nil {
				errs <- fmt.Errorf("claim %s returned before the rule of %s was in the API: %w", claim, device, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rules := rulesInAPI(t, client)
	if len(rules) != devices {
		t.Errorf("%d devices with a rule in the API, want %d", len(rules), devices)
	}
	for device, list := range rules {
		if len(list) != 1 {
			t.Errorf("device %s has %d rules", device, len(list))
		}
	}
	if got := len(faults.TaintedDevices()); got != devices {
		t.Errorf("TaintedDevices has %d devices, want %d", got, devices)
	}
}

// ruleNameOf returns the name of the rule of device in the API, "" if none.
func ruleNameOf(t *testing.T, client *failfastplugintest.Clientset, device failfastplugin.DeviceID) string {
	t.Helper()
	for _, rule := range rulesInAPI(t, client)[device] {
		return rule.Name
	}
	return ""
}

// TestDeviceFaultRestartAndClear: a fault's rule outlives the driver
// process: a new instance on the node loads it (and ignores other nodes'
// and hand-written rules), a second fault keeps it, ClearDeviceFault of the
// new instance deletes it, a rule an operator deleted comes back with the
// next fault.
func TestDeviceFaultRestartAndClear(t *testing.T) {
	ctx := t.Context()
	const driverName = "restart.dra-failfast.test"
	client := newFaultAPI(t)
	broken := dev("pool-a", "dev-1")
	prepare := func(faults *failfastplugin.DeviceFaults) error {
		t.Helper()
		result, err := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}}).PrepareResourceClaims(ctx, claimsNamed("broken"))
		if err != nil {
			t.Fatal(err)
		}
		return result["uid-broken"].Err
	}
	first := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
	if err := prepare(first); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Fatalf("first fault: %v", err)
	}
	taintAdded := taintsInAPI(t, client)[broken]
	if len(taintAdded) != 1 {
		t.Fatalf("taints after the fault = %+v", taintAdded)
	}
	// The same driver on another node faults a device of its own, and an
	// operator wrote a rule with the driver's label: not this instance's.
	other := startFaults(t, failfastplugin.DeviceFaultConfig{NodeName: "node-2"}, client, driverName)
	otherBroken := dev("node-2-pool", "dev-1")
	result, err := other.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {otherBroken}}}).PrepareResourceClaims(ctx, claimsNamed("broken"))
	if err != nil || strings.Contains(result["uid-broken"].Err.Error(), "not tainted") {
		t.Fatalf("fault on node-2: %v, %v", err, result["uid-broken"].Err)
	}
	handWritten := &rulesapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Labels: map[string]string{failfastplugin.DeviceTaintRuleDriverLabel: driverName},
			Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: faultNode}},
		Spec: rulesapi.DeviceTaintRuleSpec{DeviceSelector: &rulesapi.DeviceTaintSelector{Driver: ptrTo(driverName), Pool: ptrTo("pool-a"), Device: ptrTo("dev-3")},
			Taint: rulesapi.DeviceTaint{Key: "ops", Effect: rulesapi.DeviceTaintEffectNoSchedule}},
	}
	if _, err := client.ResourceV1beta2().DeviceTaintRules().Create(ctx, handWritten, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A restart: a new instance on the first node.
	restarted := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
	if got, want := restarted.TaintedDevices(), []failfastplugin.DeviceID{broken}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart: TaintedDevices = %v, want %v (this node's rules only)", got, want)
	}
	// A fault again: the rule is there already, its taint unchanged.
	if err := prepare(restarted); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Errorf("fault after the restart: %v", err)
	}
	if got := taintsInAPI(t, client)[broken]; len(got) != 1 || !got[0].TimeAdded.Equal(taintAdded[0].TimeAdded) {
		t.Errorf("taint after a second fault: %+v, was %+v", got, taintAdded)
	}

	// Clearing a device without a fault is nothing; clearing the broken
	// one deletes its rule and no other.
	if err := restarted.ClearDeviceFault(ctx, dev("pool-b", "dev-1"), broken); err != nil {
		t.Fatal(err)
	}
	if got := len(restarted.TaintedDevices()); got != 0 {
		t.Errorf("after ClearDeviceFault: TaintedDevices = %v", restarted.TaintedDevices())
	}
	if rules := rulesInAPI(t, client); len(rules[broken]) != 0 || len(rules[otherBroken]) != 1 {
		t.Errorf("rules after ClearDeviceFault of %s: %+v, want only node-2's", broken, rules)
	}
	if _, err := client.ResourceV1beta2().DeviceTaintRules().Get(ctx, "by-hand", metav1.GetOptions{}); err != nil {
		t.Errorf("the hand-written rule: %v", err)
	}

	// A new fault taints again; a rule an operator deleted comes back.
	if err := prepare(restarted); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Errorf("fault after clearing: %v", err)
	}
	name := ruleNameOf(t, client, broken)
	if err := client.ResourceV1beta2().DeviceTaintRules().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := prepare(restarted); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Errorf("fault after an operator deleted the rule: %v", err)
	}
	if ruleNameOf(t, client, broken) != name {
		t.Errorf("the rule an operator deleted did not come back with the next fault")
	}
}

// TestDeviceFaultTwoDrivers: two drivers with the same pool and device
// names each get a rule of their own, and clearing one leaves the other.
func TestDeviceFaultTwoDrivers(t *testing.T) {
	client := newFaultAPI(t)
	device := dev("shared-pool", "dev-0")
	var drivers []*failfastplugin.DeviceFaults
	for _, name := range []string{"a.dra-failfast.test", "b.dra-failfast.test"} {
		faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, name)
		result, err := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {device}}}).PrepareResourceClaims(t.Context(), claimsNamed("broken"))
		if err != nil || strings.Contains(result["uid-broken"].Err.Error(), "not tainted") {
			t.Fatalf("driver %s: %v, %v", name, err, result["uid-broken"].Err)
		}
		drivers = append(drivers, faults)
	}
	if n := len(rulesInAPI(t, client)[device]); n != 2 {
		t.Fatalf("%d rules for %s of two drivers, want 2", n, device)
	}
	if err := drivers[0].ClearDeviceFault(t.Context(), device); err != nil {
		t.Fatal(err)
	}
	rules := rulesInAPI(t, client)[device]
	if len(rules) != 1 || *rules[0].Spec.DeviceSelector.Driver != "b.dra-failfast.test" {
		t.Errorf("after driver a cleared: rules %+v, want driver b's", rules)
	}
}

// TestClearDeviceFaultFails: a rule that cannot be deleted stays a fault:
// the error names it, and TaintedDevices still lists the device.
func TestClearDeviceFaultFails(t *testing.T) {
	client := newFaultAPI(t)
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, "clear.dra-failfast.test")
	device := dev("pool", "dev-0")
	if _, err := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {device}}}).PrepareResourceClaims(t.Context(), claimsNamed("broken")); err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("delete", "devicetaintrules", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is down")
	})
	err := faults.ClearDeviceFault(t.Context(), device)
	if err == nil || !strings.Contains(err.Error(), "delete DeviceTaintRule "+faults.RuleName(device)+" of device pool/dev-0: etcd is down") {
		t.Errorf("ClearDeviceFault: %v, want the failed delete", err)
	}
	if got := faults.TaintedDevices(); !reflect.DeepEqual(got, []failfastplugin.DeviceID{device}) {
		t.Errorf("TaintedDevices = %v, want the device whose rule stayed", got)
	}
}

// TestDeviceFaultBeforePublishing: a fault before the driver published
// anything is tainted all the same: the rule needs no ResourceSlice.
func TestDeviceFaultBeforePublishing(t *testing.T) {
	client := newFaultAPI(t)
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, "early.dra-failfast.test")
	result, err := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {dev("pool", "dev-0")}}}).
		PrepareResourceClaims(t.Context(), claimsNamed("broken"))
	if err != nil {
		t.Fatal(err)
	}
	if err := result["uid-broken"].Err; !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
		t.Errorf("got %v", err)
	}
	if got := sortedDevices(rulesInAPI(t, client)); !reflect.DeepEqual(got, []failfastplugin.DeviceID{dev("pool", "dev-0")}) {
		t.Errorf("devices with a rule: %v", got)
	}
}

// TestLoad: reading what an earlier instance left retries while the API
// server fails, until ctx ends; it gives up at once, saying why, when the
// API server does not serve DeviceTaintRules or the driver may not list
// them; in the background it closes Loaded when done.
func TestLoad(t *testing.T) {
	cfg := func(client kubernetes.Interface) failfastplugin.DeviceFaultConfig {
		return failfastplugin.DeviceFaultConfig{DriverName: "load.dra-failfast.test", NodeName: faultNode, KubeClient: client}
	}
	t.Run("retries", func(t *testing.T) {
		client := newFaultAPI(t)
		lists := failFirst(client, "list", "devicetaintrules")
		faults, err := failfastplugin.NewDeviceFaults(cfg(client))
		if err != nil {
			t.Fatal(err)
		}
		if err := faults.Load(t.Context()); err != nil {
			t.Errorf("Load after one failure: %v", err)
		}
		// A failed list and the two lists after it: this node's rules,
		// and those written before the node label.
		if lists.Load() != 3 {
			t.Errorf("%d lists, want 3", lists.Load())
		}
	})
	t.Run("forbidden", func(t *testing.T) {
		client := newFaultAPI(t)
		client.PrependReactor("list", "devicetaintrules", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(resourceapi.Resource("devicetaintrules"), "", errors.New("RBAC"))
		})
		faults, err := failfastplugin.NewDeviceFaults(cfg(client))
		if err != nil {
			t.Fatal(err)
		}
		if err := faults.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "the driver may not (RBAC: list devicetaintrules)") {
			t.Errorf("Load: %v, want it to give up, naming the permission", err)
		}
	})
	t.Run("this node's rules only, in pages", func(t *testing.T) {
		const driverName = "load.dra-failfast.test"
		client := newFaultAPI(t)
		// Rules of this node as the library writes them, more than two
		// pages (written into the fake directly: the library's client
		// is rate-limited).
		var own []failfastplugin.DeviceID
		for i := range 230 {
			device := dev(faultNode, fmt.Sprintf("dev-%03d", i))
			own = append(own, device)
			rule := &rulesapi.DeviceTaintRule{
				ObjectMeta: metav1.ObjectMeta{
					Name:        failfastplugin.DeviceTaintRuleName(driverName, faultNode, device),
					Labels:      map[string]string{failfastplugin.DeviceTaintRuleDriverLabel: driverName, failfastplugin.DeviceTaintRuleNodeLabel: faultNode},
					Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: faultNode},
				},
				Spec: rulesapi.DeviceTaintRuleSpec{DeviceSelector: &rulesapi.DeviceTaintSelector{Driver: ptrTo(driverName), Pool: ptrTo(device.Pool), Device: ptrTo(device.Device)}},
			}
			if _, err := client.ResourceV1beta2().DeviceTaintRules().Create(t.Context(), rule, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Another node's: never listed, however many.
		for i := range 150 {
			rule := &rulesapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("flood-%03d.node-2", i),
				Labels:      map[string]string{failfastplugin.DeviceTaintRuleDriverLabel: driverName, failfastplugin.DeviceTaintRuleNodeLabel: "node-2"},
				Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: "node-2"},
			}}
			if _, err := client.ResourceV1beta2().DeviceTaintRules().Create(t.Context(), rule, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Written by a version of the library before the node label: this
		// node's are taken in, read in small pages with every node's.
		var legacy []failfastplugin.DeviceID
		for i := range 25 {
			node := []string{faultNode, "node-2"}[i%2]
			device := dev(node, fmt.Sprintf("old-%02d", i))
			rule := &rulesapi.DeviceTaintRule{
				ObjectMeta: metav1.ObjectMeta{
					Name:        failfastplugin.DeviceTaintRuleName(driverName, node, device),
					Labels:      map[string]string{failfastplugin.DeviceTaintRuleDriverLabel: driverName},
					Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: node},
				},
				Spec: rulesapi.DeviceTaintRuleSpec{DeviceSelector: &rulesapi.DeviceTaintSelector{Driver: ptrTo(driverName), Pool: ptrTo(device.Pool), Device: ptrTo(device.Device)}},
			}
			if _, err := client.ResourceV1beta2().DeviceTaintRules().Create(t.Context(), rule, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if node == faultNode {
				legacy = append(legacy, device)
			}
		}
		listsBefore := len(client.Lists())
		restarted := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
		want := slices.SortedFunc(slices.Values(append(slices.Clone(own), legacy...)), func(a, b failfastplugin.DeviceID) int {
			return strings.Compare(a.String(), b.String())
		})
		if got := restarted.TaintedDevices(); !reflect.DeepEqual(got, want) {
			t.Errorf("TaintedDevices: %d devices, want this node's %d and its %d old ones", len(got), len(own), len(legacy))
		}
		ownSelector := failfastplugin.DeviceTaintRuleDriverLabel + "=" + driverName + "," + failfastplugin.DeviceTaintRuleNodeLabel + "=" + faultNode
		oldSelector := failfastplugin.DeviceTaintRuleDriverLabel + "=" + driverName + ",!" + failfastplugin.DeviceTaintRuleNodeLabel
		pages := map[string]int{}
		for _, list := range client.Lists()[listsBefore:] {
			switch {
			case list.LabelSelector == ownSelector && list.Limit == 100 && list.Items <= 100:
			case list.LabelSelector == oldSelector && list.Limit == 10 && list.Items <= 10:
			default:
				t.Errorf("list %+v: want this node's rules in pages of 100, or the unlabelled ones in pages of 10", list)
			}
			pages[list.LabelSelector]++
		}
		if pages[ownSelector] != 3 || pages[oldSelector] != 3 {
			t.Errorf("pages listed: %v, want 3 of this node's 230 rules and 3 of the 25 unlabelled", pages)
		}
	})
	t.Run("in the background", func(t *testing.T) {
		client := newFaultAPI(t)
		faults, err := failfastplugin.NewDeviceFaults(cfg(client))
		if err != nil {
			t.Fatal(err)
		}
		faults.LoadInBackground(t.Context())
		select {
		case <-faults.Loaded():
		case <-time.After(30 * time.Second):
			t.Fatal("Loaded not closed")
		}
		if err := faults.LoadErr(); err != nil {
			t.Errorf("LoadErr = %v", err)
		}
	})
	t.Run("not served", func(t *testing.T) {
		client := serveRules(t, newFaultAPI(t))
		faults, err := failfastplugin.NewDeviceFaults(cfg(client))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = faults.Load(t.Context())
		if !errors.Is(err, failfastplugin.ErrDeviceTaintRulesNotServed) ||
			!strings.Contains(err.Error(), "list DeviceTaintRules of driver load.dra-failfast.test: the API server serves DeviceTaintRules in none of resource.k8s.io/v1, v1beta2, v1alpha3 (Kubernetes 1.37: served by default; 1.36: feature gate DRADeviceTaintRules") {
			t.Errorf("Load: %v, want ErrDeviceTaintRulesNotServed naming the versions and gates", err)
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("Load retried for %v a resource the API server does not serve", elapsed)
		}
		// A fault still fails its claim permanently, saying why its
		// device is not tainted.
		err = prepareErr(t, faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {dev("pool", "dev-0")}}}), "broken")
		if !failfastplugin.IsPermanent(err) || !strings.Contains(err.Error(), "not tainted: the API server serves DeviceTaintRules in none of") {
			t.Errorf("fault: %v", err)
		}
	})
	t.Run("gone after discovery", func(t *testing.T) {
		client := newFaultAPI(t)
		client.PrependReactor("list", "devicetaintrules", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(resourceapi.Resource("devicetaintrules"), "")
		})
		faults, err := failfastplugin.NewDeviceFaults(cfg(client))
		if err != nil {
			t.Fatal(err)
		}
		if err := faults.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "the API server does not serve them in resource.k8s.io/v1 any more") {
			t.Errorf("Load: %v, want the list's error", err)
		}
	})
	t.Run("discovery fails once", func(t *testing.T) {
		client := newFaultAPI(t)
		discoveries := failFirst(client, "get", "resource")
		faults, err := failfastplugin.NewDeviceFaults(cfg(client))
		if err != nil {
			t.Fatal(err)
		}
		if err := faults.Load(t.Context()); err != nil || discoveries.Load() < 2 {
			t.Errorf("Load after a failed discovery: %v (%d discoveries)", err, discoveries.Load())
		}
		if got := faults.RulesAPIVersion(); got != "v1" {
			t.Errorf("rules API version %q, want v1", got)
		}
	})
}

// failFirst makes the first verb on resource of client fail with
// ServiceUnavailable, and counts the calls.
func failFirst(client *failfastplugintest.Clientset, verb, resource string) *atomic.Int32 {
	calls := &atomic.Int32{}
	client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) == 1 {
			return true, nil, apierrors.NewServiceUnavailable("starting")
		}
		return false, nil, nil
	})
	return calls
}

// prepareErr is the error of claim when plugin prepares it alone.
func prepareErr(t *testing.T, plugin kubeletplugin.DRAPlugin, claim string) error {
	t.Helper()
	result, err := plugin.PrepareResourceClaims(t.Context(), claimsNamed(claim))
	if err != nil {
		t.Fatal(err)
	}
	return result[types.UID("uid-"+claim)].Err
}

// TestDeviceTaintRuleVersions: rules go through the preferred version of
// resource.k8s.io that the API server serves DeviceTaintRules in, found by
// discovery: v1 (Kubernetes 1.37), v1beta2 (1.36), v1alpha3 (1.35).
func TestDeviceTaintRuleVersions(t *testing.T) {
	for name, tc := range map[string]struct {
		served []string
		want   string
	}{
		"1.37 and later":                {served: []string{"v1beta2", "v1", "v1alpha3"}, want: "v1"},
		"1.36 with DRADeviceTaintRules": {served: []string{"v1beta2", "v1alpha3"}, want: "v1beta2"},
		"1.35 with DRADeviceTaintRules": {served: []string{"v1alpha3"}, want: "v1alpha3"},
	} {
		t.Run(name, func(t *testing.T) {
			client := serveRules(t, newFaultAPI(t), tc.served...)
			driverName := "versions.dra-failfast.test"
			faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
			broken := dev("pool", "dev-0")
			prepare := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}})
			if err := prepareErr(t, prepare, "broken"); !failfastplugin.IsPermanent(err) || strings.Contains(err.Error(), "not tainted") {
				t.Fatalf("fault: %v", err)
			}
			if got := taintsInAPI(t, client)[broken]; len(got) != 1 {
				t.Errorf("taints of %s: %v, want one", broken, got)
			}
			restarted := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
			if got := restarted.TaintedDevices(); !reflect.DeepEqual(got, []failfastplugin.DeviceID{broken}) {
				t.Errorf("after a restart: TaintedDevices = %v", got)
			}
			if err := restarted.ClearDeviceFault(t.Context(), broken); err != nil {
				t.Fatal(err)
			}
			if got := rulesInAPI(t, client); len(got) != 0 {
				t.Errorf("rules after ClearDeviceFault: %v", got)
			}
			// Two lists at each start: this node's rules, and those of
			// the library's versions before the node label.
			want := []string{"GET " + tc.want, "GET " + tc.want, "POST " + tc.want, "GET " + tc.want, "GET " + tc.want, "DELETE " + tc.want}
			if got := client.Requests(); !reflect.DeepEqual(got, want) {
				t.Errorf("requests %v, want %v", got, want)
			}
		})
	}
}

// TestClearDeviceFaultWhileLoading: a fault cleared after Load listed the
// rules, before it took them in, stays cleared: the list is older.
func TestClearDeviceFaultWhileLoading(t *testing.T) {
	ctx := t.Context()
	const driverName = "loading.dra-failfast.test"
	client := newFaultAPI(t)
	repaired, broken := dev("pool", "dev-0"), dev("pool", "dev-1")
	first := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
	result, err := first.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {repaired, broken}}}).PrepareResourceClaims(ctx, claimsNamed("broken"))
	if err != nil || strings.Contains(result["uid-broken"].Err.Error(), "not tainted") {
		t.Fatalf("faults: %v, %v", err, result["uid-broken"].Err)
	}

	restarted, err := failfastplugin.NewDeviceFaults(failfastplugin.DeviceFaultConfig{DriverName: driverName, NodeName: faultNode, KubeClient: client})
	if err != nil {
		t.Fatal(err)
	}
	restarted.SetAfterList(func() {
		if err := restarted.ClearDeviceFault(ctx, repaired); err != nil {
			t.Errorf("ClearDeviceFault: %v", err)
		}
	})
	if err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := restarted.TaintedDevices(), []failfastplugin.DeviceID{broken}; !reflect.DeepEqual(got, want) {
		t.Errorf("TaintedDevices = %v, want %v", got, want)
	}
	if got := sortedDevices(rulesInAPI(t, client)); !reflect.DeepEqual(got, []failfastplugin.DeviceID{broken}) {
		t.Errorf("devices with a rule: %v", got)
	}
}

func TestNewDeviceFaults(t *testing.T) {
	client := newFaultAPI(t)
	complete := failfastplugin.DeviceFaultConfig{DriverName: "d", NodeName: "n", KubeClient: client}
	with := func(change func(*failfastplugin.DeviceFaultConfig)) failfastplugin.DeviceFaultConfig {
		cfg := complete
		change(&cfg)
		return cfg
	}
	for name, tc := range map[string]struct {
		cfg     failfastplugin.DeviceFaultConfig
		wantErr string
	}{
		"defaults":                  {cfg: complete},
		"negative wait is default":  {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.WaitTimeout = -1 })},
		"names and client required": {cfg: failfastplugin.DeviceFaultConfig{}, wantErr: "driver name must be set; node name must be set; Kubernetes client must be set"},
		"invalid key":               {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.TaintKey = "broken device" }), wantErr: `taint key "broken device"`},
		"invalid value":             {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.TaintValue = "a b" }), wantErr: `taint value "a b"`},
		"invalid effect":            {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.TaintEffect = "PreferNoSchedule" }), wantErr: `taint effect "PreferNoSchedule" is not one of NoSchedule, NoExecute, None`},
		"effect None is fine":       {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.TaintEffect = resourceapi.DeviceTaintEffectNone })},
		"prefixed key is fine":      {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.TaintKey = "gpu.example.com/ecc-error" })},
		"driver name no label":      {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.DriverName = strings.Repeat("d", 64) }), wantErr: "driver name"},
		"several problems together": {cfg: failfastplugin.DeviceFaultConfig{TaintKey: "-", NodeName: "n", DriverName: "d"}, wantErr: `taint key "-": `},
		"node name no object name":  {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.NodeName = "Node_1" }), wantErr: `node name "Node_1": `},
		"longest node name":         {cfg: with(func(c *failfastplugin.DeviceFaultConfig) { c.NodeName = strings.Repeat("n", 229) })},
		"node name too long for rule names": {
			cfg:     with(func(c *failfastplugin.DeviceFaultConfig) { c.NodeName = strings.Repeat("n", 230) }),
			wantErr: "is 230 bytes long: the names of its DeviceTaintRules end with it, and allow at most 229",
		},
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
			if cfg.TaintKey == "" || cfg.TaintEffect == "" || cfg.WaitTimeout <= 0 {
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

// TestDeviceTaintRuleName: a rule's name is one DNS label, a dot and the
// writer's node, all of it an object name, the same for the same device
// and different for another driver, pool, device or node. The label is the
// name of earlier versions of the library.
func TestDeviceTaintRuleName(t *testing.T) {
	longNode := strings.Repeat("n", 170) + ".example.com" // 182 bytes: a whole label does not fit
	for name, tc := range map[string]struct {
		node      string
		device    failfastplugin.DeviceID
		wantLabel string // the part before the first dot, the hash left out
	}{
		"device name first":            {node: "node-1", device: dev("pool-a", "gpu-0"), wantLabel: "gpu-0-"},
		"node with dots":               {node: "worker-1.example.com", device: dev("pool-a", "gpu-0"), wantLabel: "gpu-0-"},
		"device no DNS label":          {node: "node-1", device: dev("pool-a", "GPU_0"), wantLabel: "device-"},
		"empty device":                 {node: "node-1", device: dev("pool-a", ""), wantLabel: "device-"},
		"longest device name":          {node: "node-1", device: dev("pool-a", strings.Repeat("d", 63)), wantLabel: strings.Repeat("d", 63) + "-"},
		"long node leaves device out":  {node: longNode, device: dev("pool-a", strings.Repeat("d", 63)), wantLabel: "device-"},
		"longest node, shortest label": {node: strings.Repeat("n", 229), device: dev("pool-a", "gpu-000"), wantLabel: "device-"},
		"a short device still fits":    {node: strings.Repeat("n", 229), device: dev("pool-a", "gpu-0"), wantLabel: "gpu-0-"},
	} {
		t.Run(name, func(t *testing.T) {
			got := failfastplugin.DeviceTaintRuleName("gpu.example.com", tc.node, tc.device)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("%q is no object name: %v", got, errs)
			}
			label, node, _ := strings.Cut(got, ".")
			if node != tc.node {
				t.Errorf("%q: after the first dot %q, want the node %q", got, node, tc.node)
			}
			if !strings.HasPrefix(label, tc.wantLabel) || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(strings.TrimPrefix(label, tc.wantLabel)) {
				t.Errorf("%q: label %q, want %q and 16 hex digits", got, label, tc.wantLabel)
			}
			if again := failfastplugin.DeviceTaintRuleName("gpu.example.com", tc.node, tc.device); again != got {
				t.Errorf("not stable: %q, then %q", got, again)
			}
			for what, other := range map[string]string{
				"driver": failfastplugin.DeviceTaintRuleName("other.example.com", tc.node, tc.device),
				"pool":   failfastplugin.DeviceTaintRuleName("gpu.example.com", tc.node, dev("pool-b", tc.device.Device)),
				"device": failfastplugin.DeviceTaintRuleName("gpu.example.com", tc.node, dev(tc.device.Pool, tc.device.Device+"x")),
				"node":   failfastplugin.DeviceTaintRuleName("gpu.example.com", "x"+tc.node, tc.device),
			} {
				if other == got {
					t.Errorf("another %s, the same name %q", what, got)
				}
			}
		})
	}
}

// TestRulesOfAnEarlierVersion: rules named as the library named them before
// the node was in the name (no ".<node>") still count after an upgrade: Load
// lists their devices as tainted (only this node's), a new fault adds a rule
// under the new name, and ClearDeviceFault deletes both.
func TestRulesOfAnEarlierVersion(t *testing.T) {
	ctx := t.Context()
	const driverName = "upgrade.dra-failfast.test"
	client := newFaultAPI(t)
	legacyRule := func(node string, device failfastplugin.DeviceID) *rulesapi.DeviceTaintRule {
		name, _, _ := strings.Cut(failfastplugin.DeviceTaintRuleName(driverName, node, device), ".")
		return &rulesapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{failfastplugin.DeviceTaintRuleDriverLabel: driverName},
				Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: node}},
			Spec: rulesapi.DeviceTaintRuleSpec{DeviceSelector: &rulesapi.DeviceTaintSelector{Driver: ptrTo(driverName), Pool: ptrTo(device.Pool), Device: ptrTo(device.Device)},
				Taint: rulesapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Effect: rulesapi.DeviceTaintEffectNoSchedule}},
		}
	}
	old, again, otherNodes := dev("pool-a", "dev-0"), dev("pool-a", "dev-1"), dev("node-2-pool", "dev-0")
	for _, rule := range []*rulesapi.DeviceTaintRule{legacyRule(faultNode, old), legacyRule(faultNode, again), legacyRule("node-2", otherNodes)} {
		if _, err := client.ResourceV1beta2().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{}, client, driverName)
	if got, want := faults.TaintedDevices(), []failfastplugin.DeviceID{old, again}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the upgrade: TaintedDevices = %v, want %v (this node's old rules)", got, want)
	}
	result, err := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {again}}}).PrepareResourceClaims(ctx, claimsNamed("broken"))
	if err != nil || !failfastplugin.IsPermanent(result["uid-broken"].Err) || strings.Contains(result["uid-broken"].Err.Error(), "not tainted") {
		t.Fatalf("a fault of a device with an old rule: %v, %v", err, result["uid-broken"].Err)
	}
	if got := len(rulesInAPI(t, client)[again]); got != 2 {
		t.Errorf("%s has %d rules, want 2: the old one and one under the new name", again, got)
	}
	if err := faults.ClearDeviceFault(ctx, old, again); err != nil {
		t.Fatal(err)
	}
	if got := faults.TaintedDevices(); len(got) != 0 {
		t.Errorf("after ClearDeviceFault: TaintedDevices = %v", got)
	}
	if rules := rulesInAPI(t, client); len(rules[old]) != 0 || len(rules[again]) != 0 || len(rules[otherNodes]) != 1 {
		t.Errorf("rules after ClearDeviceFault: %+v, want only node-2's old one", rules)
	}
}
