// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

func permanentPodError(drivers ...string) *PermanentPodError {
	e := &PermanentPodError{}
	for i, d := range drivers {
		e.Permanent = append(e.Permanent, &PermanentError{
			Claim:   ClaimRef{Namespace: "ns", Name: fmt.Sprintf("claim-%d", i), UID: "uid"},
			Driver:  d,
			Message: "invalid opaque config",
		})
	}
	return e
}

func TestPodRejection(t *testing.T) {
	enableFeature(t, true)
	counter := permanentFailures.WithLabelValues("rejection-driver")
	before, _ := testutil.GetCounterMetricValue(counter)

	reason, message, reject := PodRejection(t.Context(), fmt.Errorf("prepare dynamic resources: %w", permanentPodError("rejection-driver", "rejection-driver")))
	if !reject || reason != PodFailedReason {
		t.Fatalf("PodRejection = %q, %v; want %q, true", reason, reject, PodFailedReason)
	}
	want := "DRA driver failed permanently, will not retry: " +
		"ResourceClaim ns/claim-0 (UID uid): driver rejection-driver failed permanently: invalid opaque config; " +
		"ResourceClaim ns/claim-1 (UID uid): driver rejection-driver failed permanently: invalid opaque config"
	if message != want {
		t.Errorf("message =\n%s\nwant\n%s", message, want)
	}
	if after, _ := testutil.GetCounterMetricValue(counter); after-before != 2 {
		t.Errorf("permanent failures counter grew by %v, want 2", after-before)
	}

	for _, err := range []error{nil, errors.New("NodePrepareResources failed for ResourceClaim x: busy")} {
		if _, _, reject := PodRejection(t.Context(), err); reject {
			t.Errorf("PodRejection(%v) rejects", err)
		}
	}

	t.Run("gate off", func(t *testing.T) {
		enableFeature(t, false)
		if _, _, reject := PodRejection(t.Context(), permanentPodError("rejection-driver")); reject {
			t.Error("PodRejection rejects with the feature gate off")
		}
	})
}

func TestPodMessageBounded(t *testing.T) {
	e := permanentPodError()
	for i := range 50 {
		e.Permanent = append(e.Permanent, &PermanentError{
			Claim:   ClaimRef{Namespace: "ns", Name: fmt.Sprintf("claim-%02d", i), UID: "uid"},
			Driver:  "d",
			Message: strings.Repeat("\x1b[31mé\n", 100000), // megabytes of escapes
		})
	}
	msg := e.PodMessage()
	if len(msg) > maxPodMessageLen {
		t.Errorf("pod message is %d bytes, limit %d", len(msg), maxPodMessageLen)
	}
	if !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x1b\n") {
		t.Errorf("pod message has control characters or invalid UTF-8: %q", msg)
	}
	if !strings.Contains(msg, "claim-00") || !strings.HasSuffix(msg, " more claims") {
		t.Errorf("pod message should name the first claim and count the rest: %q", msg)
	}
}

func TestSanitize(t *testing.T) {
	cases := map[string]struct {
		in     string
		maxLen int
		want   string
	}{
		"plain":            {in: "device dev-1 is broken", maxLen: 100, want: "device dev-1 is broken"},
		"controls":         {in: "a\nb\tc\x1b[0m\x00d", maxLen: 100, want: "a b c [0m d"},
		"bidi override":    {in: "abc\u202edef", maxLen: 100, want: "abc def"},
		"invalid utf8":     {in: "a\xff\xfeb", maxLen: 100, want: "a b"},
		"trim":             {in: "  \n x \n ", maxLen: 100, want: "x"},
		"truncate":         {in: strings.Repeat("x", 50), maxLen: 20, want: strings.Repeat("x", 17) + v1alpha.TruncatedMark},
		"truncate in rune": {in: strings.Repeat("é", 20), maxLen: 20, want: strings.Repeat("é", 8) + v1alpha.TruncatedMark},
		"keeps unicode":    {in: "über 日本", maxLen: 100, want: "über 日本"},
		"limit below mark": {in: strings.Repeat("x", 50), maxLen: 2, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sanitize(tc.in, tc.maxLen); got != tc.want {
				t.Errorf("sanitize(%q, %d) = %q, want %q", tc.in, tc.maxLen, got, tc.want)
			}
		})
	}
}

