// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

// Package e2enode runs dra-failfast end to end on a real local single-node
// cluster (internal/localcluster) with the patched kubelet and the test DRA
// driver. It needs root and the binaries of `make build`:
//
//	go test -tags e2e_node -v -timeout 30m -parallel 48 ./test/e2e_node/
//
// Tests that restart the kubelet are not parallel: Go runs them first, one
// after the other, and each leaves the kubelet as it found it. All others
// are parallel (-parallel: they mostly wait for the cluster, not a CPU).
package e2enode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

const gate = string(failfastdra.DRAHandlePermanentDriverFailures)

// syncFrequency is the kubelet's pod resync period on the e2e cluster. A
// failed NodePrepareResources is retried at the next resync (plus up to 50%
// jitter): 10s instead of the default 1m makes every "is it retried?" and
// "is it never called again?" check take seconds instead of minutes without
// weakening it (checks wait past two resyncs: resyncWait).
const (
	syncFrequency = 10 * time.Second
	resyncWait    = 2*syncFrequency + syncFrequency/2 + 5*time.Second
)

var (
	cluster *localcluster.Cluster
	// driver is the default test driver, shared by the tests.
	driver *e2eframework.Driver
	client kubernetes.Interface
	// kubeletVersion is the node's kubelet's --version; forkKubelet tells
	// whether it is the fork's (any build of it) rather than the
	// upstream-shaped series' (make test-series): see forkOnly.
	kubeletVersion string
	forkKubelet    bool
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e_node tests need root: they run a real kubelet and containerd")
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// LOCAL_CLUSTER_KUBELET (relative to the repository) picks another fork
	// build, e.g. _output/bin/kubelet-race (make test-e2e-race).
	kubelet := os.Getenv("LOCAL_CLUSTER_KUBELET")
	if root, err := localcluster.RepoRoot(); err == nil && kubelet != "" && !filepath.IsAbs(kubelet) {
		kubelet = filepath.Join(root, kubelet)
	}
	var err error
	if driverPolicyFile, err = newDriverPolicyFile(); err != nil {
		fmt.Fprintf(os.Stderr, "driver failure policy: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(driverPolicyFile)) }()
	cluster, err = localcluster.Up(ctx, localcluster.Config{KubeletPath: kubelet, KubeletFeatureGates: map[string]bool{gate: true},
		KubeletSyncFrequency: syncFrequency, KubeletDriverPolicy: driverPolicyFile,
		// The status manager's reconciliations (V(3)), which checkRequestsOfFailedPod counts.
		KubeletVModule: "status_manager=3"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "local cluster up: %v\n", err)
		_ = localcluster.Cleanup(context.Background(), localcluster.Config{})
		return 1
	}
	defer func() {
		if err := cluster.Down(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "local cluster down: %v\n", err)
		}
	}()
	client = cluster.Client()
	out, err := exec.CommandContext(ctx, cluster.KubeletPath(), "--version").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet --version: %v\n", err)
		return 1
	}
	kubeletVersion = strings.TrimSpace(string(out))
	forkKubelet = strings.Contains(kubeletVersion, "-dra-failfast.")
	if driver, err = e2eframework.StartDriver(ctx, cluster, e2eframework.DriverOptions{TaintBroken: true, Webhook: true}); err != nil {
		fmt.Fprintf(os.Stderr, "test driver: %v\n", err)
		return 1
	}
	defer func() { _ = driver.Stop() }()
	// The default driver's admission webhook validates its opaque config
	// in every namespace but those labelled WebhookOff or WebhookDown.
	if err := driver.RegisterWebhook(ctx, cluster); err != nil {
		fmt.Fprintf(os.Stderr, "webhook: %v\n", err)
		return 1
	}
	if err := e2eframework.EnsureDeviceClass(ctx, client); err != nil {
		fmt.Fprintf(os.Stderr, "device class: %v\n", err)
		return 1
	}
	code := m.Run()
	// A kubelet built with -race reports data races in its log and goes on.
	kubeletLog, err := os.ReadFile(filepath.Join(cluster.LogDir(), "kubelet.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet log: %v\n", err)
		return 1
	}
	ours, upstream := dataRaces(string(kubeletLog))
	if ours+upstream > 0 {
		fmt.Fprintf(os.Stderr, "kubelet log: %d data race reports in code dra-failfast adds or patches, %d elsewhere (upstream's own)\n", ours, upstream)
	}
	if ours > 0 {
		code = 1
	}
	return code
}

