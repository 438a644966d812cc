// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

// The fault matrix: dra-failfast under faults, with the fork and the gate
// on. Overall pass: 0 pods wrongly failed, 0 leaked prepared claims, texts
// from drivers bounded. Tests that restart the kubelet are not parallel (Go
// runs them first, one by one, each restoring the kubelet as it found it);
// the others are parallel and use drivers of their own where they could
// disturb each other.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

const downgradesMetric = "dra_permanent_failure_downgrades_total"

// 1. A running pod whose claims get prepared again must not be failed by a
// permanent answer. The kubelet prepares when it creates a sandbox and the
// claims are not marked prepared in its memory (the mark is not
// checkpointed): a killed sandbox alone is re-created without a driver
// call; after a kubelet restart the re-created sandbox re-prepares, the
// driver answers Permanent and the kubelet downgrades it.
func TestFaultRunningPodNotFailedOnReprepare(t *testing.T) {
	ns := setup(t, nil)
	createPodWith(t, ns, "app", v1.RestartPolicyAlways, "claim")
	pod := waitFor(t, ns, "app", time.Minute, "Running", podRunning)
	if err := driver.Client.SetBehavior(t.Context(), ns, testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "device lost its firmware"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = driver.Client.ClearBehavior(context.Background(), ns) })

	t.Run("sandbox killed", func(t *testing.T) {
		killSandbox(t, pod)
		err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p := getPod(t, ns, "app")
			if podFailed(p) {
				return false, fmt.Errorf("pod wrongly failed: %s", p.Status.Message)
			}
			return p.Status.ContainerStatuses[0].RestartCount > 0 && podRunning(p) && p.Status.ContainerStatuses[0].Ready, nil
		})
		if err != nil {
			t.Fatalf("pod did not run again after its sandbox was killed: %v", err)
		}
		expectNotFailed(t, ns, "app", 5*time.Second)
		if stats := claimStats(t, ns, "app"); stats.PrepareCalls != 1 {
			t.Errorf("driver called %d times, want 1: a new sandbox of a prepared claim needs no driver call", stats.PrepareCalls)
		}
	})

	t.Run("kubelet restarted, sandbox killed", func(t *testing.T) {
		restartKubelet(t.Context(), t, true)
		killSandbox(t, getPod(t, ns, "app"))
		stats := waitForCalls(t, driver, ns, "app", 2, time.Minute)
		if !stats.Permanent {
			t.Fatalf("driver did not answer Permanent: %+v", stats)
		}
		expectNotFailed(t, ns, "app", 10*time.Second)
		if forkKubelet {
			checkDowngradeReported(t, ns)
		}
		// The driver recovers: the pod runs again.
		if err := driver.Client.ClearBehavior(t.Context(), ns); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ns, "app", resyncWait+time.Minute, "Running again", func(p *v1.Pod) bool {
			return podRunning(p) && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready
		})
	})
	deleteAndCheckNoLeaks(t, ns, driver)
}

// checkDowngradeReported checks how the fork reports a permanent answer for
// the running pod "app" of ns that it did not act on: its downgrade
// counter and the Event's words. The series' kubelet retries such an
// answer as any failure, with today's Event.
func checkDowngradeReported(t *testing.T, ns string) {
	t.Helper()
	// The kubelet's record of prepared pods names the pod before the
	// runtime is asked (reason pod_prepared_before); either safety rule
	// will do.
	started := kubeletMetric(t, downgradesMetric, map[string]string{"driver_name": driver.Name(), "reason": failfastdra.DowngradePodStarted})
	prepared := kubeletMetric(t, downgradesMetric, map[string]string{"driver_name": driver.Name(), "reason": failfastdra.DowngradePreparedBefore})
	if started+prepared < 1 {
		t.Errorf("%s{reason=%s or %s} = %v, want >= 1", downgradesMetric, failfastdra.DowngradePodStarted, failfastdra.DowngradePreparedBefore, started+prepared)
	}
	events := eventsOf(t, ns, "app", "FailedPrepareDynamicResources")
	found := false
	for _, e := range events {
		if strings.Contains(e.Message, "will not retry") {
			t.Errorf("event of a downgraded failure says %q: %s", "will not retry", e.Message)
		}
		found = found || strings.Contains(e.Message, "not failing the pod, will retry")
	}
	if !found {
		t.Errorf("no event says the permanent answer was not acted on: %+v", events)
	}
}