// FuzzSanitize: whatever a driver sends, what reaches pod status, events and
// logs fits its bound, is valid UTF-8, and holds only printable characters
// and single spaces, none at either end.
func FuzzSanitize(f *testing.F) {
	for _, seed := range []string{"device dev-1 is broken", "a\nb\tc\x1b[0m\x00d", "abc\u202edef", "a\xff\xfeb", "  \n x \n ", strings.Repeat("é", 300)} {
		f.Add(seed, maxDriverMessageLen)
	}
	f.Add("abc", 2)
	f.Fuzz(func(t *testing.T, in string, maxLen int) {
		got := sanitize(in, maxLen)
		if len(got) > max(maxLen, 0) || !utf8.ValidString(got) || strings.Contains(got, "  ") ||
			strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") {
			t.Fatalf("sanitize(%q, %d) = %q", in, maxLen, got)
		}
		for _, r := range got {
			if !unicode.IsPrint(r) {
				t.Fatalf("sanitize(%q, %d) = %q holds %U", in, maxLen, got, r)
			}
		}
	})
}

func TestDowngradeIfMayHaveRun(t *testing.T) {
	permanentErr := fmt.Errorf("prepare dynamic resources: %w", permanentPodError("downgrade-driver"))
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	restarted := v1.ContainerStatus{RestartCount: 1}
	waiting := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	cases := map[string]struct {
		err            error
		runtimeKnows   bool
		status         v1.PodStatus
		wantPermanent  bool
		wantDowngraded bool
	}{
		"new pod":                   {err: permanentErr, status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{waiting}}, wantPermanent: true},
		"runtime has containers":    {err: permanentErr, runtimeKnows: true, wantDowngraded: true},
		"API says running":          {err: permanentErr, status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{running}}, wantDowngraded: true},
		"init container restarted":  {err: permanentErr, status: v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{restarted}}, wantDowngraded: true},
		"transient stays transient": {err: errors.New("busy"), runtimeKnows: true},
		"transient on new pod":      {err: errors.New("busy")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("pod-" + strings.ReplaceAll(name, " ", "-"))}, Status: tc.status}
			counter := permanentDowngrades.WithLabelValues("downgrade-driver", DowngradePodStarted)
			before, _ := testutil.GetCounterMetricValue(counter)

			got := DowngradeIfMayHaveRun(pod, tc.runtimeKnows, tc.err)
			if IsPermanent(got) != tc.wantPermanent {
				t.Errorf("IsPermanent(result) = %v, want %v", IsPermanent(got), tc.wantPermanent)
			}
			var downgraded *DowngradedError
			if errors.As(got, &downgraded) != tc.wantDowngraded {
				t.Fatalf("result %v is a *DowngradedError: %v, want %v", got, !tc.wantDowngraded, tc.wantDowngraded)
			}
			if !tc.wantDowngraded {
				if got != tc.err {
					t.Errorf("error changed: %v -> %v", tc.err, got)
				}
				return
			}
			// The text goes into an Event and the log: it names the claim
			// and driver, and does not promise what does not happen.
			for _, want := range []string{"ns/claim-0", "downgrade-driver", "invalid opaque config", "the pod had a sandbox or started containers: not failing the pod, will retry"} {
				if !strings.Contains(got.Error(), want) {
					t.Errorf("downgraded text %q does not contain %q", got, want)
				}
			}
			if strings.Contains(got.Error(), "will not retry") {
				t.Errorf("downgraded text says %q: %q", "will not retry", got)
			}
			// Counted every time (the kubelet logs the error and makes an
			// Event of it at each attempt).
			DowngradeIfMayHaveRun(pod, tc.runtimeKnows, tc.err)
			if after, _ := testutil.GetCounterMetricValue(counter); after-before != 2 {
				t.Errorf("downgrade counter grew by %v, want 2", after-before)
			}
		})
	}
}

// quietContext returns a context whose logger writes only verbosity 0 into
// the returned buffer.
func quietContext(t testing.TB) (context.Context, interface{ String() string }) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
	return klog.NewContext(t.Context(), logger), logger.GetSink().(ktesting.Underlier).GetBuffer()
}

