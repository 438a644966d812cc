// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// driverPolicyFile is the kubelet's DRA driver failure policy
// (DRA_FAILFAST_DRIVER_POLICY). It starts empty (every driver honored, no
// budget); tests add a rule for a driver of their own and remove it when
// they end. The kubelet takes a new version of the file once it has stayed
// the same for a second (setDriverRule waits for that).
var (
	driverPolicyFile string
	driverPolicyMu   sync.Mutex
)

const policyOutcomesMetric = "dra_driver_policy_outcomes_total"

func newDriverPolicyFile() (string, error) {
	dir, err := os.MkdirTemp("", "dra-failfast-policy-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "driver-policy.yaml")
	return path, writeDriverPolicy(path, &failfastdra.DriverFailurePolicy{})
}

func writeDriverPolicy(path string, policy *failfastdra.DriverFailurePolicy) error {
	policy.APIVersion, policy.Kind = failfastdra.DriverPolicyAPIVersion, failfastdra.DriverPolicyKind
	data, err := yaml.Marshal(policy)
	if err != nil {
		return err
	}
	return writeFileAtomically(path, data)
}

// writeFileAtomically replaces path by a rename, as configuration management
// does.
func writeFileAtomically(path string, data []byte) error {
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// setDriverRule puts rule for driver into the node's policy until the test ends.
func setDriverRule(t *testing.T, driver string, rule failfastdra.DriverRule) {
	t.Helper()
	edit := func(change func(*failfastdra.DriverFailurePolicy)) error {
		driverPolicyMu.Lock()
		defer driverPolicyMu.Unlock()
		data, err := os.ReadFile(driverPolicyFile)
		if err != nil {
			return err
		}
		policy, err := decision.ParseDriverPolicy(data)
		if err != nil {
			return err
		}
		policy.Drivers = slices.DeleteFunc(policy.Drivers, func(e failfastdra.DriverPolicyEntry) bool { return e.Driver == driver })
		change(policy)
		return writeDriverPolicy(driverPolicyFile, policy)
	}
	logSize := kubeletLogSize(t)
	if err := edit(func(p *failfastdra.DriverFailurePolicy) {
		p.Drivers = append(p.Drivers, failfastdra.DriverPolicyEntry{Driver: driver, DriverRule: rule})
	}); err != nil {
		t.Fatalf("policy for %s: %v", driver, err)
	}
	waitForPolicyInEffect(t, logSize, driver+": "+rule.String())
	t.Cleanup(func() {
		if err := edit(func(*failfastdra.DriverFailurePolicy) {}); err != nil {
			t.Errorf("removing the policy of %s: %v", driver, err)
		}
	})
}

func kubeletLogSize(t *testing.T) int64 {
	t.Helper()
	info, err := os.Stat(filepath.Join(cluster.LogDir(), "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// waitForPolicyInEffect waits until the kubelet logged, after offset in its
// log, that it took a version of the policy file that says rule: it takes a
// new version once the file stayed the same for a second.
func waitForPolicyInEffect(t *testing.T, offset int64, rule string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(filepath.Join(cluster.LogDir(), "kubelet.log"))
		if err != nil || int64(len(data)) < offset {
			return false, err
		}
		for line := range strings.Lines(string(data[offset:])) {
			if strings.Contains(line, `"DRA driver failure policy changed"`) && strings.Contains(line, rule) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the kubelet did not take the policy with %q: %v", rule, err)
	}
}

func outcomes(t *testing.T, driver, outcome string) float64 {
	t.Helper()
	return kubeletMetric(t, policyOutcomesMetric, map[string]string{"driver_name": driver, "outcome": outcome})
}

// Ignore: a driver's Permanent answers are retried as a stock kubelet
// retries them; switching the rule back to Honor, without restarting the
// kubelet, fails the pod at its next retry.
func TestPolicyIgnore(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	t.Parallel()
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "ignored.dra-failfast.test", Devices: 2})
	setDriverRule(t, d.Name(), failfastdra.DriverRule{Permanent: failfastdra.PermanentIgnore})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", d, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "the driver says Permanent, wrongly"}))
	createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
	// The retry is timed from the first call: scheduling and allocation come
	// before it, and take longer while every parallel test starts at once.
	waitForCalls(t, d, ns, "app", 1, time.Minute)
	waitForCalls(t, d, ns, "app", 2, resyncWait)
	pod := expectNotFailed(t, ns, "app", 2*time.Second)
	if pod.Status.Phase != v1.PodPending {
		t.Errorf("pod phase %s, want Pending", pod.Status.Phase)
	}
	if n := outcomes(t, d.Name(), failfastdra.PolicyIgnored); n < 2 {
		t.Errorf("%s{outcome=%s} = %v, want >= 2 (one per attempt)", policyOutcomesMetric, failfastdra.PolicyIgnored, n)
	}
	if n := kubeletMetric(t, downgradesMetric, map[string]string{"driver_name": d.Name(), "reason": failfastdra.DowngradePolicyIgnore}); n < 2 {
		t.Errorf("%s{reason=%s} = %v, want >= 2", downgradesMetric, failfastdra.DowngradePolicyIgnore, n)
	}

	setDriverRule(t, d.Name(), failfastdra.DriverRule{Permanent: failfastdra.PermanentHonor})
	pod = waitFor(t, ns, "app", resyncWait, "Failed once Honor is back", podFailed)
	checkFailedPod(t, pod, d.Name(), "failed permanently", "the driver says Permanent, wrongly")
	deleteAndCheckNoLeaks(t, ns, d)
}

// A retry budget of 3 attempts: a driver that never says Permanent fails
// the pod at its 3rd failed attempt (3 prepares, 1 unprepare, no more), and a
// Job whose podFailurePolicy matches the condition fails at its first pod.
func TestPolicyRetryBudget(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	t.Parallel()
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "budget.dra-failfast.test", Devices: 4})
	setDriverRule(t, d.Name(), failfastdra.DriverRule{RetryBudget: &failfastdra.RetryBudget{Attempts: 3}})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", d, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Message: "device stuck in reset"}))

	t.Run("pod", func(t *testing.T) {
		start := time.Now()
		createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
		pod := waitFor(t, ns, "app", 4*resyncWait, "Failed", podFailed)
		t.Logf("pod Failed %.1fs after creation: %s", time.Since(start).Seconds(), pod.Status.Message)
		checkFailedPod(t, pod, d.Name(), "retry budget exhausted (3 failed attempts in", "budget 3 attempts", "device stuck in reset")
		time.Sleep(resyncWait) // past two more resyncs: no more calls
		_, stats := statsOf(t, d, ns, "app", "")
		if stats.PrepareCalls != 3 || stats.UnprepareCalls != 1 {
			t.Errorf("driver saw %d prepare and %d unprepare calls, want 3 and 1", stats.PrepareCalls, stats.UnprepareCalls)
		}
		if n := outcomes(t, d.Name(), failfastdra.PolicyBudgetExhausted); n < 1 {
			t.Errorf("%s{outcome=%s} = %v, want >= 1", policyOutcomesMetric, failfastdra.PolicyBudgetExhausted, n)
		}
	})

	t.Run("job", func(t *testing.T) {
		createConditionJob(t, ns, "job", "claim")
		if reason := jobFailedReason(t, ns, "job", 4*resyncWait); reason != batchv1.JobReasonPodFailurePolicy {
			t.Fatalf("job: failed with reason %q, want %q", reason, batchv1.JobReasonPodFailurePolicy)
		}
		if n := jobPods(t, ns, "job"); n != 1 {
			t.Errorf("job created %d pods, want 1", n)
		}
	})
	deleteAndCheckNoLeaks(t, ns, d)
}

// Issue 34, item 6: every update of a pod syncs it again, and each sync calls
// the driver; a retry budget counts at most one attempt per 10 s
// (budgetAttemptSpacing). A controller that annotates a Pending pod 10 times
// in 8 s, right after its first failed attempt, makes the kubelet call the
// driver about as often and uses no attempt of a budget of 3: the first
// attempt is the only one counted, and the pod is not Failed.
func TestPolicyRetryBudgetIgnoresSyncTriggers(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	t.Parallel()
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "annotated.dra-failfast.test", Devices: 2})
	setDriverRule(t, d.Name(), failfastdra.DriverRule{RetryBudget: &failfastdra.RetryBudget{Attempts: 3}})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", d, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Message: "device stuck in reset"}))
	createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
	first := waitForCalls(t, d, ns, "app", 1, time.Minute)
	start := time.Now() // at most the poll's 200 ms after the first attempt
	for i := range 10 {
		if i > 0 {
			time.Sleep(800 * time.Millisecond)
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"example.com/touched":"%d"}}}`, i)
		if _, err := client.CoreV1().Pods(ns).Patch(t.Context(), "app", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each annotation's sync calls the driver at once; the last call in a
	// second, and the count read right after.
	_ = waitForCalls(t, d, ns, "app", first.PrepareCalls+4, 5*time.Second)
	counted := outcomes(t, d.Name(), failfastdra.PolicyBudgetRetry)
	elapsed := time.Since(start)
	_, stats := statsOf(t, d, ns, "app", "")
	calls := stats.PrepareCalls - first.PrepareCalls
	t.Logf("%d prepare calls in the %.1fs of 10 annotations; %v counted against the budget", calls, elapsed.Seconds(), counted)
	// Before 10 s (budgetAttemptSpacing) after the first attempt nothing
	// but the first attempt counts; from then on the pod's own retry may
	// count once (a machine too slow to annotate 10 times in 10 s).
	if counted != 1 && (counted != 2 || elapsed+200*time.Millisecond < 10*time.Second) {
		t.Errorf("%s{outcome=%s} = %v %.1fs after the first attempt, want 1: the annotations' syncs were counted against the budget", policyOutcomesMetric, failfastdra.PolicyBudgetRetry, counted, elapsed.Seconds())
	}
	expectNotFailed(t, ns, "app", 2*time.Second)
	deleteAndCheckNoLeaks(t, ns, d)
}

// A retry budget never fails a pod for calls that failed as a whole (gRPC
// errors) or for a driver the kubelet cannot reach (unregistered): with a
// budget of 3 attempts, one counted failure, then at least 3 such failures
// (2 gRPC errors, 1 or more attempts without the driver), the pod runs once
// the driver is back and succeeds. A driver that just restarted may fail its
// first call once more (the template's behavior): the budget leaves room for
// that one.
func TestPolicyRetryBudgetCountsOnlyDriverAnswers(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	t.Parallel()
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "budget-safety.dra-failfast.test", Devices: 2})
	setDriverRule(t, d.Name(), failfastdra.DriverRule{RetryBudget: &failfastdra.RetryBudget{Attempts: 3}})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", d, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "device warming up"}))
	createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
	waitForCalls(t, d, ns, "app", 1, time.Minute) // the one counted failure

	// gRPC errors: the whole call fails, nothing is counted.
	if err := d.Client.SetBehavior(t.Context(), ns, testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient,
		Message: "overloaded", Wire: &testdriver.WireSpec{GRPCCode: "Unavailable"}}); err != nil {
		t.Fatal(err)
	}
	waitForCalls(t, d, ns, "app", 3, 2*resyncWait)
	expectNotFailed(t, ns, "app", time.Second)

	// Unregistered: the kubelet cannot call the driver, nothing is counted.
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	expectNotFailed(t, ns, "app", resyncWait)
	// The window counts only if the kubelet tried: upstream's error names the missing driver.
	if !slices.ContainsFunc(eventsOf(t, ns, "app", "FailedPrepareDynamicResources"), func(e v1.Event) bool {
		return strings.Contains(e.Message, "DRA driver "+d.Name()+" is not registered")
	}) {
		t.Errorf("no FailedPrepareDynamicResources event says DRA driver %s is not registered: the kubelet never tried while it was gone", d.Name())
	}
	if err := d.Start(t.Context(), cluster); err != nil {
		t.Fatalf("driver back: %v", err)
	}
	if err := d.Client.SetBehavior(t.Context(), ns, testdriver.BehaviorSpec{Prepare: testdriver.PrepareSucceed}); err != nil {
		t.Fatal(err)
	}
	pod := waitFor(t, ns, "app", resyncWait+time.Minute, "Running or Failed", func(p *v1.Pod) bool { return podRunning(p) || podFailed(p) })
	if !podRunning(pod) {
		t.Fatalf("pod wrongly failed: %s: %s", pod.Status.Reason, pod.Status.Message)
	}
	deleteAndCheckNoLeaks(t, ns, d)
}

// A retry budget never fails a pod that already ran containers: after a
// kubelet restart the re-created sandbox prepares again, the driver keeps
// failing, the budget of 1 runs out, and the kubelet downgrades the failure
// as it does a Permanent answer. Not parallel: it restarts the kubelet.
func TestPolicyRetryBudgetNeverFailsRunningPod(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "budget-running.dra-failfast.test", Devices: 2})
	setDriverRule(t, d.Name(), failfastdra.DriverRule{RetryBudget: &failfastdra.RetryBudget{Attempts: 1}})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", d, nil)
	createPodWith(t, ns, "app", v1.RestartPolicyAlways, "claim")
	waitFor(t, ns, "app", time.Minute, "Running", podRunning)
	if err := d.Client.SetBehavior(t.Context(), ns, testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Message: "device lost"}); err != nil {
		t.Fatal(err)
	}
	restartKubelet(t.Context(), t, true, d)
	killSandbox(t, getPod(t, ns, "app"))
	waitForCalls(t, d, ns, "app", 2, time.Minute)
	expectNotFailed(t, ns, "app", 10*time.Second)
	// Counted since the restart, under either safety rule: the record of
	// prepared pods names the pod before the runtime is asked.
	started := kubeletMetric(t, downgradesMetric, map[string]string{"driver_name": d.Name(), "reason": failfastdra.DowngradePodStarted})
	prepared := kubeletMetric(t, downgradesMetric, map[string]string{"driver_name": d.Name(), "reason": failfastdra.DowngradePreparedBefore})
	if started+prepared < 1 {
		t.Errorf("%s{reason=%s or %s} = %v, want >= 1: the budget ran out and was downgraded", downgradesMetric, failfastdra.DowngradePodStarted, failfastdra.DowngradePreparedBefore, started+prepared)
	}
	events := eventsOf(t, ns, "app", "FailedPrepareDynamicResources")
	if !slices.ContainsFunc(events, func(e v1.Event) bool { return strings.Contains(e.Message, "retry budget exhausted") }) {
		t.Errorf("no event names the exhausted budget: %+v", events)
	}
	if err := d.Client.ClearBehavior(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ns, "app", resyncWait+time.Minute, "Running again", func(p *v1.Pod) bool {
		return podRunning(p) && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready
	})
	deleteAndCheckNoLeaks(t, ns, d)
}

// Issue 34, item 2: an operator's non-atomic edit leaves a moment in which
// the policy file says something else. Two such edits, each with a prepare
// forced into its moment, keep the policy in effect (Ignore): the driver's
// wrong Permanent answer does not fail the pod. An rm, then cp: no file for
// a moment, counted as a reload failure. A truncate and write (cat new >
// file) by a slow writer: for seconds the file is a valid prefix of the new
// version in which the driver has no rule (Honor); the kubelet takes a
// version only once it stayed the same for a second. Not parallel: it holds
// the node's policy file away from every other test.
func TestPolicyKeptThroughNonAtomicEdit(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "gap.dra-failfast.test", Devices: 2})
	setDriverRule(t, d.Name(), failfastdra.DriverRule{Permanent: failfastdra.PermanentIgnore})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", d, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "the driver says Permanent, wrongly"}))

	driverPolicyMu.Lock()
	data, err := os.ReadFile(driverPolicyFile)
	if err != nil {
		driverPolicyMu.Unlock()
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		defer driverPolicyMu.Unlock()
		if err := os.WriteFile(driverPolicyFile, data, 0o644); err != nil { // the "cp" of the edit
			t.Errorf("restoring the policy file: %v", err)
		}
	}
	t.Cleanup(restore)
	failuresBefore, _ := e2eframework.KubeletMetric(t.Context(), cluster, "dra_driver_policy_reload_failures_total", nil)
	if err := os.Remove(driverPolicyFile); err != nil { // the "rm"
		t.Fatal(err)
	}
	createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
	waitForCalls(t, d, ns, "app", 1, time.Minute) // the prepare in the gap
	expectNotFailed(t, ns, "app", 3*time.Second)
	if n := outcomes(t, d.Name(), failfastdra.PolicyIgnored); n < 1 {
		t.Errorf("%s{outcome=%s} = %v: the prepare in the gap did not keep Ignore", policyOutcomesMetric, failfastdra.PolicyIgnored, n)
	}
	if failures := kubeletMetric(t, "dra_driver_policy_reload_failures_total", nil); failures <= failuresBefore {
		t.Errorf("the missing policy file was not counted: reload failures %v, %v before", failures, failuresBefore)
	}
	restore()

	truncateAndWriteSlowly(t, d, ns, "app-2")
	deleteAndCheckNoLeaks(t, ns, d)
}

// Issue 34, item 2: a 64 MB file or a FIFO at the policy path costs the
// kubelet no memory and blocks no prepare: it looks at the file (one stat),
// counts it as a version it cannot use, keeps the policy in effect, and a
// healthy pod runs. Measured before: a 64 MB file took the kubelet from 76 to
// 516 MiB, and a FIFO blocked every prepare. Not parallel: it holds the
// node's policy file away from every other test.
func TestPolicyBadFileCostsNoMemory(t *testing.T) {
	forkOnly(t, "the node's DRA driver failure policy")
	_, release := holdPolicyFile(t)
	defer release()
	ns := namespaceFor(t)
	createTemplate(t, ns, "healthy", driver, nil)
	// A pod first, so that the baselines are of a kubelet that has prepared
	// and started a pod since its start, as each bad file's pod is.
	createPodWith(t, ns, "warm-up", v1.RestartPolicyNever, "healthy")
	waitFor(t, ns, "warm-up", time.Minute, "Running", podRunning)
	const slack = 10 << 20 // the bound over the kubelet's baseline
	for i, bad := range []struct {
		name  string
		write func(path string) error
	}{
		{"a 64 MB file", func(path string) error {
			return os.WriteFile(path, bytes.Repeat([]byte("# padding of a policy file far over its 1 MiB limit\n"), 64<<20/52), 0o644)
		}},
		{"a FIFO", func(path string) error { return syscall.Mkfifo(path, 0o644) }},
	} {
		// A scrape of /metrics before the baseline too: the polls below scrape.
		failuresBefore := kubeletMetric(t, "dra_driver_policy_reload_failures_total", nil)
		baseline := kubeletRSS(t)
		tmp := driverPolicyFile + ".bad"
		if err := bad.write(tmp); err != nil {
			t.Fatalf("%s: %v", bad.name, err)
		}
		if err := os.Rename(tmp, driverPolicyFile); err != nil {
			t.Fatal(err)
		}
		// The kubelet looks once a second and would read a new version after
		// it stayed the same for a second: counted within seconds.
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return kubeletMetric(t, "dra_driver_policy_reload_failures_total", nil) > failuresBefore, nil
		})
		if err != nil {
			t.Errorf("%s at the policy path: the kubelet did not count it as a version it cannot use: %v", bad.name, err)
		}
		pod := fmt.Sprintf("app-%d", i)
		createPodWith(t, ns, pod, v1.RestartPolicyNever, "healthy")
		waitFor(t, ns, pod, time.Minute, "Running with "+bad.name+" at the policy path", podRunning)
		if rss := kubeletRSS(t); rss > baseline+slack {
			t.Errorf("%s at the policy path: the kubelet's RSS went from %d to %d MiB, want at most %d MiB more", bad.name, baseline>>20, rss>>20, slack>>20)
		} else {
			t.Logf("%s at the policy path: the kubelet's RSS %d MiB, %d MiB before", bad.name, rss>>20, baseline>>20)
		}
	}
	deleteAndCheckNoLeaks(t, ns, driver)
}

// holdPolicyFile takes the node's policy file away from every other test
// and returns its content; release puts that content back (by a rename) and
// lets them go on.
func holdPolicyFile(t *testing.T) (data []byte, release func()) {
	t.Helper()
	driverPolicyMu.Lock()
	data, err := os.ReadFile(driverPolicyFile)
	if err != nil {
		driverPolicyMu.Unlock()
		t.Fatal(err)
	}
	return data, func() {
		defer driverPolicyMu.Unlock()
		if err := writeFileAtomically(driverPolicyFile, data); err != nil {
			t.Errorf("restoring the policy file: %v", err)
		}
	}
}

// kubeletRSS is the kubelet's resident memory in bytes (VmRSS).
func kubeletRSS(t *testing.T) int64 {
	t.Helper()
	pid, err := cluster.KubeletPID()
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kB int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kB); err != nil {
				t.Fatalf("VmRSS of the kubelet: %v", err)
			}
			return kB << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// truncateAndWriteSlowly rewrites the policy file in place with a version
// whose last entry is d's Ignore rule, written slowly: the file is truncated,
// a valid prefix without that entry written, and a comment grows a byte
// every 100 ms (the file never stays the same for a second) until a prepare
// of pod has been called; then the rest. The old version stays in effect
// throughout: pod is not Failed and the driver's Permanent answer is ignored.
func truncateAndWriteSlowly(t *testing.T, d *e2eframework.Driver, ns, pod string) {
	t.Helper()
	data, release := holdPolicyFile(t)
	defer release()
	policy, err := decision.ParseDriverPolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	// The new version: the policy in effect with a filler entry, then d's
	// Ignore rule last, so that a prefix of it is a valid policy without it.
	// apiVersion and kind go first, by hand: sigs.k8s.io/yaml sorts keys.
	filler := failfastdra.DriverPolicyEntry{Driver: "filler.dra-failfast.test", DriverRule: failfastdra.DriverRule{Permanent: failfastdra.PermanentHonor}}
	ignore := failfastdra.DriverPolicyEntry{Driver: d.Name(), DriverRule: failfastdra.DriverRule{Permanent: failfastdra.PermanentIgnore}}
	others := slices.DeleteFunc(slices.Clone(policy.Drivers), func(e failfastdra.DriverPolicyEntry) bool { return e.Driver == d.Name() })
	text := func(drivers ...failfastdra.DriverPolicyEntry) string {
		body, err := yaml.Marshal(&failfastdra.DriverFailurePolicy{Default: policy.Default, Drivers: drivers})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("apiVersion: %s\nkind: %s\n%s", failfastdra.DriverPolicyAPIVersion, failfastdra.DriverPolicyKind, body)
	}
	prefix := text(append(others, filler)...)
	full := text(append(others, filler, ignore)...)
	rest, ok := strings.CutPrefix(full, prefix)
	if !ok {
		t.Fatalf("the new version does not begin with the prefix:\n%s\n---\n%s", full, prefix)
	}
	if p, err := decision.ParseDriverPolicy([]byte(prefix)); err != nil || p.RuleFor(d.Name()).Action() != failfastdra.PermanentHonor {
		t.Fatalf("the prefix is not a valid policy in which %s is Honor (%v):\n%s", d.Name(), err, prefix)
	}

	// The new version once, atomically, so that the one written in place
	// below changes nothing the kubelet decides.
	logSize := kubeletLogSize(t)
	if err := writeFileAtomically(driverPolicyFile, []byte(full)); err != nil {
		t.Fatal(err)
	}
	newVersion, err := decision.ParseDriverPolicy([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	waitForPolicyInEffect(t, logSize, filler.Driver+": "+newVersion.RuleFor(filler.Driver).String())
	ignoredBefore := outcomes(t, d.Name(), failfastdra.PolicyIgnored)

	file, err := os.OpenFile(driverPolicyFile, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	if _, err := file.WriteString(prefix); err != nil {
		t.Fatal(err)
	}
	stop, written := make(chan struct{}), make(chan error, 1)
	finish := sync.OnceValue(func() error { close(stop); return <-written })
	defer func() { _ = finish() }()
	go func() {
		comment := strings.Repeat("# the rest of the new version follows\n", 100)
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				tail := rest
				if i > 0 && comment[i-1] != '\n' {
					tail = "\n" + rest
				}
				_, err := file.WriteString(tail)
				written <- err
				return
			case <-ticker.C:
				if i < len(comment) {
					if _, err := file.WriteString(comment[i : i+1]); err != nil {
						written <- err
						return
					}
				}
			}
		}
	}()
	// Longer than the kubelet's look at the file (once a second): a kubelet
	// that took a version without waiting for it to settle has the prefix
	// by now, as one that reads the file at each prepare does.
	time.Sleep(2500 * time.Millisecond)
	createPodWith(t, ns, pod, v1.RestartPolicyNever, "claim")
	waitForCalls(t, d, ns, pod, 1, time.Minute) // the prepare while the file is a prefix
	if err := finish(); err != nil {
		t.Fatalf("writing the rest of the policy file: %v", err)
	}
	expectNotFailed(t, ns, pod, 3*time.Second)
	if n := outcomes(t, d.Name(), failfastdra.PolicyIgnored); n <= ignoredBefore {
		t.Errorf("%s{outcome=%s} = %v, %v before: the prepare while the file was a prefix did not keep Ignore", policyOutcomesMetric, failfastdra.PolicyIgnored, n, ignoredBefore)
	}
}
