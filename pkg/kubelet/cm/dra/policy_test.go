// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

const policyHeader = "apiVersion: dra-failfast.io/v1alpha1\nkind: DriverFailurePolicy\n"

// usePolicy gives the test a kubelet's Manager whose policy file is path,
// holding content (none: no file), with a clock the test moves.
func usePolicy(t *testing.T, content string) (m *Manager, path string, advance func(time.Duration)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "driver-policy.yaml")
	if content != "" {
		writePolicy(t, path, content)
	}
	t.Setenv(DriverPolicyEnv, path)
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	m = &Manager{now: func() time.Time { return clock }}
	if policy, stamp, err := decision.ReadPolicyFile(path, true, nil); err == nil {
		m.policy.set(path, true, policy, stamp) // as Start, gate or not
	}
	return m, path, func(d time.Duration) { clock = clock.Add(d) }
}

func writePolicy(t *testing.T, path, content string) {
	t.Helper()
	// A new file each time: a rename is how editors and config management
	// replace files, and it changes the stamp even within one mtime tick.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// attempt runs one prepare attempt of pod with one claim "a" of driver d
// answering resp (nil: a gRPC error) and returns the attempt's error.
func attempt(t *testing.T, m *Manager, pod string, resp *drapbv1.NodePrepareResourceResponse) error {
	t.Helper()
	failures := m.NewPrepareFailures(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod, UID: types.UID(pod)}}, nil)
	var callErr error
	var response *drapbv1.NodePrepareResourcesResponse
	if resp == nil {
		callErr = errors.New("connection refused")
	} else {
		response = &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{"a": resp}}
	}
	failures.Record(t.Context(), "d.example.com", sentClaims("a"), response, callErr)
	return failures.Err(t.Context())
}