func TestUpdatePodStatus(t *testing.T) {
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	failedAt := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	existing := v1.PodCondition{Type: PodConditionType, Status: v1.ConditionTrue, Reason: PodFailedReason, Message: "first", LastTransitionTime: failedAt}
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse}
	waiting := v1.ContainerStatus{Name: "waiting", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	unknown := v1.ContainerStatus{Name: "unknown", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "ContainerStatusUnknown", ExitCode: 137}}}
	ran := v1.ContainerStatus{Name: "ran", ContainerID: "containerd://1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, ContainerID: "containerd://1"}}}
	foreignFalse := v1.PodCondition{Type: PodConditionType, Status: v1.ConditionFalse, Reason: "SomeoneElse"}
	foreignTrue := v1.PodCondition{Type: PodConditionType, Status: v1.ConditionTrue, Reason: "SomeoneElse"}
	running := v1.ContainerStatus{Name: "running", ContainerID: "containerd://2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	cases := map[string]struct {
		disabled bool
		old      v1.PodStatus
		phase    v1.PodPhase
		// third is a third container of the status besides waiting and
		// unknown (none when nil).
		third          *v1.ContainerStatus
		wantCondition  *v1.PodCondition
		wantContainers []string // the state reason (stateReason) of waiting, unknown (and third)
	}{
		"rejected pod gets the condition and container reasons": {
			old: rejected, phase: v1.PodFailed,
			wantCondition:  &v1.PodCondition{Type: PodConditionType, Status: v1.ConditionTrue, Reason: PodFailedReason, Message: "boom"},
			wantContainers: []string{PodFailedReason, PodFailedReason},
		},
		"condition kept from old status": {
			old: v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom", Conditions: []v1.PodCondition{ready, existing}}, phase: v1.PodFailed,
			wantCondition: &existing, wantContainers: []string{PodFailedReason, PodFailedReason},
		},
		"phase computed from the runtime is pinned to Failed": {
			old: rejected, phase: v1.PodSucceeded,
			wantCondition:  &v1.PodCondition{Type: PodConditionType, Status: v1.ConditionTrue, Reason: PodFailedReason, Message: "boom"},
			wantContainers: []string{PodFailedReason, PodFailedReason},
		},
		"other failure": {old: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}, phase: v1.PodFailed, wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown"}},
		"not failed":    {old: v1.PodStatus{Phase: v1.PodPending, Reason: PodFailedReason}, phase: v1.PodPending, wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown"}},
		"gate off":      {disabled: true, old: rejected, phase: v1.PodFailed, wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown"}},
		// Issue 26, defect 2: after a kubelet restart old is the API's
		// status; a condition of our type that another client wrote on a
		// running pod, in either status, must not fail it.
		"running pod, foreign condition False": {
			old: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{ready, foreignFalse}}, phase: v1.PodRunning,
			third: &running, wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown", ""},
		},
		"running pod, foreign condition True": {
			old: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{ready, foreignTrue}}, phase: v1.PodRunning,
			third: &running, wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown", ""},
		},
		"pending pod, foreign condition True": {
			old: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{foreignTrue}}, phase: v1.PodPending,
			wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown"},
		},
		// Failed for our reason, but a container ran: not the kubelet's
		// rejection (it never rejects a pod that ran containers).
		"containers ran": {
			old: rejected, phase: v1.PodRunning, third: &ran,
			wantContainers: []string{"ContainerCreating", "ContainerStatusUnknown", "Error"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			enableFeature(t, !tc.disabled)
			status := v1.PodStatus{
				Phase:             tc.phase,
				Conditions:        []v1.PodCondition{ready},
				ContainerStatuses: []v1.ContainerStatus{*waiting.DeepCopy(), *unknown.DeepCopy()},
			}
			if tc.third != nil {
				status.ContainerStatuses = append(status.ContainerStatuses, *tc.third.DeepCopy())
			}
			UpdatePodStatus(&status, &tc.old)
			// The message without kubelet.rejectPod's "Pod was rejected: ".
			if wantMessage := "boom"; tc.wantCondition != nil && (status.Phase != v1.PodFailed || status.Reason != tc.old.Reason || status.Message != wantMessage) {
				t.Errorf("phase %q reason %q message %q, want the rejected pod's Failed %q %q", status.Phase, status.Reason, status.Message, tc.old.Reason, wantMessage)
			}
			if tc.wantCondition == nil && status.Phase != tc.phase {
				t.Errorf("phase changed to %q for a pod the DRA rejection did not touch", status.Phase)
			}
			got := status.Conditions
			if got[0] != ready {
				t.Errorf("existing condition changed: %+v", got[0])
			}
			switch {
			case tc.wantCondition == nil && len(got) != 1:
				t.Errorf("unexpected condition added: %+v", got[1:])
			case tc.wantCondition != nil && len(got) != 2:
				t.Errorf("conditions = %+v, want the DRA condition appended", got)
			case tc.wantCondition != nil:
				c := got[1]
				if !tc.wantCondition.LastTransitionTime.IsZero() && !c.LastTransitionTime.Equal(&tc.wantCondition.LastTransitionTime) {
					t.Errorf("condition transition time %v, want %v kept from the old status", c.LastTransitionTime, tc.wantCondition.LastTransitionTime)
				}
				c.LastTransitionTime = tc.wantCondition.LastTransitionTime
				if c != *tc.wantCondition {
					t.Errorf("condition = %+v, want %+v", c, *tc.wantCondition)
				}
			}
			for i, want := range tc.wantContainers {
				c := &status.ContainerStatuses[i]
				if got := stateReason(c); got != want {
					t.Errorf("container %s: state reason %q, want %q", c.Name, got, want)
				}
				// Never started: waiting, with no exit code and no
				// timestamps to report (kubectl describe prints none).
				if want == PodFailedReason && (c.State.Waiting == nil || c.State.Terminated != nil || c.State.Waiting.Message != neverStartedMessage) {
					t.Errorf("container %s: state %+v, want waiting with the never-started message", c.Name, c.State)
				}
			}
			if IsPodConditionType(PodConditionType) == tc.disabled {
				t.Errorf("IsPodConditionType = %v with gate enabled %v", !tc.disabled, !tc.disabled)
			}
			if IsPodConditionType(v1.PodReady) {
				t.Error("IsPodConditionType(Ready) = true")
			}
		})
	}
}

