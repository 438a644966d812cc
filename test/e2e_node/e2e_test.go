//go:build e2e_node

// Package e2enode runs dra-failfast end to end on a real local single-node
// cluster (test/localcluster) with the patched kubelet and the test DRA
// driver. It needs root and the binaries of `make build`:
//
//	go test -tags e2e_node -v -timeout 30m ./test/e2e_node/
package e2enode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
	"github.com/dra-failfast/dra-failfast/test/dradriver"
	"github.com/dra-failfast/dra-failfast/test/e2e_node/framework"
	"github.com/dra-failfast/dra-failfast/test/localcluster"
)

const gate = string(failfastdra.DRAHandlePermanentDriverFailures)

var (
	cluster *localcluster.Cluster
	driver  *framework.Driver
	client  kubernetes.Interface
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
	var err error
	cluster, err = localcluster.Up(ctx, localcluster.Config{KubeletFeatureGates: map[string]bool{gate: true}})
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
	if driver, err = framework.StartDriver(ctx, cluster, framework.DriverOptions{TaintBroken: true}); err != nil {
		fmt.Fprintf(os.Stderr, "test driver: %v\n", err)
		return 1
	}
	defer func() { _ = driver.Stop() }()
	if err := framework.EnsureDeviceClass(ctx, client); err != nil {
		fmt.Fprintf(os.Stderr, "device class: %v\n", err)
		return 1
	}
	return m.Run()
}

// setup makes a namespace and a claim template with behavior in it.
func setup(t *testing.T, behavior *framework.Behavior) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if err := framework.CreateNamespace(t.Context(), client, ns); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	tmpl, err := framework.ClaimTemplate(ns, "claim", behavior)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("claim template: %v", err)
	}
	return ns
}

func createPod(t *testing.T, ns, name string) {
	t.Helper()
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), framework.Pod(ns, name, "claim"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
}

// claimStats returns the driver's counters for the claim of pod ns/pod.
func claimStats(t *testing.T, ns, pod string) dradriver.ClaimStats {
	t.Helper()
	stats, err := driver.Client.Stats(t.Context())
	if err != nil {
		t.Fatalf("driver stats: %v", err)
	}
	claim, _ := framework.PodClaim(stats, ns, pod)
	return claim
}

func podFailed(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed }

// (a) A permanent driver error fails the pod, the driver is asked once, the
// claim is unprepared, and no container ever starts.
func TestPermanentFailureFailsPod(t *testing.T) {
	for name, behavior := range map[string]*framework.Behavior{
		"invalid-config": {Raw: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`},
		"injected":       {Prepare: "Permanent", Message: "device firmware refuses this partition layout"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits past a stock resync; own namespace and claim
			ns := setup(t, behavior)
			start := time.Now()
			createPod(t, ns, "app")
			pod, err := framework.WaitForPod(t.Context(), client, ns, "app", 90*time.Second, podFailed)
			if err != nil {
				t.Fatalf("pod did not fail: %v; status %+v", err, pod.Status)
			}
			t.Logf("pod Failed %.1fs after creation; message: %s", time.Since(start).Seconds(), pod.Status.Message)
			if pod.Status.Reason != failfastdra.PodFailedReason {
				t.Errorf("reason = %q, want %q", pod.Status.Reason, failfastdra.PodFailedReason)
			}
			for _, want := range []string{ns + "/app-", dradriver.DefaultDriverName, "failed permanently"} {
				if !strings.Contains(pod.Status.Message, want) {
					t.Errorf("message %q does not contain %q", pod.Status.Message, want)
				}
			}
			conditionFound := false
			for _, c := range pod.Status.Conditions {
				if c.Type == failfastdra.PodConditionType && c.Status == v1.ConditionTrue {
					conditionFound = true
				}
			}
			if !conditionFound {
				t.Errorf("no %s=True condition in %+v", failfastdra.PodConditionType, pod.Status.Conditions)
			}
			if started := framework.StartedContainers(pod); len(started) > 0 {
				t.Errorf("containers started: %v", started)
			}
			for _, c := range pod.Status.ContainerStatuses {
				if c.State.Terminated == nil || c.State.Terminated.Reason != failfastdra.PodFailedReason {
					t.Errorf("container %s state %+v, want terminated with reason %s (what kubectl get pod shows)", c.Name, c.State, failfastdra.PodFailedReason)
				}
			}
			// A stock kubelet retries at its next pod resync: wait past one
			// (syncFrequency 1m, jitter up to 1.5x) and count again.
			time.Sleep(95 * time.Second)
			stats := claimStats(t, ns, "app")
			if stats.PrepareCalls != 1 || stats.UnprepareCalls != 1 {
				t.Errorf("driver saw %d prepare and %d unprepare calls, want 1 and 1", stats.PrepareCalls, stats.UnprepareCalls)
			}
			if !stats.Permanent {
				t.Errorf("driver did not report a permanent error: %+v", stats)
			}
			pod, err = client.CoreV1().Pods(ns).Get(t.Context(), "app", metav1.GetOptions{})
			if err != nil || pod.Status.Phase != v1.PodFailed || len(framework.StartedContainers(pod)) > 0 {
				t.Errorf("pod changed after failing: %v %+v", err, pod.Status)
			}
			events, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=app,reason=" + failfastdra.PodFailedReason})
			if err != nil || len(events.Items) == 0 {
				t.Logf("no %s event found (events are best effort): %v", failfastdra.PodFailedReason, err)
			}
		})
	}
}

// (b) A transient failure keeps the pod pending, then it runs once the
// driver stops failing.
func TestTransientFailureThenRuns(t *testing.T) {
	// The kubelet retries a failed prepare at its next pod resync (syncFrequency, 1m by default).
	ns := setup(t, &framework.Behavior{Prepare: "Transient", Failures: 1, Message: "device busy"})
	createPod(t, ns, "app")
	pod, err := framework.WaitForPod(t.Context(), client, ns, "app", 3*time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning || p.Status.Phase == v1.PodFailed
	})
	if err != nil || pod.Status.Phase != v1.PodRunning {
		t.Fatalf("pod did not run: %v; status %+v", err, pod.Status)
	}
	stats := claimStats(t, ns, "app")
	if stats.PrepareCalls != 2 || !stats.Prepared {
		t.Errorf("driver stats %+v, want 2 prepare calls and prepared", stats)
	}
}

// A Job whose podFailurePolicy matches the DRA condition fails at the first
// permanently failing pod instead of burning its backoffLimit.
func TestJobPodFailurePolicyFailsFast(t *testing.T) {
	ns := setup(t, &framework.Behavior{Prepare: "Permanent", Message: "invalid partition layout"})
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](6),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionFailJob,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: failfastdra.PodConditionType, Status: v1.ConditionTrue}},
			}}},
			Template: v1.PodTemplateSpec{Spec: framework.PodSpec("claim", v1.RestartPolicyNever)},
		},
	}
	start := time.Now()
	if _, err := client.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	var reason string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == v1.ConditionTrue {
				reason = c.Reason
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("job did not fail: %v", err)
	}
	t.Logf("job Failed (%s) %.1fs after creation", reason, time.Since(start).Seconds())
	if reason != batchv1.JobReasonPodFailurePolicy {
		t.Errorf("job failed with reason %q, want %q", reason, batchv1.JobReasonPodFailurePolicy)
	}
	pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Errorf("job created %d pods (%v), want 1: the policy must stop it at the first failure", len(pods.Items), err)
	}
}

// A Deployment recovers from a broken device: the driver taints it and fails
// the pod permanently, the replacement gets another device and runs.
func TestDeploymentRecoversFromBrokenDevice(t *testing.T) {
	ns := setup(t, nil)
	// Break every device but the last, so that whatever the scheduler picks
	// first is broken until the healthy one is left.
	const devices = 8
	for i := range devices - 1 {
		device := fmt.Sprintf("dev-%d", i)
		if err := driver.Client.SetBroken(t.Context(), device, true); err != nil {
			t.Fatalf("break %s: %v", device, err)
		}
		t.Cleanup(func() { _ = driver.Client.SetBroken(context.Background(), device, false) })
	}
	labels := map[string]string{"app": "recover"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "recover"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: framework.PodSpec("claim", v1.RestartPolicyAlways)},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(t.Context(), deployment, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	var failed, running int
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		failed, running = 0, 0
		for _, p := range pods.Items {
			switch {
			case p.Status.Phase == v1.PodFailed && p.Status.Reason == failfastdra.PodFailedReason:
				failed++
			case p.Status.Phase == v1.PodRunning:
				running++
			}
		}
		return running == 1, nil
	})
	if err != nil {
		t.Fatalf("deployment did not recover: %d pods failed permanently, %d running: %v", failed, running, err)
	}
	t.Logf("deployment running after %d permanently failed pod(s)", failed)
	if failed == 0 {
		t.Error("no pod failed: the first pod got the healthy device, the recovery path was not exercised")
	}
}

// restartKubelet restarts the kubelet with the gate set to enabled.
func restartKubelet(ctx context.Context, t *testing.T, enabled bool) {
	t.Helper()
	start := time.Now()
	if err := driver.RestartKubelet(ctx, cluster, map[string]bool{gate: enabled}); err != nil {
		t.Fatalf("restart kubelet with %s=%t: %v", gate, enabled, err)
	}
	t.Logf("kubelet restarted with %s=%t, devices published again %.1fs after the restart began", gate, enabled, time.Since(start).Seconds())
}

// (c) With the feature gate off, a permanent answer is retried as in stock
// and the pod stays Pending. Runs last: it restarts the kubelet.
func TestZZGateOffRetries(t *testing.T) {
	ctx := t.Context()
	restartKubelet(ctx, t, false)
	t.Cleanup(func() { restartKubelet(context.Background(), t, true) })
	ns := setup(t, &framework.Behavior{Prepare: "Permanent", Message: "never works"})
	created := time.Now()
	createPod(t, ns, "app")
	// The retry comes at the kubelet's next pod resync after the first
	// call (syncFrequency 1m, jitter up to 1.5x), so time it from that
	// call, not from pod creation: the first call itself may come late
	// while the restarted kubelet re-registers the driver.
	var first time.Time
	var stats dradriver.ClaimStats
	for {
		pod, err := client.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err == nil && pod.Status.Phase != v1.PodPending {
			t.Fatalf("pod left Pending with the gate off: %+v", pod.Status)
		}
		stats = claimStats(t, ns, "app")
		if first.IsZero() && stats.PrepareCalls > 0 {
			first = time.Now()
			t.Logf("first prepare call %.1fs after pod creation", first.Sub(created).Seconds())
		}
		if stats.PrepareCalls >= 2 {
			t.Logf("prepare retried %.0fs after the first call", time.Since(first).Seconds())
			break
		}
		if first.IsZero() && time.Since(created) > 90*time.Second {
			t.Fatalf("no prepare call within 90s of pod creation: %+v", stats)
		}
		if !first.IsZero() && time.Since(first) > 100*time.Second {
			t.Fatalf("prepare not retried within 100s of the first call: %+v", stats)
		}
		time.Sleep(time.Second)
	}
	if stats.UnprepareCalls != 0 {
		t.Errorf("driver stats %+v, want no unprepare while the pod is retried", stats)
	}
}
