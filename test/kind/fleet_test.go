// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// gateFlag is the flag kubeadm writes for the fork's nodes (kubeletExtraArgs in deploy/kind) into
// the node's kubeadm-flags.env, the file an operator edits when rolling the fork onto a node.
var gateFlag = "--feature-gates=" + string(failfastdra.DRAHandlePermanentDriverFailures) + "=true"

const (
	kubeadmFlagsFile = "/var/lib/kubelet/kubeadm-flags.env"
	// clusterName: deploy/kind's clusters.
	clusterName = "dra-failfast"
	// deploy/helm/gpu-driver/templates/webhook.yaml and deploy/test-driver/kubelet-plugin.yaml.
	gpuWebhook          = "gpu-driver-webhook"
	gpuWebhookLabel     = "app.kubernetes.io/name=gpu-driver,app.kubernetes.io/component=webhook"
	testDriverNamespace = "dra-test-driver"
	testDriverDaemonSet = "dra-test-driver-kubelet-plugin"
)

// dockerExec runs a shell command on node.
func dockerExec(ctx context.Context, t *testing.T, node, command string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "exec", node, "sh", "-c", command).CombinedOutput()
	if err != nil {
		t.Fatalf("on %s: %s: %v: %s", node, command, err, out)
	}
	return string(out)
}

// restartKubelet restarts w's kubelet through systemd, as an operator would, after swap (if not
// nil) changed the node, and waits until the node is Ready with a kubelet of the wanted kind and
// the test driver has published its devices again. The new slices also prove that the new kubelet
// runs: a starting kubelet deletes its node's ResourceSlices (see e2eframework.RestartKubelet).
func restartKubelet(t *testing.T, client kubernetes.Interface, w worker, wantFork bool, swap func()) {
	t.Helper()
	ctx := t.Context()
	old, devices, err := e2eframework.NodeSlices(ctx, client, testdriver.DefaultDriverName, w.name)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if swap != nil {
		swap()
	}
	dockerExec(ctx, t, w.name, "systemctl restart kubelet")
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, w.name, metav1.GetOptions{})
		if err != nil || isForkKubelet(node.Status.NodeInfo.KubeletVersion) != wantFork {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				// The API keeps whole seconds: a heartbeat in start's second is not "after" start.
				return c.Status == v1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(start.Truncate(time.Second)), nil
			}
		}
		return false, nil
	})
	if err != nil {
		node, _ := client.CoreV1().Nodes().Get(context.WithoutCancel(ctx), w.name, metav1.GetOptions{})
		out, _ := exec.Command("docker", "exec", w.name, "sh", "-c", "systemctl status kubelet --no-pager | head -5; journalctl -u kubelet --no-pager -o cat | tail -20").CombinedOutput()
		t.Fatalf("%s: not Ready with the %s kubelet after the restart: %v\nnode's kubelet %q, conditions %+v\n%s", w.name, kubeletKind(wantFork), err, node.Status.NodeInfo.KubeletVersion, node.Status.Conditions, out)
	}
	if err := e2eframework.WaitForNewSlices(ctx, client, w.driver, testdriver.DefaultDriverName, w.name, devices, old, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s kubelet restarted by systemd, Ready and devices published again in %.1fs", w.name, kubeletKind(wantFork), time.Since(start).Seconds())
}

func kubeletKind(fork bool) string {
	if fork {
		return "fork"
	}
	return "stock"
}

// installKubelet puts the fork's or the stock kubelet binary (make kubelet, make kubelet-stock) on
// w with the gate flag on or off, the way an operator rolls a node: a new binary renamed over the
// running one, the flag in kubeadm-flags.env.
func installKubelet(t *testing.T, w worker, fork bool) func() {
	return func() {
		t.Helper()
		ctx := t.Context()
		name := "kubelet-stock"
		if fork {
			name = "kubelet"
		}
		binary, err := localcluster.OutputPath("bin", name)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, "docker", "cp", binary, w.name+":/usr/bin/kubelet.new").CombinedOutput(); err != nil {
			t.Fatalf("copying %s to %s: %v: %s", binary, w.name, err, out)
		}
		dockerExec(ctx, t, w.name, "mv /usr/bin/kubelet.new /usr/bin/kubelet")
		dockerExec(ctx, t, w.name, "sed -i 's/ *"+gateFlag+"//' "+kubeadmFlagsFile)
		if fork {
			dockerExec(ctx, t, w.name, `sed -i 's/^KUBELET_KUBEADM_ARGS="/&`+gateFlag+` /' `+kubeadmFlagsFile)
		}
		if got := dockerExec(ctx, t, w.name, "cat "+kubeadmFlagsFile); strings.Contains(got, gateFlag) != fork {
			t.Fatalf("%s on %s: %q", kubeadmFlagsFile, w.name, got)
		}
	}
}