func TestAddFeatureGate(t *testing.T) {
	gate := featuregate.NewFeatureGate()
	if err := addFeatureGate(gate); err != nil {
		t.Fatal(err)
	}
	if gate.Enabled(DRAHandlePermanentDriverFailures) {
		t.Error("gate is on by default, want alpha default off")
	}
	// A second registration (e.g. a future upstream that defines the gate) is a no-op.
	if err := addFeatureGate(gate); err != nil {
		t.Fatalf("second addFeatureGate: %v", err)
	}
	if err := gate.Set(string(DRAHandlePermanentDriverFailures) + "=true"); err != nil {
		t.Fatal(err)
	}
	if !gate.Enabled(DRAHandlePermanentDriverFailures) {
		t.Error("gate cannot be turned on")
	}
	if spec := gate.GetAll()[DRAHandlePermanentDriverFailures]; spec.PreRelease != featuregate.Alpha {
		t.Errorf("PreRelease = %q, want Alpha", spec.PreRelease)
	}
}

// While the status manager holds a DRA-failed pod's phase back (containers
// or prepared claims may remain), the whole status is held back: the API's
// is published unchanged, and the cached status is left alone.
func TestHoldBackTerminalStatus(t *testing.T) {
	enableFeature(t, true)
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	creating := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	// Only never-started containers: UpdatePodStatus leaves a pod whose
	// containers ran alone (TestUpdatePodStatus).
	status := v1.PodStatus{
		Phase:             v1.PodPending, // held back by upstream's merge
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed"}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: creating}, {Name: "sidecar", State: creating}},
	}
	UpdatePodStatus(&status, &rejected)
	status.Phase = v1.PodPending
	api := v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady"}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Image: "api-image", State: creating}}}
	cached := status // shares the slices, like the status manager's cache

	MergePodStatus(&status, &api)

	if len(cached.Conditions) != 2 || !IsNeverStartedMark(&cached.ContainerStatuses[0]) {
		t.Errorf("the cached status changed: %+v", cached)
	}
	if diff := cmp.Diff(api, status); diff != "" {
		t.Errorf("held back status is not the API's (-api +published):\n%s", diff)
	}
	status.ContainerStatuses[0].Image = "changed"
	if api.ContainerStatuses[0].Image != "api-image" {
		t.Error("the published status shares the API status's slices")
	}
}

// Go initializes a package after the packages it imports: the blank import
// of upstream's features makes upstream's gates register before ours, so
// that a future upstream definition of the gate wins instead of panicking.
func TestUpstreamGatesRegisteredFirst(t *testing.T) {
	if !upstreamGatesFirst {
		t.Fatal("DRAHandlePermanentDriverFailures was registered before upstream's feature gates: keep the import of k8s.io/kubernetes/pkg/features")
	}
}