// 1b. A pod that had a sandbox but whose container never started (its image
// is never pulled) is not failed by a permanent answer once the container
// runtime has forgotten it: its sandbox is removed through the runtime while
// the kubelet is down (as a runtime that drops sandboxes at a reboot, or an
// operator's crictl rmp, would), so neither the runtime nor the pod's API
// status shows that it ran. The fork's record of prepared pods does; so do,
// for the upstream-shaped series' kubelet, the claim's devices in the DRA
// checkpoint (recorded only after a successful prepare). The reverse, a pod
// that never had a sandbox, still fails fast after a kubelet restart:
// TestFaultTransientThenKubeletRestartThenPermanent.
func TestFaultSandboxLostPodNotFailed(t *testing.T) {
	ns := setup(t, nil)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: podSpecWith(v1.RestartPolicyAlways, "claim")}
	pod.Spec.Containers[0].Image = "dra-failfast.invalid/never-pulled:1" // PullNever: ErrImageNeverPull
	pod, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ns, "app", time.Minute, "its container waiting for an image", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImageNeverPull"
	})
	if err := driver.Client.SetBehavior(t.Context(), ns, testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "device fell off the bus"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = driver.Client.ClearBehavior(context.Background(), ns) })

	replaceKubeletAfter(t.Context(), t, cluster.KubeletPath(), map[string]bool{gate: true}, func(ctx context.Context) error {
		return removeSandboxes(ctx, pod.UID)
	})
	stats := waitForCalls(t, driver, ns, "app", 2, time.Minute)
	if !stats.Permanent {
		t.Fatalf("driver did not answer Permanent: %+v", stats)
	}
	expectNotFailed(t, ns, "app", 10*time.Second)
	// How the fork reports it; the series retries it as any failure, with
	// today's Event.
	if forkKubelet {
		// The restarted kubelet's counters started at 0.
		if n := kubeletMetric(t, downgradesMetric, map[string]string{"driver_name": driver.Name(), "reason": failfastdra.DowngradePreparedBefore}); n < 1 {
			t.Errorf("%s{reason=%s} = %v, want >= 1", downgradesMetric, failfastdra.DowngradePreparedBefore, n)
		}
		found := false
		for _, e := range eventsOf(t, ns, "app", "FailedPrepareDynamicResources") {
			found = found || strings.Contains(e.Message, "prepared for it before, so it may have had a sandbox: not failing the pod, will retry")
		}
		if !found {
			t.Errorf("no event says why the permanent answer was not acted on")
		}
	}
	deleteAndCheckNoLeaks(t, ns, driver)
}

// removeSandboxes stops and removes every sandbox of pod uid through the
// container runtime's CRI API, as crictl rmp does.
func removeSandboxes(ctx context.Context, uid types.UID) error {
	conn, err := grpc.NewClient("unix://"+cluster.ContainerdAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	runtime := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)},
	}})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("no sandbox of pod %s", uid)
	}
	for _, sandbox := range list.Items {
		if _, err := runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", sandbox.Id, err)
		}
		if _, err := runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", sandbox.Id, err)
		}
	}
	return nil
}