// raceFrames mark a data race report as ours: its stacks pass through code
// that dra-failfast adds or that its patches change.
var raceFrames = []string{
	"github.com/dra-failfast/",
	"k8s.io/kubernetes/pkg/kubelet/cm/dra.", "k8s.io/kubernetes/pkg/kubelet/cm/dra/",
	"k8s.io/kubernetes/pkg/kubelet/status.",
	"k8s.io/kubernetes/pkg/kubelet/kuberuntime.(*kubeGenericRuntimeManager).SyncPod",
	"k8s.io/kubernetes/pkg/kubelet.(*Kubelet).SyncPod", "k8s.io/kubernetes/pkg/kubelet.(*Kubelet).SyncTerminatingPod",
	"k8s.io/kubernetes/pkg/kubelet.(*Kubelet).rejectPod", "k8s.io/kubernetes/pkg/kubelet.(*Kubelet).generateAPIPodStatus",
}

// dataRaces counts the race detector's reports in a log, split into ours
// (see raceFrames) and the others.
func dataRaces(log string) (ours, others int) {
	reports := strings.Split(log, "WARNING: DATA RACE")[1:]
	for _, report := range reports {
		report, _, _ = strings.Cut(report, "==================")
		if slices.ContainsFunc(raceFrames, func(frame string) bool { return strings.Contains(report, "\n  "+frame) }) {
			ours++
		} else {
			others++
		}
	}
	return ours, others
}

// setup makes a namespace and a claim template "claim" of the default
// driver with behavior in it.
func setup(t *testing.T, parameters []byte) string {
	t.Helper()
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", driver, parameters)
	return ns
}

func createPod(t *testing.T, ns, name string) {
	t.Helper()
	createPodWith(t, ns, name, v1.RestartPolicyNever, "claim")
}

// claimStats returns the default driver's counters for the claim of pod ns/pod.
func claimStats(t *testing.T, ns, pod string) testdriver.ClaimStats {
	t.Helper()
	_, stats := statsOf(t, driver, ns, pod, "")
	return stats
}