// Registered after an upstream that defines the gate with another spec, ours
// is a no-op and theirs wins. (Registered before it, upstream's registration
// would fail: component-base refuses a second spec, which is why
// TestUpstreamGatesRegisteredFirst checks the order.)
func TestAddFeatureGateOrder(t *testing.T) {
	upstream := map[featuregate.Feature]featuregate.VersionedSpecs{
		DRAHandlePermanentDriverFailures: {{Version: version.MustParse("1.38"), Default: true, PreRelease: featuregate.Beta}},
	}
	t.Run("upstream first", func(t *testing.T) {
		gate := featuregate.NewVersionedFeatureGate(version.MustParse("1.38"))
		if err := gate.AddVersioned(upstream); err != nil {
			t.Fatal(err)
		}
		if err := addFeatureGate(gate); err != nil {
			t.Fatalf("addFeatureGate after upstream: %v", err)
		}
		if spec := gate.GetAll()[DRAHandlePermanentDriverFailures]; spec.PreRelease != featuregate.Beta || !gate.Enabled(DRAHandlePermanentDriverFailures) {
			t.Errorf("spec %+v, want upstream's (Beta, on)", spec)
		}
	})
}

// While the terminal phase is held back, the status of a rejected pod
// changes nothing in the API: the generated Ready and ContainersReady
// ("PodFailed") give way to the API's, so that the sync sends no PATCH.
func TestMergePodStatusHeldBackChangesNothing(t *testing.T) {
	enableFeature(t, true)
	notReady := func(reason string) []v1.PodCondition {
		return []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: reason},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reason},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		}
	}
	waiting := []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	api := v1.PodStatus{Phase: v1.PodPending, Conditions: notReady("ContainersNotReady"), ContainerStatuses: waiting}
	// What generateAPIPodStatus and UpdatePodStatus make of the rejected
	// pod, with the phase held back by upstream's merge.
	status := v1.PodStatus{Phase: v1.PodFailed, Conditions: notReady("PodFailed"), ContainerStatuses: slices.Clone(waiting)}
	old := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "boom"}
	UpdatePodStatus(&status, &old)
	status.Phase, status.Reason, status.Message = api.Phase, api.Reason, api.Message
	MergePodStatus(&status, &api)
	if diff := cmp.Diff(api, status); diff != "" {
		t.Errorf("held-back status differs from the API's (-api +published):\n%s", diff)
	}
	// kubelet.rejectPod's minimal status (phase, reason, message and
	// nothing else), before and after the full status reached the API.
	published := *status.DeepCopy()
	published.Phase, published.Reason, published.Message = v1.PodFailed, PodFailedReason, "boom"
	UpdatePodStatus(&published, &old)
	for _, apiStatus := range []v1.PodStatus{api, published} {
		minimal := old
		MergePodStatus(&minimal, &apiStatus)
		if diff := cmp.Diff(apiStatus, minimal); diff != "" {
			t.Errorf("minimal status published over API phase %s (-api +published):\n%s", apiStatus.Phase, diff)
		}
	}
}