// runningContainer waits until pod namespace/name is Running and ready and returns the ID and
// restart count of its container.
func runningContainer(t *testing.T, client kubernetes.Interface, namespace, name string) (string, int32) {
	t.Helper()
	pod, err := e2eframework.WaitForPod(t.Context(), client, namespace, name, 2*time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	})
	if err != nil {
		t.Fatalf("pod %s not Running and ready: %v", name, err)
	}
	return pod.Status.ContainerStatuses[0].ContainerID, pod.Status.ContainerStatuses[0].RestartCount
}

// Mixed fleet, Jobs: the same Job, with a podFailurePolicy that fails it on the DRA failure's
// condition, fails at its first pod on the fork's worker and stays active on the stock worker.
func TestMixedFleetJob(t *testing.T) {
	t.Parallel()
	client, workers := connect(t)
	ctx := t.Context()
	namespace := newNamespace(t, client, "kind-job", map[string][]byte{
		"permanent": testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind fleet: invalid partition layout"}.Parameters(),
	})
	for _, w := range workers {
		job := e2eframework.ConditionJob(namespace, "job-"+w.name, "permanent")
		job.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": w.name}
		if _, err := client.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var wantFailed []string
	for _, w := range workers {
		job := "job-" + w.name
		selector := metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job}
		if w.fork {
			start := time.Now()
			reason := e2eframework.JobFailedReason(ctx, client, namespace, job, time.Minute)
			if reason != batchv1.JobReasonPodFailurePolicy {
				t.Errorf("Job %s on %s: Failed condition reason %q, want %q within a minute", job, w, reason, batchv1.JobReasonPodFailurePolicy)
			}
			pods, err := client.CoreV1().Pods(namespace).List(ctx, selector)
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 1 {
				t.Errorf("Job %s on %s created %d pods, want 1: the policy stops it at the first failure", job, w, len(pods.Items))
			}
			for _, pod := range pods.Items {
				wantFailed = append(wantFailed, pod.Name)
			}
			t.Logf("Job %s on %s: Failed (%s) %.1fs after creation, %d pod", job, w, reason, time.Since(start).Seconds(), len(pods.Items))
			continue
		}
		// The stock worker: once the driver answered Permanent, the fork would have failed the
		// pod within a second; wait longer than that and check the Job is still active.
		var pod v1.Pod
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(namespace).List(ctx, selector)
			if err != nil || len(pods.Items) != 1 {
				return false, nil
			}
			pod = pods.Items[0]
			claim := claimOf(ctx, t, w, namespace, pod.Name)
			return claim.PrepareCalls >= 1 && claim.Permanent, nil
		})
		if err != nil {
			t.Fatalf("Job %s on %s: its pod's claim was not answered Permanent within a minute: %v", job, w, err)
		}
		time.Sleep(5 * time.Second) // the fork fails a pod within a second of the answer
		got, err := client.BatchV1().Jobs(namespace).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := client.CoreV1().Pods(namespace).List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Active != 1 || got.Status.Failed != 0 || len(pods.Items) != 1 || pods.Items[0].Status.Phase != v1.PodPending {
			t.Errorf("Job %s on %s: %d active, %d failed, %d pods; want 1 active, 0 failed, its one pod Pending", job, w, got.Status.Active, got.Status.Failed, len(pods.Items))
		}
		t.Logf("Job %s on %s: active, pod %s %s after the driver's Permanent answer", job, w, pod.Name, pods.Items[0].Status.Phase)
	}
	checkNoLeaks(t, client, workers, namespace, wantFailed...)
}