func outcomeCount(t *testing.T, outcome string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(policyOutcomes.WithLabelValues("d.example.com", outcome))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var (
	permanentAnswer = claimResp("device on fire", v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
	transientAnswer = claimResp("device busy", v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN)
	prepared        = &drapbv1.NodePrepareResourceResponse{}
)

func TestPolicyPermanent(t *testing.T) {
	enableFeature(t, true)
	for _, tc := range []struct {
		name          string
		policy        string
		wantPermanent bool
		wantOutcome   string
	}{
		{name: "no policy file: honor", wantPermanent: true, wantOutcome: PolicyHonored},
		{name: "honor", policy: policyHeader + "drivers:\n- driver: d.example.com\n  permanent: Honor\n", wantPermanent: true, wantOutcome: PolicyHonored},
		{name: "ignore", policy: policyHeader + "drivers:\n- driver: d.example.com\n  permanent: Ignore\n", wantOutcome: PolicyIgnored},
		{name: "ignore by default", policy: policyHeader + "default: {permanent: Ignore}\n", wantOutcome: PolicyIgnored},
		{name: "another driver ignored", policy: policyHeader + "drivers:\n- driver: other.example.com\n  permanent: Ignore\n", wantPermanent: true, wantOutcome: PolicyHonored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, path, _ := usePolicy(t, tc.policy)
			if tc.policy != "" {
				if err := m.start(ktesting.NewLogger(t, ktesting.DefaultConfig), t.TempDir(), 0); err != nil {
					t.Fatalf("Start(%s): %v", path, err)
				}
			}
			downgrades := permanentDowngrades.WithLabelValues("d.example.com", DowngradePolicyIgnore)
			beforeDowngrades, _ := testutil.GetCounterMetricValue(downgrades)
			before := outcomeCount(t, tc.wantOutcome)
			err := attempt(t, m, "pod", permanentAnswer)
			if IsPermanent(err) != tc.wantPermanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, !tc.wantPermanent, tc.wantPermanent)
			}
			if got := outcomeCount(t, tc.wantOutcome) - before; got != 1 {
				t.Errorf("outcome %s counted %v times, want 1", tc.wantOutcome, got)
			}
			afterDowngrades, _ := testutil.GetCounterMetricValue(downgrades)
			if ignored := tc.wantOutcome == PolicyIgnored; (afterDowngrades-beforeDowngrades == 1) != ignored {
				t.Errorf("policy_ignore downgrades grew by %v, want %v", afterDowngrades-beforeDowngrades, map[bool]int{true: 1}[ignored])
			}
		})
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestRetryBudgetAttempts(t *testing.T) {
	enableFeature(t, true)
	m, _, advance := usePolicy(t, policyHeader+"drivers:\n- driver: d.example.com\n  retryBudget: {attempts: 3}\n")
	before := outcomeCount(t, PolicyBudgetExhausted)
	for i := 1; i <= 2; i++ {
		if err := attempt(t, m, "pod", transientAnswer); err == nil || IsPermanent(err) {
			t.Fatalf("attempt %d: %v, want a transient error", i, err)
		}
		advance(budgetAttemptSpacing)
	}
	// Calls that failed as a whole do not count.
	if err := attempt(t, m, "pod", nil); IsPermanent(err) {
		t.Fatalf("a gRPC error used the budget: %v", err)
	}
	// Another pod has its own count.
	if err := attempt(t, m, "other-pod", transientAnswer); IsPermanent(err) {
		t.Fatalf("another pod's first failure: %v", err)
	}
	err := attempt(t, m, "pod", transientAnswer)
	if !IsPermanent(err) {
		t.Fatalf("third failed attempt: %v, want permanent", err)
	}
	var claim *PermanentError
	if !errors.As(err, &claim) || !strings.HasPrefix(claim.Message, "retry budget exhausted (") {
		t.Fatalf("errors.As(*PermanentError) = %+v", claim)
	}
	want := "driver d.example.com failed permanently: retry budget exhausted (3 failed attempts in 20s, budget 3 attempts): device busy"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if got := outcomeCount(t, PolicyBudgetExhausted) - before; got != 1 {
		t.Errorf("budget_exhausted counted %v times, want 1", got)
	}
	if n := m.budgets.len(); n != 1 {
		t.Errorf("%d counts kept, want 1 (other-pod's): an exhausted budget is forgotten", n)
	}
}

func TestRetryBudgetDuration(t *testing.T) {
	enableFeature(t, true)
	m, _, advance := usePolicy(t, policyHeader+"default: {retryBudget: {duration: 2m}}\n")
	if err := attempt(t, m, "pod", transientAnswer); IsPermanent(err) {
		t.Fatalf("first attempt: %v", err)
	}
	advance(119 * time.Second)
	if err := attempt(t, m, "pod", transientAnswer); IsPermanent(err) {
		t.Fatalf("attempt before the budget's time: %v", err)
	}
	// One second later: not counted as an attempt (budgetAttemptSpacing),
	// but the time is up.
	advance(time.Second)
	err := attempt(t, m, "pod", transientAnswer)
	if !IsPermanent(err) || !strings.Contains(err.Error(), "2 failed attempts in 2m0s, budget 2m0s") {
		t.Fatalf("attempt at the budget's time: %v, want permanent, naming what was spent", err)
	}
}

// TestIgnoredPermanentCountsAgainstBudget: with Ignore and a retry budget, an
// ignored Permanent answer is retried and counted like any unmarked error;
// the attempt that exhausts the budget fails the pod and is not logged or
// counted as a downgrade.
func TestIgnoredPermanentCountsAgainstBudget(t *testing.T) {
	enableFeature(t, true)
	m, _, advance := usePolicy(t, policyHeader+"drivers:\n- driver: d.example.com\n  permanent: Ignore\n  retryBudget: {attempts: 2}\n")
	downgrades := permanentDowngrades.WithLabelValues("d.example.com", DowngradePolicyIgnore)
	before, _ := testutil.GetCounterMetricValue(downgrades)
	ignored := policyOutcomes.WithLabelValues("d.example.com", PolicyIgnored)
	exhausted := policyOutcomes.WithLabelValues("d.example.com", PolicyBudgetExhausted)
	ignoredBefore, _ := testutil.GetCounterMetricValue(ignored)
	exhaustedBefore, _ := testutil.GetCounterMetricValue(exhausted)
	if err := attempt(t, m, "pod", permanentAnswer); err == nil || IsPermanent(err) {
		t.Fatalf("first ignored Permanent answer: %v, want a transient error", err)
	}
	advance(budgetAttemptSpacing)
	err := attempt(t, m, "pod", permanentAnswer)
	if !IsPermanent(err) || !strings.Contains(err.Error(), "retry budget exhausted (2 failed attempts in 10s, budget 2 attempts): device on fire") {
		t.Fatalf("second ignored Permanent answer: %v, want permanent, the budget exhausted", err)
	}
	after, _ := testutil.GetCounterMetricValue(downgrades)
	if after-before != 1 {
		t.Errorf("policy_ignore downgrades grew by %v, want 1 (the first attempt only)", after-before)
	}
	// The policy outcomes likewise: the exhausting attempt is the budget's, not an ignored answer.
	ignoredAfter, _ := testutil.GetCounterMetricValue(ignored)
	exhaustedAfter, _ := testutil.GetCounterMetricValue(exhausted)
	if ignoredAfter-ignoredBefore != 1 || exhaustedAfter-exhaustedBefore != 1 {
		t.Errorf("policy outcomes grew by ignored %v, budget_exhausted %v; want 1 and 1", ignoredAfter-ignoredBefore, exhaustedAfter-exhaustedBefore)
	}
}

// TestRetryBudgetCountsOncePerSpacing: a pod synced again and again (a
// controller annotating it every second) calls the driver each time, but
// attempts closer together than budgetAttemptSpacing count once.
func TestRetryBudgetCountsOncePerSpacing(t *testing.T) {
	enableFeature(t, true)
	m, _, advance := usePolicy(t, policyHeader+"default: {retryBudget: {attempts: 3}}\n")
	retries := policyOutcomes.WithLabelValues("d.example.com", PolicyBudgetRetry)
	before, _ := testutil.GetCounterMetricValue(retries)
	for i := range 10 {
		if err := attempt(t, m, "pod", transientAnswer); IsPermanent(err) {
			t.Fatalf("attempt %d, %ds after the first: %v", i+1, i, err)
		}
		advance(time.Second)
	}
	if after, _ := testutil.GetCounterMetricValue(retries); after-before != 1 {
		t.Errorf("budget_retry grew by %v over 10 attempts in 10s, want 1", after-before)
	}
	// 10s after the first: the second attempt; 20s: the third, exhausted.
	if err := attempt(t, m, "pod", transientAnswer); IsPermanent(err) {
		t.Fatalf("second counted attempt: %v", err)
	}
	advance(budgetAttemptSpacing)
	if err := attempt(t, m, "pod", transientAnswer); !IsPermanent(err) || !strings.Contains(err.Error(), "3 failed attempts in 20s") {
		t.Fatalf("third counted attempt: %v, want permanent after 3 attempts in 20s", err)
	}
}

// TestPolicyEntryInheritsDefault: a driver's entry takes the fields it does
// not set from the default.
func TestPolicyEntryInheritsDefault(t *testing.T) {
	enableFeature(t, true)
	m, _, _ := usePolicy(t, policyHeader+"default: {permanent: Ignore, retryBudget: {attempts: 5}}\ndrivers:\n- driver: d.example.com\n  retryBudget: {attempts: 3}\n- driver: h.example.com\n  permanent: Honor\n")
	if err := attempt(t, m, "pod", permanentAnswer); IsPermanent(err) {
		t.Errorf("an entry with only a retry budget did not keep the default's Ignore: %v", err)
	}
	policy := m.policy.policy()
	for driver, want := range map[string]string{
		"d.example.com": "Ignore, retry budget 3 attempts",
		"h.example.com": "Honor, retry budget 5 attempts",
		"x.example.com": "Ignore, retry budget 5 attempts",
	} {
		if got := policy.RuleFor(driver).String(); got != want {
			t.Errorf("RuleFor(%s) = %q, want %q", driver, got, want)
		}
	}
	if got, want := policy.String(), "default: Ignore, retry budget 5 attempts; d.example.com: Ignore, retry budget 3 attempts; h.example.com: Honor, retry budget 5 attempts"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestRetryBudgetResetBySuccess(t *testing.T) {
	enableFeature(t, true)
	m, _, _ := usePolicy(t, policyHeader+"default: {retryBudget: {attempts: 2}}\n")
	attempt(t, m, "pod", transientAnswer)
	if err := attempt(t, m, "pod", prepared); err != nil {
		t.Fatalf("prepared: %v", err)
	}
	if err := attempt(t, m, "pod", transientAnswer); IsPermanent(err) {
		t.Fatalf("the count survived a successful prepare: %v", err)
	}
}

func TestRetryBudgetExpiry(t *testing.T) {
	enableFeature(t, true)
	m, _, advance := usePolicy(t, policyHeader+"default: {retryBudget: {attempts: 5}}\n")
	attempt(t, m, "deleted-pod", transientAnswer)
	advance(budgetExpiry + time.Minute)
	attempt(t, m, "pod", transientAnswer)
	if n := m.budgets.len(); n != 1 {
		t.Errorf("%d counts kept, want 1: a count without an attempt for %v is dropped", n, budgetExpiry)
	}
}

// A pod that already ran containers is never failed by a budget: the
// kubelet's DowngradeIfMayHaveRun sees an ordinary permanent error.
func TestRetryBudgetNeverFailsStartedPod(t *testing.T) {
	enableFeature(t, true)
	m, _, _ := usePolicy(t, policyHeader+"default: {retryBudget: {attempts: 1}}\n")
	err := attempt(t, m, "pod", transientAnswer)
	if !IsPermanent(err) {
		t.Fatalf("budget of 1: %v, want permanent", err)
	}
	started := &v1.Pod{Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}}
	if err := DowngradeIfMayHaveRun(started, false, err); IsPermanent(err) {
		t.Errorf("a started pod's budget failure stays permanent: %v", err)
	}
}

// TestPolicyFile: what the kubelet does with each change to the policy file
// after it loaded a policy, one refresh (one look at the file) at a time, on
// the path named by DriverPolicyEnv and on the default path: a new version is
// taken only once it stayed the same for policySettle, and read once; a
// version that cannot be used (removed, invalid, a FIFO, a directory, over
// MaxDriverPolicySize) keeps the policy in effect and is counted once,
// without being read when its stat says enough.
func TestPolicyFile(t *testing.T) {
	enableFeature(t, true)
	const (
		honor  = policyHeader + "drivers:\n- driver: d.example.com\n  permanent: Honor\n"
		ignore = policyHeader + "drivers:\n- driver: d.example.com\n  permanent: Ignore\n"
	)
	logger := ktesting.NewLogger(t, ktesting.DefaultConfig)
	for _, explicit := range []bool{true, false} {
		t.Run(map[bool]string{true: "named by " + DriverPolicyEnv, false: "default path"}[explicit], func(t *testing.T) {
			m, path, _ := usePolicy(t, honor)
			if !explicit {
				// The default path, with no file when the kubelet started.
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				m.policy.set(path, false, &DriverFailurePolicy{}, decision.FileStamp{})
			}
			now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
			look := func(d time.Duration) { now = now.Add(d); m.policy.refresh(logger, now) }
			want := func(step string, ignored bool) {
				t.Helper()
				if err := attempt(t, m, "pod", permanentAnswer); IsPermanent(err) == ignored {
					t.Fatalf("%s: Permanent answer taken as permanent: %v, want %v", step, IsPermanent(err), !ignored)
				}
			}
			counted := func(step string, wantFailures, wantReads int64, do func()) {
				t.Helper()
				failures, _ := testutil.GetCounterMetricValue(policyReloadFailures)
				reads := m.policy.reads.Load()
				do()
				gotFailures, _ := testutil.GetCounterMetricValue(policyReloadFailures)
				if int64(gotFailures-failures) != wantFailures || m.policy.reads.Load()-reads != wantReads {
					t.Errorf("%s: %v reload failures counted, %d reads; want %d and %d", step, gotFailures-failures, m.policy.reads.Load()-reads, wantFailures, wantReads)
				}
			}
			if !explicit {
				counted("no file, still none", 0, 0, func() { look(time.Second); look(time.Second) })
				want("no file: the default policy", false)
				writePolicy(t, path, honor)
				counted("a file appears", 0, 1, func() { look(time.Second); look(time.Second) })
				want("the file's Honor", false)
			}

			// The kill switch, without a kubelet restart: taken once settled.
			writePolicy(t, path, ignore)
			counted("Ignore written", 0, 0, func() { look(time.Second) })
			want("Ignore seen once, not settled", false)
			counted("Ignore settled", 0, 1, func() { look(time.Second); look(time.Second) })
			want("Ignore in effect", true)

			// A non-atomic edit: rm, then a write in place that shows a
			// valid prefix (Honor for every driver) before the whole file.
			counted("rm", 1, 0, func() {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				look(time.Second)
				look(time.Second)
			})
			want("file gone", true)
			counted("prefix, then the whole file within a second", 0, 1, func() {
				if err := os.WriteFile(path, []byte(policyHeader), 0o600); err != nil {
					t.Fatal(err)
				}
				look(time.Second)
				look(policySettle / 2)
				want("a prefix seen twice within a second", true)
				f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString("drivers:\n- driver: d.example.com\n  permanent: Ignore\n  retryBudget: {attempts: 5}\n"); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				// The stamp moved: seen again, settled a second later.
				look(500 * time.Millisecond)
				look(time.Second)
				look(time.Second)
			})
			if got := m.policy.policy().RuleFor("d.example.com").String(); got != "Ignore, retry budget 5 attempts" {
				t.Errorf("after the edit the rule is %q, want the whole file's", got)
			}

			// Versions that cannot be used: counted once each, the policy
			// in effect kept; only the invalid one is read, once.
			for _, bad := range []struct {
				name  string
				reads int64
				make  func() error
			}{
				{"invalid", 1, func() error {
					return os.WriteFile(path+".new", []byte(policyHeader+"drivers:\n- driver: d.example.com\n  permanent: Maybe\n"), 0o600)
				}},
				{"FIFO", 0, func() error { return syscall.Mkfifo(path+".new", 0o600) }},
				{"directory", 0, func() error { return os.Mkdir(path+".new", 0o700) }},
				{"64 MiB", 0, func() error {
					f, err := os.Create(path + ".new")
					if err != nil {
						return err
					}
					defer func() { _ = f.Close() }()
					return f.Truncate(64 << 20)
				}},
			} {
				counted(bad.name, 1, bad.reads, func() {
					if err := os.RemoveAll(path); err != nil {
						t.Fatal(err)
					}
					if err := bad.make(); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(path+".new", path); err != nil {
						t.Fatal(err)
					}
					for range 4 {
						look(time.Second)
					}
				})
				want(bad.name, true)
			}
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}

			// Back to the default on purpose: a policy without rules.
			writePolicy(t, path, policyHeader)
			counted("a policy without rules", 0, 1, func() { look(time.Second); look(time.Second) })
			want("no rules: the default policy", false)
		})
	}
}

func TestStartLoadsDriverPolicy(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.DefaultConfig)
	for _, tc := range []struct {
		name    string
		gateOff bool
		content string // "": no file
		wantErr string
	}{
		{name: "valid", content: policyHeader},
		{name: "invalid: the kubelet refuses to start", content: policyHeader + "drivers:\n- driver: a.example.com\n  permanent: Maybe\n", wantErr: `drivers[0].permanent: Unsupported value: "Maybe"`},
		{name: "named file missing", wantErr: "no such file (named by " + DriverPolicyEnv + ")"},
		{name: "gate off: nothing read", gateOff: true, content: "not: yaml: at all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enableFeature(t, !tc.gateOff)
			m, path, _ := usePolicy(t, tc.content)
			err := m.start(logger, t.TempDir(), 0)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Start error = %v, want one naming %s and containing %q", err, path, tc.wantErr)
			}
		})
	}
}