// MergePodStatus keeps phase Failed (for a DRA failure) and the condition
// together in whatever status the status manager publishes.
func TestMergePodStatus(t *testing.T) {
	enableFeature(t, true) // for full(), which builds the table's statuses
	rejected := func() v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	}
	full := func() v1.PodStatus {
		status := v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}
		old := rejected()
		UpdatePodStatus(&status, &old)
		return status
	}
	api := v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}
	for name, tc := range map[string]struct {
		gate          bool
		status        v1.PodStatus
		wantCondition bool
		wantPhase     v1.PodPhase
	}{
		// kubelet.rejectPod's minimal status, published late by the status
		// manager after the pod finished terminating: held back whole, the
		// full status (UpdatePodStatus's condition) follows.
		"rejected, published terminal": {gate: true, status: rejected(), wantPhase: v1.PodPending},
		"full, published terminal":     {gate: true, status: full(), wantCondition: true, wantPhase: v1.PodFailed},
		"full, phase held back": {gate: true, wantPhase: v1.PodPending, status: func() v1.PodStatus {
			s := full()
			s.Phase, s.Reason, s.Message = api.Phase, api.Reason, api.Message // what upstream's hold-back does
			return s
		}()},
		"another failure":      {gate: true, status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}, wantPhase: v1.PodFailed},
		"running pod":          {gate: true, status: v1.PodStatus{Phase: v1.PodRunning}, wantPhase: v1.PodRunning},
		"gate off, our reason": {gate: false, status: rejected(), wantPhase: v1.PodFailed},
	} {
		t.Run(name, func(t *testing.T) {
			enableFeature(t, tc.gate)
			status := tc.status
			MergePodStatus(&status, &api)
			if _, has := conditionIndex(&status); has != tc.wantCondition {
				t.Errorf("condition present %v, want %v: %+v", has, tc.wantCondition, status.Conditions)
			}
			if status.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", status.Phase, tc.wantPhase)
			}
			if status.Phase != v1.PodFailed && hasNeverStartedMark(&status) {
				t.Errorf("never-started container marked without phase Failed: %+v", status.ContainerStatuses)
			}
			if i, has := conditionIndex(&status); has && (status.Conditions[i].Status != v1.ConditionTrue || status.Conditions[i].Message != "boom") {
				t.Errorf("condition %+v", status.Conditions[i])
			}
		})
	}
}

// MergePodStatus runs on every status the kubelet publishes: for pods that
// are not DRA failures it must not allocate.
func TestMergePodStatusAllocatesNothingForOtherPods(t *testing.T) {
	enableFeature(t, true)
	status := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	api := status
	if allocs := testing.AllocsPerRun(100, func() { MergePodStatus(&status, &api) }); allocs != 0 {
		t.Errorf("%v allocations per call", allocs)
	}
}

// Issue 26, defect 1: with the gate off MergePodStatus must leave every
// status as upstream's merge made it. The stock kubelet keeps a condition it
// does not own, DRAPermanentDriverFailure included, whoever wrote it.
func TestMergePodStatusGateOffIsStock(t *testing.T) {
	foreign := v1.PodCondition{Type: PodConditionType, Status: v1.ConditionFalse, Reason: "SomeoneElse"}
	// The mark UpdatePodStatus gives a container that never started.
	never := v1.ContainerStatus{Name: "app", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: PodFailedReason, Message: neverStartedMessage}}}
	if !neverStartedMark(&never) {
		t.Fatalf("fixture %+v is not the never-started mark", never.State)
	}
	api := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	for name, status := range map[string]v1.PodStatus{
		"running pod, foreign condition":     {Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady}, foreign}},
		"pending pod, condition of our type": {Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: PodConditionType, Status: v1.ConditionTrue}}},
		"pending pod, never-started state":   {Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{never}},
		"failed for our reason":              {Phase: v1.PodFailed, Reason: PodFailedReason, Message: "m"},
	} {
		t.Run(name, func(t *testing.T) {
			enableFeature(t, false)
			got := *status.DeepCopy()
			MergePodStatus(&got, &api)
			if diff := cmp.Diff(status, got); diff != "" {
				t.Errorf("gate off changed the status (-before +after):\n%s", diff)
			}
		})
	}
}

// Issue 26, defect 4: the condition is created in one place (UpdatePodStatus)
// and its lastTransitionTime never moves, whatever order the status manager
// publishes kubelet.rejectPod's minimal status and the full status in.
func TestMergePodStatusStampsConditionOnce(t *testing.T) {
	enableFeature(t, true)
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	full := v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}
	UpdatePodStatus(&full, &rejected)
	i, ok := conditionIndex(&full)
	if !ok {
		t.Fatalf("UpdatePodStatus added no condition: %+v", full)
	}
	stamped := full.Conditions[i].LastTransitionTime
	pending := v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}

	// 1. The minimal status first: held back whole, the API keeps its phase.
	minimal := rejected
	MergePodStatus(&minimal, &pending)
	if minimal.Phase != v1.PodPending || minimal.Reason != "" || minimal.Message != "" {
		t.Errorf("minimal status published with %s/%q/%q, want it held back to the API's", minimal.Phase, minimal.Reason, minimal.Message)
	}
	if _, has := conditionIndex(&minimal); has {
		t.Errorf("condition created outside UpdatePodStatus: %+v", minimal.Conditions)
	}
	// 2. The full status: published with UpdatePodStatus's condition.
	published := *full.DeepCopy()
	MergePodStatus(&published, &pending)
	if j, has := conditionIndex(&published); !has || published.Phase != v1.PodFailed || !published.Conditions[j].LastTransitionTime.Equal(&stamped) {
		t.Fatalf("full status published as %+v, want phase Failed and the condition stamped %v", published, stamped)
	}
	// 3. The minimal status again, later (a batch captured earlier): it
	// takes the API's condition, with its time.
	late := rejected
	MergePodStatus(&late, &published)
	j, has := conditionIndex(&late)
	if !has || late.Phase != v1.PodFailed || !late.Conditions[j].LastTransitionTime.Equal(&stamped) {
		t.Errorf("late minimal status published as %+v, want phase Failed and the API's condition stamped %v", late, stamped)
	}
}