// systemctl restart kubelet on the fork's worker, during transient retries and after a permanent
// failure: the Failed pod stays Failed, with its one condition and one prepare (no prepare after
// the failure); the retried pod runs once the driver answers.
func TestKubeletRestart(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	w := workers[0]
	namespace := newNamespace(t, client, "kind-restart", map[string][]byte{
		"permanent": testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind restart: never works"}.Parameters(),
		"transient": testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "kind restart: not yet"}.Parameters(),
	})
	createPod(t, client, podOn(namespace, "permanent", "permanent", w.name))
	failed, err := e2eframework.WaitForPod(ctx, client, namespace, "permanent", 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if err != nil {
		t.Fatalf("pod permanent on %s: not Failed in 30 s: %v", w, err)
	}
	condition := draCondition(failed)
	createPod(t, client, podOn(namespace, "transient", "transient", w.name))
	if _, err := waitForClaim(ctx, t, w, namespace, "transient", 30*time.Second, func(c testdriver.ClaimStats) bool { return c.PrepareCalls == 1 }); err != nil {
		t.Fatalf("pod transient's claim not answered with its transient error: %v", err)
	}

	restartKubelet(t, client, w, true, nil)
	// A restarted kubelet syncs every pod at once: the transient pod is prepared again and runs.
	runningContainer(t, client, namespace, "transient")
	// The failed pod: nothing changed, no prepare since the failure.
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, "permanent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != v1.PodFailed || pod.Status.Reason != failfastdra.PodFailedReason {
		t.Errorf("pod permanent after the restart: %s %s, want Failed %s", pod.Status.Phase, pod.Status.Reason, failfastdra.PodFailedReason)
	}
	if got := draCondition(pod); got == nil || condition == nil || !got.LastTransitionTime.Equal(&condition.LastTransitionTime) {
		t.Errorf("pod permanent's %s condition %v after the restart, want it unchanged: %v", failfastdra.PodConditionType, got, condition)
	}
	if claim := claimOf(ctx, t, w, namespace, "permanent"); claim.PrepareCalls != 1 {
		t.Errorf("pod permanent's claim: %d prepare calls, want 1: the restarted kubelet asked the driver again", claim.PrepareCalls)
	}
	if claim := claimOf(ctx, t, w, namespace, "transient"); claim.PrepareCalls != 2 || !claim.Prepared {
		t.Errorf("pod transient's claim: %d prepare calls, prepared %v; want 2 (the transient error, then success), true", claim.PrepareCalls, claim.Prepared)
	}
	events, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=permanent,reason=" + failfastdra.PodFailedReason})
	if err != nil {
		t.Fatal(err)
	}
	count := int32(0)
	for _, e := range events.Items {
		count += max(e.Count, 1)
	}
	if count != 1 {
		t.Errorf("%d %s events for pod permanent, want exactly 1", count, failfastdra.PodFailedReason)
	}
	checkNoLeaks(t, client, workers, namespace, "permanent")
}

// draCondition returns pod's DRA failure condition, nil if it has none.
func draCondition(pod *v1.Pod) *v1.PodCondition {
	for i, c := range pod.Status.Conditions {
		if c.Type == failfastdra.PodConditionType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// Rollout and rollback on a live node: the stock worker, running a DRA pod, gets the fork's
// kubelet with the gate, restarted through systemd: the pod keeps running (same container, no
// prepare); a new permanently failing pod there fails. Rolled back to stock: the running pod
// survives again, the Failed pod stays Failed.
func TestRolloutAndRollback(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	w := workers[1]
	namespace := newNamespace(t, client, "kind-rollout", map[string][]byte{
		"healthy":   nil,
		"permanent": testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind rollout: never works"}.Parameters(),
	})
	createPod(t, client, podOn(namespace, "running", "healthy", w.name))
	container, restarts := runningContainer(t, client, namespace, "running")
	// Whatever happens, the node ends on stock, as the cluster's other tests expect.
	t.Cleanup(func() {
		node, err := client.CoreV1().Nodes().Get(context.WithoutCancel(ctx), w.name, metav1.GetOptions{})
		if err == nil && isForkKubelet(node.Status.NodeInfo.KubeletVersion) {
			t.Logf("%s still on the fork: rolling back", w.name)
			installKubelet(t, w, false)()
			_ = exec.Command("docker", "exec", w.name, "systemctl", "restart", "kubelet").Run()
		}
	})
	unchanged := func(step string) {
		t.Helper()
		if id, n := runningContainer(t, client, namespace, "running"); id != container || n != restarts {
			t.Errorf("%s: pod running's container %s (%d restarts), want %s (%d): the pod did not survive", step, id, n, container, restarts)
		}
		if claim := claimOf(ctx, t, w, namespace, "running"); claim.PrepareCalls != 1 || !claim.Prepared {
			t.Errorf("%s: pod running's claim: %d prepare calls, prepared %v; want 1, true", step, claim.PrepareCalls, claim.Prepared)
		}
	}

	restartKubelet(t, client, w, true, installKubelet(t, w, true))
	unchanged("after the rollout")
	createPod(t, client, podOn(namespace, "permanent", "permanent", w.name))
	if _, err := e2eframework.WaitForPod(ctx, client, namespace, "permanent", 30*time.Second, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == failfastdra.PodFailedReason
	}); err != nil {
		t.Fatalf("pod permanent on %s rolled to the fork: not Failed in 30 s: %v", w.name, err)
	}
	if _, err := waitForClaim(ctx, t, w, namespace, "permanent", 30*time.Second, func(c testdriver.ClaimStats) bool { return c.UnprepareCalls == 1 }); err != nil {
		t.Errorf("pod permanent's claim not unprepared: %v", err)
	}

	restartKubelet(t, client, w, false, installKubelet(t, w, false))
	unchanged("after the rollback")
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, "permanent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != v1.PodFailed {
		t.Errorf("pod permanent after the rollback: %s, want it still Failed", pod.Status.Phase)
	}
	if claim := claimOf(ctx, t, w, namespace, "permanent"); claim.PrepareCalls != 1 {
		t.Errorf("pod permanent's claim after the rollback: %d prepare calls, want 1", claim.PrepareCalls)
	}
	checkNoLeaks(t, client, workers, namespace, "permanent")
}

