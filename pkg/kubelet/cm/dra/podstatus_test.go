package dra

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics/testutil"
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
	msg := e.podMessage()
	if len(msg) > maxPodMessageLen {
		t.Errorf("pod message is %d bytes, limit %d", len(msg), maxPodMessageLen)
	}
	if !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x1b\n") {
		t.Errorf("pod message has control characters or invalid UTF-8: %q", msg)
	}
	if !strings.Contains(msg, "claim-00") || !strings.HasSuffix(msg, "more") {
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
		"truncate":         {in: strings.Repeat("x", 50), maxLen: 20, want: "xxxxxx" + truncatedMark},
		"truncate in rune": {in: strings.Repeat("é", 20), maxLen: 19, want: "éé" + truncatedMark},
		"keeps unicode":    {in: "über 日本", maxLen: 100, want: "über 日本"},
		"limit below mark": {in: strings.Repeat("x", 50), maxLen: 3, want: truncatedMark},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sanitize(tc.in, tc.maxLen); got != tc.want {
				t.Errorf("sanitize(%q, %d) = %q, want %q", tc.in, tc.maxLen, got, tc.want)
			}
		})
	}
}

func TestDowngradeIfStarted(t *testing.T) {
	permanentErr := fmt.Errorf("prepare dynamic resources: %w", permanentPodError("downgrade-driver"))
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	restarted := v1.ContainerStatus{RestartCount: 1}
	waiting := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	cases := map[string]struct {
		err           error
		runtimeKnows  bool
		status        v1.PodStatus
		wantPermanent bool
	}{
		"new pod":                   {err: permanentErr, status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{waiting}}, wantPermanent: true},
		"runtime has containers":    {err: permanentErr, runtimeKnows: true},
		"API says running":          {err: permanentErr, status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{running}}},
		"init container restarted":  {err: permanentErr, status: v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{restarted}}},
		"transient stays transient": {err: errors.New("busy"), runtimeKnows: true},
		"transient on new pod":      {err: errors.New("busy")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DowngradeIfStarted(t.Context(), &v1.Pod{Status: tc.status}, tc.runtimeKnows, tc.err)
			if IsPermanent(got) != tc.wantPermanent {
				t.Errorf("IsPermanent(result) = %v, want %v", IsPermanent(got), tc.wantPermanent)
			}
			if got.Error() != tc.err.Error() {
				t.Errorf("text changed: %q -> %q", tc.err, got)
			}
		})
	}
}

func TestPodCondition(t *testing.T) {
	rejected := v1.PodStatus{Phase: v1.PodFailed, Reason: PodFailedReason, Message: "Pod was rejected: boom"}
	existing := v1.PodCondition{Type: PodConditionType, Status: v1.ConditionTrue, Reason: PodFailedReason, Message: "first"}
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse}
	cases := map[string]struct {
		disabled bool
		old      v1.PodStatus
		want     *v1.PodCondition
	}{
		"rejected pod gets the condition": {old: rejected, want: &v1.PodCondition{Type: PodConditionType, Status: v1.ConditionTrue, Reason: PodFailedReason, Message: "Pod was rejected: boom"}},
		"kept from old status":            {old: v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{ready, existing}}, want: &existing},
		"other failure":                   {old: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}},
		"not failed":                      {old: v1.PodStatus{Phase: v1.PodPending, Reason: PodFailedReason}},
		"gate off":                        {disabled: true, old: rejected},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			enableFeature(t, !tc.disabled)
			got := AppendPodCondition([]v1.PodCondition{ready}, &tc.old)
			if got[0] != ready {
				t.Errorf("existing condition changed: %+v", got[0])
			}
			switch {
			case tc.want == nil && len(got) != 1:
				t.Errorf("unexpected condition added: %+v", got[1:])
			case tc.want != nil && len(got) != 2:
				t.Errorf("conditions = %+v, want the DRA condition appended", got)
			case tc.want != nil:
				c := got[1]
				c.LastTransitionTime = tc.want.LastTransitionTime
				if c != *tc.want {
					t.Errorf("condition = %+v, want %+v", c, *tc.want)
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