// stateReason is the reason of c's state: waiting or terminated, "" when running.
func stateReason(c *v1.ContainerStatus) string {
	switch {
	case c.State.Waiting != nil:
		return c.State.Waiting.Reason
	case c.State.Terminated != nil:
		return c.State.Terminated.Reason
	}
	return ""
}

func TestPublishNow(t *testing.T) {
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	full := v1.PodStatus{Phase: v1.PodFailed}
	enableFeature(t, true)
	UpdatePodStatus(&full, &rejected)
	pending := &v1.Pod{Status: v1.PodStatus{Phase: v1.PodPending}}
	failed := &v1.Pod{Status: full}
	for _, tc := range []struct {
		name    string
		gateOff bool
		// running: the pod worker has not finished terminating the pod.
		running bool
		// skipped: the status manager skipped the last sync of the status.
		skipped bool
		pod     *v1.Pod
		status  v1.PodStatus
		want    bool
	}{
		{name: "full status, API still pending, last sync skipped", skipped: true, pod: pending, status: full, want: true},
		{name: "full status, published or still to sync", pod: pending, status: full},
		{name: "full status, pod still terminating", skipped: true, running: true, pod: pending, status: full},
		{name: "API already failed", skipped: true, pod: failed, status: full},
		{name: "minimal status without the condition", skipped: true, pod: pending, status: rejected},
		{name: "another reason", skipped: true, pod: pending, status: v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu", Conditions: full.Conditions}},
		{name: "not failed", skipped: true, pod: pending, status: v1.PodStatus{Phase: v1.PodPending, Conditions: full.Conditions}},
		{name: "gate off", gateOff: true, skipped: true, pod: pending, status: full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enableFeature(t, !tc.gateOff)
			pod := tc.pod.DeepCopy()
			pod.UID = types.UID(t.Name())
			if tc.skipped {
				skippedSyncs.note(pod.UID)
				t.Cleanup(func() { skippedSyncs.take(pod.UID) })
			}
			if got := PublishNow(pod, &tc.status, couldHaveRunningContainers(tc.running)); got != tc.want {
				t.Errorf("PublishNow = %v, want %v", got, tc.want)
			}
			if tc.want && PublishNow(pod, &tc.status, couldHaveRunningContainers(tc.running)) {
				t.Error("PublishNow forced the same skipped sync twice")
			}
		})
	}
}

// couldHaveRunningContainers is the status manager's deletion safety
// provider in tests: what the pod worker says of every pod.
type couldHaveRunningContainers bool

func (c couldHaveRunningContainers) PodCouldHaveRunningContainers(*v1.Pod) bool { return bool(c) }

// podsByUID is the status manager's pod manager in tests.
type podsByUID map[types.UID]*v1.Pod

func (p podsByUID) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	pod, ok := p[uid]
	return pod, ok
}