// The example driver's webhook scaled to 0, then back
// (deploy/helm/gpu-driver/templates/webhook.yaml, failurePolicy Fail): while it is down a claim template with GPUConfig is denied, invalid or
// valid (fail closed), and one without config for the driver is admitted (matchConditions keep
// other objects independent of it); once it is back, an invalid template is denied at apply in the
// driver's words. A template that predates the webhook (created while its configuration is
// removed) reaches the nodes through the generated claims of bare pods: such a pod fails on the
// fork's worker with the driver's words at prepare, and is retried on the stock worker.
func TestWebhookDownAndBack(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	namespace := newNamespace(t, client, "kind-webhook", nil)
	scale := func(replicas int32) {
		t.Helper()
		start := time.Now()
		if _, err := client.AppsV1().Deployments(gpuNamespace).UpdateScale(ctx, gpuWebhook, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Namespace: gpuNamespace, Name: gpuWebhook},
			Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
		}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			d, err := client.AppsV1().Deployments(gpuNamespace).Get(ctx, gpuWebhook, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pods, err := client.CoreV1().Pods(gpuNamespace).List(ctx, metav1.ListOptions{LabelSelector: gpuWebhookLabel})
			return err == nil && len(pods.Items) == int(replicas) && d.Status.ReadyReplicas == replicas, nil
		})
		if err != nil {
			t.Fatalf("webhook Deployment not at %d ready replicas: %v", replicas, err)
		}
		t.Logf("webhook scaled to %d in %.1fs", replicas, time.Since(start).Seconds())
	}
	t.Cleanup(func() {
		_, _ = client.AppsV1().Deployments(gpuNamespace).UpdateScale(context.WithoutCancel(ctx), gpuWebhook, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Namespace: gpuNamespace, Name: gpuWebhook},
			Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
		}, metav1.UpdateOptions{})
	})
	invalid := func(name string) *resourceapi.ResourceClaimTemplate {
		return e2eframework.ClaimTemplateFor(namespace, name, gpuDriver, gpuDriver, gpuConfig("MPS"))
	}
	const words = `sharing must be Exclusive or TimeSlicing, got "MPS"`

	scale(0)
	// Fail closed: nothing with GPUConfig gets in while no replica answers.
	for name, template := range map[string]*resourceapi.ResourceClaimTemplate{
		"invalid": invalid("mps-down"),
		"valid":   e2eframework.ClaimTemplateFor(namespace, "valid-down", gpuDriver, gpuDriver, gpuConfig("TimeSlicing")),
	} {
		_, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, template, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("webhook down, failurePolicy Fail: the %s template: %v, want it denied (failed calling webhook)", name, err)
		} else {
			t.Logf("webhook down: the %s template denied: %v", name, err)
		}
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx,
		e2eframework.ClaimTemplateFor(namespace, "no-config", gpuDriver, gpuDriver, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("webhook down: a template without GPUConfig was denied: %v (matchConditions should keep it from the webhook)", err)
	}
	scale(2)
	// Spread over the two workers (the Deployment's pod anti-affinity): one node lost, one left.
	webhookPods, err := client.CoreV1().Pods(gpuNamespace).List(ctx, metav1.ListOptions{LabelSelector: gpuWebhookLabel})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, pod := range webhookPods.Items {
		nodes[pod.Spec.NodeName] = true
	}
	if len(webhookPods.Items) != 2 || len(nodes) != 2 {
		t.Errorf("webhook replicas on nodes %v (%d pods), want two pods on two nodes", nodes, len(webhookPods.Items))
	}

	// A template that predates the webhook: its configuration removed, the template created, the
	// configuration put back as it was.
	const registrationName = "gpu-driver" // deploy/helm/gpu-driver/templates/webhook.yaml
	webhooks := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	registration, err := webhooks.Get(ctx, registrationName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the example driver's ValidatingWebhookConfiguration: %v", err)
	}
	restore := registration.DeepCopy()
	restore.ResourceVersion, restore.UID, restore.ManagedFields, restore.CreationTimestamp = "", "", nil, metav1.Time{}
	restored := false
	putBack := func(ctx context.Context) {
		if restored {
			return
		}
		created, err := webhooks.Create(ctx, restore, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("putting the webhook's configuration back: %v", err)
			return
		}
		restored = true
		if err != nil {
			return
		}
		// Its fields go back to their managers (the chart's installer, Helm, applies server-side):
		// a later helm upgrade must not conflict with this test's client.
		created.ManagedFields = registration.ManagedFields
		if _, err := webhooks.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Errorf("giving the webhook's configuration back its field managers: %v", err)
		}
	}
	t.Cleanup(func() { putBack(context.WithoutCancel(ctx)) })
	if err := webhooks.Delete(ctx, registrationName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server may still call the webhook for a moment.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, invalid("mps"), metav1.CreateOptions{})
		return err == nil, nil
	})
	putBack(ctx)
	if err != nil {
		t.Fatalf("without the webhook's configuration: the invalid template was not admitted: %v", err)
	}
	var wantFailed []string
	for _, w := range workers {
		name := "mps-" + w.name
		createPod(t, client, podOn(namespace, name, "mps", w.name))
		if w.fork {
			wantFailed = append(wantFailed, name)
			pod, err := e2eframework.WaitForPod(ctx, client, namespace, name, time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if err != nil {
				t.Fatalf("pod %s on %s: not Failed within a minute: %v", name, w, err)
			}
			if pod.Status.Reason != failfastdra.PodFailedReason || !strings.Contains(pod.Status.Message, words) {
				t.Errorf("pod %s on %s: %s: %s; want %s and the driver's words", name, w, pod.Status.Reason, pod.Status.Message, failfastdra.PodFailedReason)
			}
			t.Logf("template that predates the webhook: pod %s on %s Failed: %s", name, w, pod.Status.Message)
			continue
		}
		// The stock kubelet reports the failed prepare in an event and retries.
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			events, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedPrepareDynamicResources"})
			return err == nil && len(events.Items) > 0 && strings.Contains(events.Items[0].Message, words), nil
		})
		if err != nil {
			t.Fatalf("pod %s on %s: no FailedPrepareDynamicResources event with the driver's words: %v", name, w, err)
		}
		time.Sleep(5 * time.Second) // the fork fails a pod within a second of the answer
		pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != v1.PodPending {
			t.Errorf("pod %s on %s: %s, want Pending: the stock kubelet retries", name, w, pod.Status.Phase)
		}
		t.Logf("template that predates the webhook: pod %s on %s %s, prepare failures reported as events", name, w, pod.Status.Phase)
	}

	// The API server may still be routing to the old endpoints, or lack the configuration, for a
	// moment.
	_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err = client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, invalid("mps-again"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), words), nil
	})
	if err == nil || !strings.Contains(err.Error(), words) {
		t.Errorf("webhook back: creating the invalid template: %v, want the webhook's denial in the driver's words", err)
	} else {
		t.Logf("webhook back: denied at apply: %v", err)
	}
	checkNoLeaks(t, client, workers, namespace, wantFailed...)
}