// killSandbox kills the pause process of the pod's sandbox, as a crash or an
// OOM kill would; the kubelet then creates a new sandbox.
func killSandbox(t *testing.T, pod *v1.Pod) {
	t.Helper()
	ctr := filepath.Join(cluster.BinDir(), "ctr")
	base := []string{"--address", cluster.ContainerdAddress(), "--namespace", "k8s.io"}
	filter := fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s,labels."io.cri-containerd.kind"==sandbox`, pod.UID)
	out, err := exec.CommandContext(t.Context(), ctr, append(base, "containers", "list", "--quiet", filter)...).Output()
	if err != nil {
		t.Fatalf("list sandboxes of pod %s: %v", pod.Name, err)
	}
	killed := 0
	for _, id := range strings.Fields(string(out)) {
		kill := exec.CommandContext(t.Context(), ctr, append(base, "tasks", "kill", "--signal", "SIGKILL", id)...)
		if out, err := kill.CombinedOutput(); err != nil {
			t.Logf("kill sandbox task %s: %v: %s", id, err, out) // an old, stopped sandbox
			continue
		}
		killed++
	}
	if killed == 0 {
		t.Fatalf("no running sandbox of pod %s found (%q)", pod.Name, out)
	}
	t.Logf("killed the sandbox of pod %s/%s", pod.Namespace, pod.Name)
}

// 2. A pod whose driver fails transiently, then the kubelet restarts, then
// the driver turns Permanent: the pod fails exactly once, and the driver is
// not asked to prepare it again.
func TestFaultTransientThenKubeletRestartThenPermanent(t *testing.T) {
	ns := setup(t, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Message: "device busy"}))
	createPod(t, ns, "app")
	waitForCalls(t, driver, ns, "app", 1, time.Minute)
	restartKubelet(t.Context(), t, true)
	if err := driver.Client.SetBehavior(t.Context(), ns, testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "device found broken"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = driver.Client.ClearBehavior(context.Background(), ns) })
	pod := waitFor(t, ns, "app", resyncWait+30*time.Second, "Failed", podFailed)
	checkFailedPod(t, pod, "device found broken")
	atFailure := claimStats(t, ns, "app")
	time.Sleep(resyncWait)
	stats := claimStats(t, ns, "app")
	if stats.PrepareCalls != atFailure.PrepareCalls || stats.UnprepareCalls != 1 {
		t.Errorf("driver stats %+v after the failure (at it: %d prepare calls), want no more prepare calls and 1 unprepare", stats, atFailure.PrepareCalls)
	}
	if events := eventsOf(t, ns, "app", failfastdra.PodFailedReason); len(events) != 1 || events[0].Count > 1 {
		t.Errorf("%d %s events (%+v), want exactly one", len(events), failfastdra.PodFailedReason, events)
	}
	deleteAndCheckNoLeaks(t, ns, driver)
}

// 3. A pod failed permanently stays Failed across a kubelet restart, and the
// driver is never called again for it.
func TestFaultFailedPodStaysFailedAcrossKubeletRestart(t *testing.T) {
	ns := setup(t, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "invalid partition layout"}))
	createPod(t, ns, "app")
	waitFor(t, ns, "app", time.Minute, "Failed", podFailed)
	waitForUnprepared(t, driver, ns, "app")
	restartKubelet(t.Context(), t, true)
	time.Sleep(resyncWait)
	pod := getPod(t, ns, "app")
	if !failedForDRA(pod) {
		t.Fatalf("pod after the kubelet restart: %+v", pod.Status)
	}
	checkFailedPod(t, pod, "invalid partition layout")
	if stats := claimStats(t, ns, "app"); stats.PrepareCalls != 1 || stats.UnprepareCalls != 1 {
		t.Errorf("driver stats %+v, want 1 prepare and 1 unprepare call in all", stats)
	}
	deleteAndCheckNoLeaks(t, ns, driver)
}

// waitForUnprepared waits until the driver saw an unprepare call for the
// claim of pod ns/pod.
func waitForUnprepared(t *testing.T, d *e2eframework.Driver, ns, pod string) testdriver.ClaimStats {
	t.Helper()
	var stats testdriver.ClaimStats
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, stats = statsOf(t, d, ns, pod, "")
		return stats.UnprepareCalls > 0, nil
	}); err != nil {
		t.Fatalf("no unprepare call for pod %s/%s: %+v", ns, pod, stats)
	}
	return stats
}

// 8. The fork and the stock kubelet replace each other on a node with a
// prepared claim: the pod keeps running, both read the DRA checkpoint, and
// deleting the pod unprepares its claim once.
func TestFaultSwapKubelets(t *testing.T) {
	ns := setup(t, nil)
	createPodWith(t, ns, "app", v1.RestartPolicyAlways, "claim")
	before := waitFor(t, ns, "app", time.Minute, "Running", podRunning)
	uid, _ := statsOf(t, driver, ns, "app", "")
	fork := cluster.KubeletPath()
	stock := filepath.Join(filepath.Dir(fork), "kubelet-stock")
	t.Cleanup(func() {
		if cluster.KubeletPath() != fork {
			replaceKubelet(context.Background(), t, fork, map[string]bool{gate: true})
		}
	})
	for _, step := range []struct {
		binary string
		gates  map[string]bool
	}{{stock, nil}, {fork, map[string]bool{gate: true}}} {
		replaceKubelet(t.Context(), t, step.binary, step.gates)
		checkpoint, err := os.ReadFile(filepath.Join(cluster.KubeletRootDir(), "dra_manager_state"))
		if err != nil || !strings.Contains(string(checkpoint), uid) {
			t.Errorf("DRA checkpoint under %s does not hold claim %s: %v", filepath.Base(step.binary), uid, err)
		}
		pod := expectNotFailed(t, ns, "app", 5*time.Second)
		if !podRunning(pod) || pod.Status.ContainerStatuses[0].RestartCount != 0 ||
			pod.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("pod disturbed under %s: %+v", filepath.Base(step.binary), pod.Status)
		}
	}
	deleteAndCheckNoLeaks(t, ns, driver)
	stats := claimStats(t, ns, "app")
	if stats.PrepareCalls != 1 || stats.UnprepareCalls != 1 {
		t.Errorf("driver stats %+v, want 1 prepare and 1 unprepare call", stats)
	}
}

// 4. A driver that is killed, loses its socket or unregisters while the
// kubelet retries a pod: never a permanent failure; the pod runs once the
// driver is back.
func TestFaultDriverGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		breakIt func(*e2eframework.Driver) error
	}{
		{"killed", (*e2eframework.Driver).Kill}, // sockets stay behind
		{"socket-gone", func(d *e2eframework.Driver) error {
			if err := d.Kill(); err != nil {
				return err
			}
			return os.Remove(d.DRASocketPath())
		}},
		{"unregistered", (*e2eframework.Driver).Stop}, // SIGTERM: removes its sockets
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a driver of its own
			gone := startDriver(t, e2eframework.DriverOptions{DriverName: tc.name + ".dra-failfast.test", Devices: 2})
			ns := namespaceFor(t)
			createTemplate(t, ns, "claim", gone, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "device warming up"}))
			createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
			waitForCalls(t, gone, ns, "app", 1, time.Minute)
			if err := tc.breakIt(gone); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			// The kubelet retries at least once against the missing driver.
			expectNotFailed(t, ns, "app", resyncWait)
			if err := gone.Start(t.Context(), cluster); err != nil {
				t.Fatalf("driver back: %v", err)
			}
			pod := waitFor(t, ns, "app", resyncWait+time.Minute, "Running or Failed", func(p *v1.Pod) bool { return podRunning(p) || podFailed(p) })
			if !podRunning(pod) {
				t.Fatalf("pod wrongly failed: %s: %s", pod.Status.Reason, pod.Status.Message)
			}
			deleteAndCheckNoLeaks(t, ns, gone)
		})
	}
}

// 5. Unprepare fails after a permanent prepare failure: the claim stays
// reserved and unprepare is retried; the pod shows Failed, with its
// condition and container states, only after unprepare succeeded (the
// series' kubelet holds back the phase alone, as upstream does for every pod
// that may still need to unprepare claims).
func TestFaultUnprepareFails(t *testing.T) {
	t.Parallel()
	ns := setup(t, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "bad config", UnprepareFailures: ptr.To[int64](2)}))
	createPod(t, ns, "app")
	sawReserved := false
	var pod *v1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod = getPod(t, ns, "app")
		if podFailed(pod) {
			return true, nil
		}
		// The fork holds back the condition and the containers' states
		// until the phase is terminal; the series' kubelet the phase alone.
		for _, c := range pod.Status.Conditions {
			if forkKubelet && c.Type == failfastdra.PodConditionType {
				return false, fmt.Errorf("condition %s published while the phase is %s", c.Type, pod.Status.Phase)
			}
		}
		for _, c := range pod.Status.ContainerStatuses {
			marked := c.State.Waiting != nil && c.State.Waiting.Reason == failfastdra.PodFailedReason
			if forkKubelet && (c.State.Terminated != nil || marked) {
				return false, fmt.Errorf("container %s in state %+v while the phase is %s", c.Name, c.State, pod.Status.Phase)
			}
		}
		if _, stats := statsOf(t, driver, ns, "app", ""); stats.LastUnprepareError != "" && !sawReserved {
			claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			if err == nil && len(claims.Items) == 1 && len(claims.Items[0].Status.ReservedFor) == 1 {
				sawReserved = true
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v; status %+v", ns, "app", err, pod.Status)
	}
	if !sawReserved {
		t.Error("never saw the claim reserved for the pod while unprepare failed")
	}
	checkFailedPod(t, pod, "bad config")
	stats := claimStats(t, ns, "app")
	if stats.UnprepareCalls != 3 || stats.Prepared || stats.LastUnprepareError != "" {
		t.Errorf("driver stats %+v, want 3 unprepare calls (2 failed), the last one successful", stats)
	}
	deleteAndCheckNoLeaks(t, ns, driver)
}

// 6. Two drivers, one claim each. Also: unprepare served by another
// instance of the driver than the one that prepared.
func TestFaultTwoDrivers(t *testing.T) {
	t.Parallel()
	one := startDriver(t, e2eframework.DriverOptions{DriverName: "one.dra-failfast.test", Devices: 4})
	two := startDriver(t, e2eframework.DriverOptions{DriverName: "two.dra-failfast.test", Devices: 4})
	permanent := func(msg string) []byte {
		return behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: msg})
	}

	t.Run("one permanent, one prepared", func(t *testing.T) {
		ns := namespaceFor(t)
		createTemplate(t, ns, "one", one, permanent("one is broken"))
		createTemplate(t, ns, "two", two, nil)
		createPodWith(t, ns, "app", v1.RestartPolicyNever, "one", "two")
		pod := waitFor(t, ns, "app", time.Minute, "Failed", podFailed)
		checkFailedPod(t, pod, "app-one-", "one is broken")
		checkForkMessage(t, pod, ns+"/app-one-", "driver "+one.Name()+" failed permanently")
		if strings.Contains(pod.Status.Message, two.Name()) {
			t.Errorf("message names the driver that succeeded: %s", pod.Status.Message)
		}
		_, twoStats := statsOf(t, two, ns, "app", "two")
		switch {
		case twoStats.Prepared:
			t.Errorf("driver %s: %+v, want its claim unprepared", two.Name(), twoStats)
		case twoStats.PrepareCalls == 1 && twoStats.UnprepareCalls < 1:
			t.Errorf("driver %s: %+v, want its prepared claim unprepared", two.Name(), twoStats)
		case twoStats.PrepareCalls > 1 || (twoStats.PrepareCalls == 0 && forkKubelet):
			// The fork asks every driver before it decides; upstream's
			// kubelet, and so the series', ends the attempt at the first
			// failure, so two may not have been asked at all.
			t.Errorf("driver %s: %+v, want its claim prepared once", two.Name(), twoStats)
		}
		deleteAndCheckNoLeaks(t, ns, one, two)
	})

	t.Run("both permanent", func(t *testing.T) {
		ns := namespaceFor(t)
		createTemplate(t, ns, "one", one, permanent("one is broken"))
		createTemplate(t, ns, "two", two, permanent("two is broken"))
		for _, name := range []string{"first", "second"} {
			createPodWith(t, ns, name, v1.RestartPolicyNever, "one", "two")
		}
		for _, name := range []string{"first", "second"} {
			pod := waitFor(t, ns, name, time.Minute, "Failed", podFailed)
			if !forkKubelet {
				// The first failure ends upstream's attempt: the message
				// holds whichever driver was asked first.
				checkFailedPod(t, pod)
				if !strings.Contains(pod.Status.Message, "one is broken") && !strings.Contains(pod.Status.Message, "two is broken") {
					t.Errorf("pod %s: message names neither driver's failure: %s", name, pod.Status.Message)
				}
				continue
			}
			checkFailedPod(t, pod, "one is broken", "two is broken")
			checkForkMessage(t, pod, "driver "+one.Name()+" failed permanently", "driver "+two.Name()+" failed permanently")
			// Stable order whatever order the drivers were called in: by claim.
			if i, j := strings.Index(pod.Status.Message, ns+"/"+name+"-one-"), strings.Index(pod.Status.Message, ns+"/"+name+"-two-"); i < 0 || j < i {
				t.Errorf("pod %s: claims not named in order: %s", name, pod.Status.Message)
			}
		}
		deleteAndCheckNoLeaks(t, ns, one, two)
	})

	t.Run("unprepare by another driver instance", func(t *testing.T) {
		ns := namespaceFor(t)
		createTemplate(t, ns, "one", one, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "bad", UnprepareFailures: ptr.To[int64](1000)}))
		createPodWith(t, ns, "app", v1.RestartPolicyNever, "one")
		waitForUnprepared(t, one, ns, "app")
		expectNotFailed(t, ns, "app", 2*time.Second)
		// A new instance does not know the claim: it unprepares it.
		if err := one.Restart(t.Context(), cluster); err != nil {
			t.Fatal(err)
		}
		pod := waitFor(t, ns, "app", resyncWait+time.Minute, "Failed", podFailed)
		checkFailedPod(t, pod, ": bad")
		checkForkMessage(t, pod, "driver "+one.Name()+" failed permanently")
		_, stats := statsOf(t, one, ns, "app", "")
		if stats.PrepareCalls != 0 || stats.UnprepareCalls < 1 || stats.LastUnprepareError != "" {
			t.Errorf("new driver instance: %+v, want only a successful unprepare", stats)
		}
		deleteAndCheckNoLeaks(t, ns, one)
	})
}

// 7. KEP-5322 test plan, "no leaks with many failing pods": 150 pods created
// at once, a third failing permanently, a third transiently then
// succeeding, a third healthy. Not parallel: 100 sandboxes at once keep a
// 2-core node's runtime busy for a minute or more (a sandbox of another test
// took 60s to create), and the parallel tests' timed checks would measure
// that load, not the kubelet.
func TestFaultManyPods(t *testing.T) {
	const perKind = 50
	bulk := startDriver(t, e2eframework.DriverOptions{DriverName: "bulk.dra-failfast.test", Devices: 3*perKind + 10})
	ns := namespaceFor(t)
	createTemplate(t, ns, "permanent", bulk, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "invalid config"}))
	createTemplate(t, ns, "transient", bulk, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "busy"}))
	createTemplate(t, ns, "healthy", bulk, nil)
	start := time.Now()
	var wg sync.WaitGroup
	for _, kind := range []string{"permanent", "transient", "healthy"} {
		for i := range perKind {
			wg.Go(func() { createPodWith(t, ns, fmt.Sprintf("%s-%02d", kind, i), v1.RestartPolicyNever, kind) })
		}
	}
	wg.Wait()
	var failed, running, wrong int
	var wrongPods []string
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 8*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		failed, running, wrong, wrongPods = 0, 0, 0, nil
		for _, p := range pods.Items {
			permanent := strings.HasPrefix(p.Name, "permanent-")
			switch {
			case failedForDRA(&p) && permanent:
				failed++
			case podRunning(&p) && !permanent:
				running++
			case podFailed(&p) || (podRunning(&p) && permanent):
				wrong++
				wrongPods = append(wrongPods, p.Name+": "+string(p.Status.Phase)+" "+p.Status.Message)
			}
		}
		return wrong > 0 || failed+running == 3*perKind, nil
	})
	t.Logf("%d pods: %d Failed permanently, %d Running, %d wrong after %.0fs", 3*perKind, failed, running, wrong, time.Since(start).Seconds())
	if wrong > 0 {
		t.Fatalf("pods in the wrong state: %v", wrongPods)
	}
	if err != nil {
		t.Fatalf("not all pods settled: %v", err)
	}
	stats, err := bulk.Client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range stats.Claims {
		if strings.HasPrefix(claim.Name, "permanent-") && claim.PrepareCalls != 1 {
			t.Errorf("claim %s: %d prepare calls, want 1", claim.Name, claim.PrepareCalls)
		}
	}
	deleteAndCheckNoLeaks(t, ns, bulk)
}

// 9. Hostile answers through the real kubelet: only the exact Permanent
// encoding fails a pod; nothing else does; nothing crashes; texts stay bounded.
func TestFaultHostileAnswers(t *testing.T) {
	t.Parallel()
	hostile := startDriver(t, e2eframework.DriverOptions{DriverName: "hostile.dra-failfast.test", Devices: 32})
	raw := func(b ...byte) string { return base64.StdEncoding.EncodeToString(b) }
	permanent := func(wire *testdriver.WireSpec) testdriver.BehaviorSpec {
		return testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "hostile answer", Wire: wire}
	}
	const field3Varint, field3Bytes = 0x18, 0x1a // tags of field 3 with wire types varint and bytes
	cases := map[string]struct {
		spec       testdriver.BehaviorSpec
		wantFailed bool
	}{
		"exact Permanent":                     {spec: permanent(nil), wantFailed: true},
		"exact encoding on an unmarked error": {spec: testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Message: "x", Wire: &testdriver.WireSpec{ErrorType: ptr.To[int64](1)}}, wantFailed: true},
		"oversized message with control characters": {
			spec:       testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "\x1b[31minvalid\n\tconfig\u202e ", MessageRepeat: 20000},
			wantFailed: true,
		},
		"oversized transient message": {spec: testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Message: "\x1b[0mbusy\r\n", MessageRepeat: 20000}},
		"Unknown sent explicitly":     {spec: permanent(&testdriver.WireSpec{ErrorType: ptr.To[int64](0)})},
		"unknown value 2":             {spec: permanent(&testdriver.WireSpec{ErrorType: ptr.To[int64](2)})},
		"negative value":              {spec: permanent(&testdriver.WireSpec{ErrorType: ptr.To[int64](-1)})},
		"out of int32 range":          {spec: permanent(&testdriver.WireSpec{ErrorType: ptr.To[int64](1 << 33)})},
		"field absent":                {spec: permanent(&testdriver.WireSpec{ErrorTypeAbsent: true})},
		// Field 3 as protobuf reads it (the series' kubelet reads it the same):
		// the last occurrence wins.
		"twice, the last one Permanent":        {spec: permanent(&testdriver.WireSpec{RawFields: raw(field3Varint, 1)}), wantFailed: true},
		"twice, the last one Unknown":          {spec: permanent(&testdriver.WireSpec{RawFields: raw(field3Varint, 0)})},
		"wrong wire type":                      {spec: permanent(&testdriver.WireSpec{ErrorTypeAbsent: true, RawFields: raw(field3Bytes, 1, 1)})},
		"truncated varint":                     {spec: permanent(&testdriver.WireSpec{ErrorTypeAbsent: true, RawFields: raw(field3Varint, 0x80)})},
		"garbage bytes":                        {spec: permanent(&testdriver.WireSpec{RawFields: raw(0xff, 0xff, 0xff)})},
		"result for a claim that was not sent": {spec: permanent(&testdriver.WireSpec{ExtraClaimUID: "00000000-0000-0000-0000-000000000000"})},
		"claim omitted":                        {spec: permanent(&testdriver.WireSpec{OmitClaim: true})},
	}
	for _, code := range []string{"Unavailable", "Internal", "InvalidArgument", "FailedPrecondition", "ResourceExhausted", "Unknown"} {
		cases["gRPC "+code] = struct {
			spec       testdriver.BehaviorSpec
			wantFailed bool
		}{spec: permanent(&testdriver.WireSpec{GRPCCode: code})}
	}
	t.Run("table", func(t *testing.T) {
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ns := namespaceFor(t)
				createTemplate(t, ns, "claim", hostile, behavior(tc.spec))
				createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
				waitForCalls(t, hostile, ns, "app", 1, 2*time.Minute)
				if tc.wantFailed {
					checkFailedPod(t, waitFor(t, ns, "app", 30*time.Second, "Failed", podFailed))
				} else {
					expectNotFailed(t, ns, "app", 10*time.Second)
					for _, e := range eventsOf(t, ns, "app", "FailedPrepareDynamicResources") {
						t.Logf("event: %.200s", e.Message)
					}
				}
				deleteAndCheckNoLeaks(t, ns, hostile)
			})
		}
	})
	if err := kubeletHealthy(t.Context()); err != nil {
		t.Errorf("kubelet after the hostile answers: %v", err)
	}
}

// kubeletHealthy asks the kubelet's healthz endpoint.
func kubeletHealthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(localcluster.KubeletHealthzPort)+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}

// 10. A driver that serves only the v1beta1 DRA gRPC API cannot deliver
// the Permanent mark (the conversion drops unknown fields): the pod is
// retried as with a stock kubelet.
func TestFaultV1beta1Driver(t *testing.T) {
	t.Parallel()
	old := startDriver(t, e2eframework.DriverOptions{DriverName: "v1beta1.dra-failfast.test", Devices: 2, GRPCAPI: testdriver.GRPCAPIV1beta1})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", old, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "invalid config"}))
	createPodWith(t, ns, "app", v1.RestartPolicyNever, "claim")
	waitForCalls(t, old, ns, "app", 1, time.Minute)
	stats := waitForCalls(t, old, ns, "app", 2, resyncWait)
	if !stats.Permanent {
		t.Errorf("driver did not mark its error permanent: %+v", stats)
	}
	if pod := getPod(t, ns, "app"); pod.Status.Phase != v1.PodPending {
		t.Errorf("pod of a v1beta1 driver left Pending: %+v", pod.Status)
	}
	deleteAndCheckNoLeaks(t, ns, old)
}