// SkipsSync skips exactly syncs that would publish nothing: for each case it
// skips, upstream's merge (the terminal phase held back while the pod could
// have running containers) followed by MergePodStatus gives the API's own
// status.
func TestSkipsSync(t *testing.T) {
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	full := v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	enableFeature(t, true)
	UpdatePodStatus(&full, &rejected)
	api := v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady"}}}
	pods := podsByUID{"pending": {ObjectMeta: metav1.ObjectMeta{UID: "pending"}, Status: api}, "failed": {ObjectMeta: metav1.ObjectMeta{UID: "failed"}, Status: full}}
	for _, tc := range []struct {
		name    string
		gateOff bool
		running bool
		uid     types.UID
		status  v1.PodStatus
		want    bool
	}{
		{name: "minimal status, pod still terminating", running: true, uid: "pending", status: rejected, want: true},
		{name: "minimal status, pod terminated", uid: "pending", status: rejected, want: true},
		{name: "full status, pod still terminating", running: true, uid: "pending", status: full, want: true},
		{name: "full status, pod terminated", uid: "pending", status: full},
		{name: "full status, API already failed", running: true, uid: "failed", status: full},
		{name: "full status, pod unknown to the pod manager", running: true, uid: "gone", status: full},
		{name: "another reason", running: true, uid: "pending", status: v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"}},
		{name: "not failed", running: true, uid: "pending", status: v1.PodStatus{Phase: v1.PodPending}},
		{name: "gate off", gateOff: true, running: true, uid: "pending", status: rejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enableFeature(t, !tc.gateOff)
			status := *tc.status.DeepCopy()
			t.Cleanup(func() { skippedSyncs.take(tc.uid) })
			if got := SkipsSync(pods, notedFirst{t, tc.running}, tc.uid, &status); got != tc.want {
				t.Fatalf("SkipsSync = %v, want %v", got, tc.want)
			}
			_, full := conditionIndex(&status)
			if noted := skippedSyncs.take(tc.uid); noted != (tc.want && full) {
				t.Errorf("skipped sync noted for PublishNow: %v, want %v", noted, tc.want && full)
			}
			if diff := cmp.Diff(tc.status, status); diff != "" {
				t.Errorf("SkipsSync changed the status (-before +after):\n%s", diff)
			}
			if !tc.want {
				return
			}
			if tc.running {
				if _, ok := conditionIndex(&status); !ok {
					// Upstream's merge gives rejectPod's minimal status the
					// API's phase, reason and message: MergePodStatus can no
					// longer tell it, and it would clear the API's
					// conditions. Only SkipsSync holds it back.
					return
				}
				// upstream's merge holds the terminal phase back
				status.Phase, status.Reason, status.Message = api.Phase, api.Reason, api.Message
			}
			MergePodStatus(&status, &api)
			if diff := cmp.Diff(api, status); diff != "" {
				t.Errorf("a skipped sync would have published (-api +published):\n%s", diff)
			}
		})
	}
}

// The full Failed status keeps the API's transition times of the conditions
// whose status did not change: the kubelet regenerated them after
// kubelet.rejectPod's minimal status replaced its cache, with the time of
// the failure.
func TestMergePodStatusKeepsTransitionTimes(t *testing.T) {
	enableFeature(t, true)
	scheduled := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	failedAt := metav1.NewTime(scheduled.Add(time.Minute))
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "boom"}
	status := v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: failedAt},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: failedAt},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: failedAt},
		{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: failedAt},
	}}
	UpdatePodStatus(&status, &rejected)
	api := v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: scheduled},
		{Type: v1.PodInitialized, Status: v1.ConditionFalse, LastTransitionTime: scheduled},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: scheduled},
	}}
	i, _ := conditionIndex(&status)
	stamped := status.Conditions[i].LastTransitionTime

	MergePodStatus(&status, &api)

	want := map[v1.PodConditionType]metav1.Time{
		v1.PodScheduled:    scheduled, // unchanged: the API's time
		v1.PodInitialized:  failedAt,  // False -> True: a transition
		v1.PodReady:        scheduled, // still False
		v1.ContainersReady: failedAt,  // not in the API
		PodConditionType:   stamped,
	}
	for _, c := range status.Conditions {
		if w := want[c.Type]; !c.LastTransitionTime.Equal(&w) {
			t.Errorf("%s: lastTransitionTime %v, want %v", c.Type, c.LastTransitionTime, w)
		}
	}
	if status.Phase != v1.PodFailed || len(status.Conditions) != 5 {
		t.Errorf("status changed otherwise: %+v", status)
	}
}

// notedFirst is a deletion safety provider that checks that SkipsSync noted
// the pod before it read the pod worker's state: a PublishNow that comes
// after the pod terminated must see the note of a sync that read the state
// before.
type notedFirst struct {
	t       *testing.T
	running bool
}

func (n notedFirst) PodCouldHaveRunningContainers(pod *v1.Pod) bool {
	skippedSyncs.mu.Lock()
	noted := skippedSyncs.pods.Has(pod.UID)
	skippedSyncs.mu.Unlock()
	if !noted {
		n.t.Errorf("pod %q: the pod worker's state was read before the skip was noted", pod.UID)
	}
	return n.running
}