// The test driver's DaemonSet rolled to a new image while pods on both workers wait on its
// transient errors: the kubelet plugins are replaced one node at a time, no pod fails, all run.
func TestDriverRollout(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	namespace := newNamespace(t, client, "kind-roll", map[string][]byte{
		"transient": testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "kind roll: not yet"}.Parameters(),
	})
	var pods []string
	for _, w := range workers {
		for i := range 2 {
			name := fmt.Sprintf("transient-%d-%s", i, w.name)
			createPod(t, client, podOn(namespace, name, "transient", w.name))
			pods = append(pods, name)
			if _, err := waitForClaim(ctx, t, w, namespace, name, 30*time.Second, func(c testdriver.ClaimStats) bool { return c.PrepareCalls >= 1 }); err != nil {
				t.Fatalf("pod %s's claim not answered with its transient error: %v", name, err)
			}
		}
	}

	// The new image: the same driver under a new tag in every node's containerd, as a new release
	// kind-loaded there would be.
	daemonSets := client.AppsV1().DaemonSets(testDriverNamespace)
	ds, err := daemonSets.Get(ctx, testDriverDaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldImage := ds.Spec.Template.Spec.Containers[0].Image
	newImage := fmt.Sprintf("%s-roll%d", oldImage, time.Now().Unix())
	for _, node := range append([]string{clusterName + "-control-plane"}, workerNames(workers)...) {
		dockerExec(ctx, t, node, "ctr -n k8s.io images tag "+oldImage+" "+newImage)
	}
	// They wait: a transient answer is retried at the pod's next resync, a minute away.
	for _, name := range pods {
		pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != v1.PodPending {
			t.Fatalf("pod %s is %s before the roll, want Pending (waiting on its transient error)", name, pod.Status.Phase)
		}
	}
	start := time.Now()
	ds.Spec.Template.Spec.Containers[0].Image = newImage
	if _, err := daemonSets.Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitForRolledOut(ctx, client, testDriverNamespace, testDriverDaemonSet); err != nil {
		t.Fatalf("DaemonSet %s not rolled to %s: %v", testDriverDaemonSet, newImage, err)
	}
	for _, w := range workers {
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			return w.driver.Healthz(ctx) == nil, nil
		}); err != nil {
			t.Fatalf("test driver on %s not healthy after the roll: %v", w, err)
		}
	}
	t.Logf("driver DaemonSet rolled to %s in %.1fs", newImage, time.Since(start).Seconds())

	// Every pod runs, retried by its kubelet (at its next resync on either kind of kubelet).
	for _, name := range pods {
		pod, err := e2eframework.WaitForPod(ctx, client, namespace, name, 4*time.Minute, func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodRunning || p.Status.Phase == v1.PodFailed
		})
		switch {
		case err != nil:
			t.Errorf("pod %s not Running 4 min after the roll: %v", name, err)
		case pod.Status.Phase != v1.PodRunning:
			t.Errorf("pod %s %s during the driver's roll: %s: %s", name, pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
		}
	}
	t.Logf("all %d pods settled %.1fs after the roll began", len(pods), time.Since(start).Seconds())
	checkNoLeaks(t, client, workers, namespace)
}