// (a) A permanent driver error fails the pod, the driver is asked once, the
// claim is unprepared, and no container ever starts.
func TestPermanentFailureFailsPod(t *testing.T) {
	t.Parallel()
	for name, behavior := range map[string][]byte{
		"invalid-config": []byte(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`),
		"injected":       behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "device firmware refuses this partition layout"}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits past two resyncs; own namespace and claim
			// Invalid config gets past admission only while the driver's
			// webhook is down: prepare-time validation is the safety net.
			ns := namespaceWithLabels(t, map[string]string{e2eframework.WebhookNamespaceLabel: e2eframework.WebhookDown})
			createTemplate(t, ns, "claim", driver, behavior)
			start := time.Now()
			createPod(t, ns, "app")
			pod := waitFor(t, ns, "app", 90*time.Second, "Failed", podFailed)
			t.Logf("pod Failed %.1fs after creation; message: %s", time.Since(start).Seconds(), pod.Status.Message)
			checkFailedPod(t, pod, "app-")
			checkForkMessage(t, pod, ns+"/app-", testdriver.DefaultDriverName, "failed permanently")
			// The kubelet would retry at its next pod resync: wait past
			// two and count again.
			time.Sleep(resyncWait)
			stats := claimStats(t, ns, "app")
			if stats.PrepareCalls != 1 || stats.UnprepareCalls != 1 {
				t.Errorf("driver saw %d prepare and %d unprepare calls, want 1 and 1", stats.PrepareCalls, stats.UnprepareCalls)
			}
			if !stats.Permanent {
				t.Errorf("driver did not report a permanent error: %+v", stats)
			}
			checkRequestsOfFailedPod(t, ns)
			pod = getPod(t, ns, "app")
			if pod.Status.Phase != v1.PodFailed || len(e2eframework.StartedContainers(pod)) > 0 {
				t.Errorf("pod changed after failing: %+v", pod.Status)
			}
			deleteAndCheckNoLeaks(t, ns, driver)
		})
	}
}

// checkRequestsOfFailedPod checks the node's requests about the one pod of
// ns, "app", failed at its first sync, against the upstream minimum: the stock
// kubelet's first sync (the claim, then one GET and one PATCH of the status,
// Pending), one GET and one PATCH for the Failed status, and the GET of the
// sync that TerminatePod forces at the end of every pod's termination,
// stock or fork. Statuses that the status manager holds back while the pod
// terminates cost nothing (they cost a GET each before). Two upstream
// behaviours of a loaded machine add a GET each and are allowed: the periodic
// reconciliation, when it finds the pod manager's copy of the status behind
// the status manager's (the pod watch lagging a PATCH; counted from the
// kubelet's log), and a request the apiserver refused and the kubelet retried
// (the node authorizer answers 403 to a GET of a pod whose binding it has not
// seen yet; counted from the audit log). One race of the fork adds a GET
// too: PublishNow forcing a sync of the Failed status while the status
// manager's own sync of it runs (between that sync's note of the skipped
// status and its check of the pod worker; the order that keeps the opposite
// race from losing the status): the forced sync finds the pod up to date.
// It is allowed once, and only when the kubelet's log shows more syncs that
// found the pod up to date than TerminatePod's one.
func checkRequestsOfFailedPod(t *testing.T, ns string) {
	t.Helper()
	requests, err := cluster.NodeRequests(ns)
	if err != nil {
		t.Fatal(err)
	}
	refused, err := cluster.NodeRequestsRefused(ns)
	if err != nil {
		t.Fatal(err)
	}
	reconciles := kubeletLogLines(t, ns+"/app", "a reconciliation should be triggered")
	forcedRace := min(1, max(0, kubeletLogLines(t, ns+"/app", "Status for pod is up-to-date")-1))
	if !forkKubelet {
		// The series leaves the status manager's requests as upstream makes
		// them; the fork's savings (staging-patches/0006, 0007) are its own.
		t.Logf("node requests for the failed pod (%s, not counted against the fork's bounds): %v; refused: %v", kubeletVersion, requests, refused)
		return
	}
	for request, most := range map[string]int{"get pods": 3 + reconciles + forcedRace, "patch pods/status": 2, "get resourceclaims": 1} {
		if answered := requests[request] - refused[request]; answered > most {
			timeline, err := cluster.NodeRequestTimeline(ns)
			t.Errorf("the node sent %d %q requests for the failed pod (%d refused), want at most %d answered (%d status reconciliations); all: %v; in order:\n%s (%v)",
				requests[request], request, refused[request], most, reconciles, requests, strings.Join(timeline, "\n"), err)
		}
	}
	t.Logf("node requests for the failed pod: %v; refused: %v; status reconciliations: %d; forced sync races: %d", requests, refused, reconciles, forcedRace)
}

// forkOnly skips a test of something only the fork's kubelet has: not part
// of KEP-5322, so not in the upstream-shaped series (docs/upstream.md,
// "Outside the KEP"), whose kubelet make test-series runs this suite with.
func forkOnly(t *testing.T, what string) {
	t.Helper()
	if !forkKubelet {
		t.Skipf("%s: the fork's own, not in the upstream-shaped series; the node's kubelet is %s", what, kubeletVersion)
	}
}

// kubeletLogLines counts the lines of the kubelet's log so far about a pod
// (namespace/name) that contain message.
func kubeletLogLines(t *testing.T, pod, message string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.LogDir(), "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, message) && strings.Contains(line, `pod="`+pod+`"`) {
			count++
		}
	}
	return count
}

// (b) A transient failure keeps the pod pending, then it runs once the
// driver stops failing.
func TestTransientFailureThenRuns(t *testing.T) {
	t.Parallel()
	// The kubelet retries a failed prepare at its next pod resync (syncFrequency).
	ns := setup(t, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "device busy"}))
	createPod(t, ns, "app")
	pod := waitFor(t, ns, "app", time.Minute, "Running or Failed", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning || p.Status.Phase == v1.PodFailed
	})
	if pod.Status.Phase != v1.PodRunning {
		t.Fatalf("pod did not run: %+v", pod.Status)
	}
	stats := claimStats(t, ns, "app")
	if stats.PrepareCalls != 2 || !stats.Prepared {
		t.Errorf("driver stats %+v, want 2 prepare calls and prepared", stats)
	}
	deleteAndCheckNoLeaks(t, ns, driver)
}

// A Job whose podFailurePolicy matches the DRA condition fails at the first
// permanently failing pod instead of burning its backoffLimit.
func TestJobPodFailurePolicyFailsFast(t *testing.T) {
	t.Parallel()
	ns := setup(t, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "invalid partition layout"}))
	// Common exit-code rules, placed first: they must not swallow the DRA
	// failure (never-started containers stay waiting, and onExitCodes rules
	// only match terminated containers, with operator In and NotIn alike).
	exitCodeRules := []batchv1.PodFailurePolicyRule{{
		Action:      batchv1.PodFailurePolicyActionIgnore,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{137}},
	}, {
		Action:      batchv1.PodFailurePolicyActionCount,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}},
	}}
	if !forkKubelet {
		// Upstream's TerminatePod, which the series keeps, gives
		// never-started containers exit code 137 (ContainerStatusUnknown):
		// exit-code rules placed first may match them. Keeping them waiting
		// is the fork's own (docs/upstream.md); the condition rule alone.
		t.Logf("the condition rule alone: exit-code rules first are the fork's case, the node's kubelet is %s", kubeletVersion)
		exitCodeRules = nil
	}
	start := time.Now()
	createConditionJob(t, ns, "job", "claim", exitCodeRules...)
	reason := jobFailedReason(t, ns, "job", 2*time.Minute)
	if reason == "" {
		t.Fatal("job did not fail")
	}
	t.Logf("job Failed (%s) %.1fs after creation", reason, time.Since(start).Seconds())
	if reason != batchv1.JobReasonPodFailurePolicy {
		t.Errorf("job failed with reason %q, want %q", reason, batchv1.JobReasonPodFailurePolicy)
	}
	if n := jobPods(t, ns, "job"); n != 1 {
		t.Errorf("job created %d pods, want 1: the policy must stop it at the first failure", n)
	}
}