// waitForRolledOut waits up to 3 minutes until the DaemonSet's controller saw its latest
// generation and every node runs an updated, available pod.
func waitForRolledOut(ctx context.Context, client kubernetes.Interface, namespace, name string) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || ds.Status.ObservedGeneration < ds.Generation {
			return false, nil
		}
		s := ds.Status
		return s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled, nil
	})
}

func workerNames(workers []worker) []string {
	var names []string
	for _, w := range workers {
		names = append(names, w.name)
	}
	return names
}

// A reboot of the fork's worker (docker restart of its node container) with a running DRA pod and
// a Failed pod on it: the running pod's claim is prepared again after the reboot (the CDI specs
// under /var/run are gone with it); a driver that now answers Permanent for it must not fail the
// pod, which had run; once the driver answers again the pod runs. The Failed pod stays Failed and
// is never prepared again.
func TestNodeReboot(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	w := workers[0]
	namespace := newNamespace(t, client, "kind-reboot", map[string][]byte{
		"healthy":   nil,
		"permanent": testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind reboot: never works"}.Parameters(),
	})
	running := podOn(namespace, "running", "healthy", w.name)
	running.Spec.RestartPolicy = v1.RestartPolicyAlways
	createPod(t, client, running)
	_, restarts := runningContainer(t, client, namespace, "running")
	createPod(t, client, podOn(namespace, "permanent", "permanent", w.name))
	if _, err := e2eframework.WaitForPod(ctx, client, namespace, "permanent", 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed }); err != nil {
		t.Fatalf("pod permanent on %s: not Failed in 30 s: %v", w, err)
	}
	old, devices, err := e2eframework.NodeSlices(ctx, client, testdriver.DefaultDriverName, w.name)
	if err != nil {
		t.Fatal(err)
	}
	address := func() string {
		return strings.TrimSpace(runDocker(ctx, t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", w.name))
	}
	before := address()

	start := time.Now()
	runDocker(ctx, t, "restart", w.name)
	if after := address(); after != before {
		t.Fatalf("%s came back with address %s, was %s: its kubelet's --node-ip no longer exists", w.name, after, before)
	}
	// The driver on the node is a new process: set its answer for the namespace's claims the
	// moment it serves, before the kubelet retries the pod (at its next resync, a minute later).
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return w.driver.SetBehavior(ctx, namespace, testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind reboot: device gone"}) == nil, nil
	})
	if err != nil {
		t.Fatalf("test driver on %s not back after the reboot: %v", w, err)
	}
	t.Cleanup(func() { _ = w.driver.ClearBehavior(context.WithoutCancel(ctx), namespace) })
	t.Logf("%s rebooted; its test driver answers again %.1fs later", w.name, time.Since(start).Seconds())
	// /var/run is a tmpfs: the CDI spec of the running pod's claim went with the reboot.
	if out := dockerExec(ctx, t, w.name, "cat /var/run/cdi/* 2>/dev/null || true"); strings.Contains(out, namespace+"/") {
		t.Errorf("a CDI spec of the namespace's claims survived the reboot of %s:\n%s", w.name, out)
	}
	if err := e2eframework.WaitForNewSlices(ctx, client, w.driver, testdriver.DefaultDriverName, w.name, devices, old, nil); err != nil {
		t.Fatal(err)
	}

	claim, err := waitForClaim(ctx, t, w, namespace, "running", 3*time.Minute, func(c testdriver.ClaimStats) bool { return c.PrepareCalls >= 1 })
	if err != nil {
		t.Fatalf("pod running's claim not prepared again within 3 min of the reboot: %v", err)
	}
	if !claim.Permanent {
		t.Fatalf("pod running's claim: the first prepare after the reboot was not answered Permanent (%+v): the override came too late", claim)
	}
	time.Sleep(5 * time.Second) // the fork fails a pod within a second of the answer
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase == v1.PodFailed || draCondition(pod) != nil {
		t.Errorf("pod running, which had run, after a Permanent answer: %s, condition %v; want it not Failed", pod.Status.Phase, draCondition(pod))
	}
	t.Logf("pod running after %d Permanent answers: %s (it had run: retried)", claim.PrepareCalls, pod.Status.Phase)

	if err := w.driver.ClearBehavior(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	if _, n := runningContainer(t, client, namespace, "running"); n <= restarts {
		t.Errorf("pod running: %d restarts, want more than %d after the reboot", n, restarts)
	}
	claim = claimOf(ctx, t, w, namespace, "running")
	if !claim.Prepared {
		t.Errorf("pod running's claim not prepared after the reboot: %+v", claim)
	}
	if !strings.Contains(dockerExec(ctx, t, w.name, "cat /var/run/cdi/* 2>/dev/null || true"), namespace+"/") {
		t.Errorf("no CDI spec of pod running's claim on %s after the reboot", w.name)
	}
	t.Logf("pod running again %.1fs after the reboot, its claim prepared %d times since", time.Since(start).Seconds(), claim.PrepareCalls)

	pod, err = client.CoreV1().Pods(namespace).Get(ctx, "permanent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != v1.PodFailed {
		t.Errorf("pod permanent after the reboot: %s, want it still Failed", pod.Status.Phase)
	}
	if claim := claimOf(ctx, t, w, namespace, "permanent"); claim.PrepareCalls != 0 {
		t.Errorf("pod permanent's claim prepared %d times after the reboot, want 0", claim.PrepareCalls)
	}
	checkNoLeaks(t, client, workers, namespace, "permanent")
}

// runDocker runs docker with args on the host (the project's engine: DOCKER_HOST).
func runDocker(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
