// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// The example driver as its chart deploys it (hack/kind-deploy-driver.sh gpu-driver).
const (
	gpuDriver          = "gpu.example.com"
	gpuNamespace       = "gpu-driver"
	gpuBrokenFile      = "/var/lib/gpu-driver/broken-gpus"
	gpuPluginLabel     = "app.kubernetes.io/name=gpu-driver,app.kubernetes.io/component=kubelet-plugin"
	gpuPluginDaemonSet = "gpu-driver-kubelet-plugin"
)

func gpuConfig(sharing string) []byte {
	return []byte(`{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"` + sharing + `"}`)
}

// TestExampleDriver: examples/gpu-driver deployed from its chart deploy/helm/gpu-driver
// (DaemonSet, webhook Deployment, ValidatingWebhookConfiguration) on the two workers:
//   - its webhook denies a claim template with invalid GPUConfig at apply, in the driver's words;
//   - the plugin of the second worker, with its pod's real token, can neither take the name of
//     the first worker's rule for gpu-0 (squatting), nor forge that rule, nor taint a device the
//     first worker never published or its whole pool (attackTaintRules), nor, after the fault,
//     delete the first worker's rule (deleteVictimRules);
//   - a Deployment whose pod lands on a broken GPU of the first worker: that pod fails once
//     (DRAPermanentDriverFailure), the GPU is tainted (a DeviceTaintRule), and the
//     replacement runs on a healthy GPU;
//   - the taint stays across a roll of the driver's DaemonSet and a reboot of the worker: a
//     second replica waits for a GPU, no second pod fails;
//   - once the Deployment is gone no claim stays allocated and no CDI spec of the driver is left.
func TestExampleDriver(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	namespace := fmt.Sprintf("kind-gpu-%d", time.Now().Unix())
	if err := e2eframework.CreateNamespace(ctx, client, namespace); err != nil {
		t.Fatal(err)
	}
	broken := workers[0].name
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
		_ = exec.CommandContext(ctx, "docker", "exec", broken, "rm", "-f", gpuBrokenFile).Run()
		// A new plugin process clears the fault of a GPU that is healthy again.
		_ = client.CoreV1().Pods(gpuNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
			LabelSelector: gpuPluginLabel, FieldSelector: "spec.nodeName=" + broken})
	})

	_, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx,
		e2eframework.ClaimTemplateFor(namespace, "mps", gpuDriver, gpuDriver, gpuConfig("MPS")), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `sharing must be Exclusive or TimeSlicing, got "MPS"`) {
		t.Errorf("creating a template with invalid GPUConfig: %v, want the webhook's denial in the driver's words", err)
	}

	if out, err := exec.CommandContext(ctx, "docker", "exec", broken, "sh", "-c", "echo 'gpu-0 # fan failure' > "+gpuBrokenFile).CombinedOutput(); err != nil {
		t.Fatalf("breaking gpu-0 on %s: %v: %s", broken, err, out)
	}
	// Before the fault: the plugin of the other worker, taken over (its pod's real token), tries
	// to keep the broken gpu-0 from being tainted, or to taint the broken node's devices itself.
	attacker := workers[1].name
	attackerClient := pluginTokenClient(ctx, t, client, gpuNamespace, "gpu-driver", gpuPluginLabel, attacker)
	attackTaintRules(ctx, t, client, attackerClient, attacker, broken)

	template := e2eframework.ClaimTemplateFor(namespace, "gpu-0", gpuDriver, gpuDriver, gpuConfig("TimeSlicing"))
	// gpu-0 of any node: the first worker's is broken, the second's is not.
	template.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["` + gpuDriver + `"].index == 0`}}}
	if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := e2eframework.PodSpec("gpu-0", v1.RestartPolicyAlways)
	spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
		Weight: 100, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{broken}}}}}}}}
	labels := map[string]string{"app": "gpu-fault"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "gpu-fault"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := client.AppsV1().Deployments(namespace).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var failed, running []v1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		failed, running = nil, nil
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, pod := range pods.Items {
			switch pod.Status.Phase {
			case v1.PodFailed:
				failed = append(failed, pod)
			case v1.PodRunning:
				running = append(running, pod)
			}
		}
		return len(failed) > 0 && len(running) > 0, nil
	})
	if err != nil {
		t.Fatalf("want one pod Failed on %s's broken gpu-0 and its replacement Running: %d Failed, %d Running: %v", broken, len(failed), len(running), err)
	}
	// The taint keeps the scheduler away from the broken GPU: no second failure.
	time.Sleep(5 * time.Second)
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failedNow int
	for _, pod := range pods.Items {
		if pod.Status.Phase == v1.PodFailed {
			failedNow++
		}
	}
	if failedNow != 1 {
		t.Errorf("%d pods Failed, want exactly 1 (the one on the broken GPU)", failedNow)
	}
	pod := failed[0]
	if pod.Spec.NodeName != broken || pod.Status.Reason != failfastdra.PodFailedReason || !strings.Contains(pod.Status.Message, "GPU gpu-0 failed its health check") {
		t.Errorf("Failed pod %s on %s: reason %q, message %q; want %s, %s, the driver's words", pod.Name, pod.Spec.NodeName, pod.Status.Reason, pod.Status.Message, broken, failfastdra.PodFailedReason)
	}
	if node := running[0].Spec.NodeName; node == broken {
		t.Errorf("the replacement runs on %s, the node of the broken GPU", node)
	}
	if taints := gpuTaints(ctx, t, client, broken, "gpu-0"); !slices.Contains(taints, failfastplugin.DefaultDeviceFaultTaintKey) {
		t.Errorf("%s's gpu-0 taints %v, want %s", broken, taints, failfastplugin.DefaultDeviceFaultTaintKey)
	}
	t.Logf("pod %s Failed on %s (%s); replacement %s Running on %s", pod.Name, broken, pod.Status.Message, running[0].Name, running[0].Spec.NodeName)
	// Tainted despite the attacks above; and the attacker cannot untaint it.
	deleteVictimRules(ctx, t, client, attackerClient, attacker, broken)
	if taints := gpuTaints(ctx, t, client, broken, "gpu-0"); !slices.Contains(taints, failfastplugin.DefaultDeviceFaultTaintKey) {
		t.Errorf("after %s's plugin tried to delete its rules: %s's gpu-0 taints %v, want %s", attacker, broken, taints, failfastplugin.DefaultDeviceFaultTaintKey)
	}

	// The taint outlives the driver: a DaemonSet roll, then a reboot of the node. A second
	// replica would get the broken gpu-0 (the only free gpu-0) without it; with it, the
	// replica waits, Pending, and no second pod fails.
	if _, err := client.AppsV1().Deployments(namespace).Patch(ctx, "gpu-fault", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	checkOneFailed := func(after string) {
		t.Helper()
		time.Sleep(10 * time.Second)
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var failed []string
		for _, pod := range pods.Items {
			if pod.Status.Phase == v1.PodFailed {
				failed = append(failed, pod.Name+" on "+pod.Spec.NodeName)
			}
		}
		if len(failed) != 1 {
			t.Errorf("after %s: %d pods Failed, want only the first: %v", after, len(failed), failed)
		}
		if taints := gpuTaints(ctx, t, client, broken, "gpu-0"); !slices.Contains(taints, failfastplugin.DefaultDeviceFaultTaintKey) {
			t.Errorf("after %s: %s's gpu-0 taints %v, want %s", after, broken, taints, failfastplugin.DefaultDeviceFaultTaintKey)
		}
	}
	checkOneFailed("a second replica")
	rollGPUPlugins(ctx, t, client)
	checkOneFailed("the driver's DaemonSet rolled")
	rebootForGPUs(ctx, t, client, broken)
	checkOneFailed("the reboot of " + broken)
	t.Logf("%s's gpu-0 still tainted after a DaemonSet roll and a reboot; still one Failed pod", broken)

	// Nothing left once the Deployment is gone.
	if err := client.AppsV1().Deployments(namespace).Delete(ctx, "gpu-fault", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = nil
		claims, err := client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, claim := range claims.Items {
			if claim.Status.Allocation != nil {
				left = append(left, "allocated claim "+claim.Name)
			}
		}
		for _, w := range workers {
			out, _ := exec.CommandContext(ctx, "docker", "exec", w.name, "sh", "-c", "ls /var/run/cdi/ 2>/dev/null | grep '^"+gpuDriver+"' || true").Output()
			if s := strings.TrimSpace(string(out)); s != "" {
				left = append(left, w.name+": CDI "+s)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("left after the Deployment was deleted: %v", left)
	}

	// The fault cleared (the GPU repaired, the plugin restarted as after a repair): the plugin
	// clears the fault of a GPU healthy at its start, and the taint goes.
	if out, err := exec.CommandContext(ctx, "docker", "exec", broken, "rm", "-f", gpuBrokenFile).CombinedOutput(); err != nil {
		t.Fatalf("clearing the fault on %s: %v: %s", broken, err, out)
	}
	if err := client.CoreV1().Pods(gpuNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
		LabelSelector: gpuPluginLabel, FieldSelector: "spec.nodeName=" + broken}); err != nil {
		t.Fatal(err)
	}
	cleared := time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		published, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + broken + ",spec.driver=" + gpuDriver})
		if err != nil || len(published.Items) == 0 {
			return false, nil
		}
		return !slices.ContainsFunc(gpuTaints(ctx, t, client, broken, "gpu-0"), func(key string) bool { return key == failfastplugin.DefaultDeviceFaultTaintKey }), nil
	})
	if err != nil {
		t.Errorf("%s's gpu-0 still tainted %v after the fault was cleared: %v", broken, gpuTaints(ctx, t, client, broken, "gpu-0"), err)
	} else {
		t.Logf("fault cleared on %s: gpu-0 untainted (its DeviceTaintRule deleted) %.1fs after the plugin restarted", broken, time.Since(cleared).Seconds())
	}
}

// gpuTaints returns the taint keys of a GPU of node: those of the example driver's
// DeviceTaintRules for the node's pool (DeviceFault's) and those in its ResourceSlices.
func gpuTaints(ctx context.Context, t *testing.T, client kubernetes.Interface, node, device string) []string {
	t.Helper()
	var keys []string
	rules, err := client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: failfastplugin.DeviceTaintRuleDriverLabel + "=" + gpuDriver})
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range rules.Items {
		if s := rule.Spec.DeviceSelector; s != nil && s.Pool != nil && *s.Pool == node && s.Device != nil && *s.Device == device {
			keys = append(keys, rule.Spec.Taint.Key)
		}
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + gpuDriver})
	if err != nil {
		t.Fatal(err)
	}
	for _, slice := range slices.Items {
		for _, d := range slice.Spec.Devices {
			if d.Name == device {
				for _, taint := range d.Taints {
					keys = append(keys, taint.Key)
				}
			}
		}
	}
	return keys
}

// rollGPUPlugins rolls the example driver's kubelet plugin DaemonSet (as kubectl rollout
// restart does) and waits until every node runs a new, ready plugin pod.
func rollGPUPlugins(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	daemonSets := client.AppsV1().DaemonSets(gpuNamespace)
	start := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, start.Format(time.RFC3339))
	if _, err := daemonSets.Patch(ctx, gpuPluginDaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The DaemonSet surges (deploy/helm/gpu-driver: maxSurge 1, kubeletplugin.RollingUpdate): for a
	// while a node runs the old and the new plugin at once. Watched until the roll is done.
	watchCtx, stopWatching := context.WithCancel(ctx)
	mostAtOnce := make(chan int, 1)
	go func() {
		most := 0
		_ = wait.PollUntilContextCancel(watchCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(gpuNamespace).List(ctx, metav1.ListOptions{LabelSelector: gpuPluginLabel})
			if err != nil {
				return false, nil
			}
			running := map[string]int{}
			for _, pod := range pods.Items {
				if pod.Status.Phase == v1.PodRunning && pod.DeletionTimestamp == nil {
					running[pod.Spec.NodeName]++
				}
			}
			for _, n := range running {
				most = max(most, n)
			}
			return false, nil
		})
		mostAtOnce <- most
	}()
	err := waitForRolledOut(ctx, client, gpuNamespace, gpuPluginDaemonSet)
	stopWatching()
	most := <-mostAtOnce
	if err != nil {
		t.Fatalf("DaemonSet %s not rolled: %v", gpuPluginDaemonSet, err)
	}
	t.Logf("DaemonSet %s rolled in %.1fs, at most %d plugin instances running on one node at once", gpuPluginDaemonSet, time.Since(start).Seconds(), most)
	if most < 2 {
		t.Errorf("no node ran two plugin instances at once during the roll: the DaemonSet did not surge")
	}
}

// rebootForGPUs reboots node (docker restart of its container) and waits until the example
// driver published the node's GPUs again: the kubelet wipes a node's ResourceSlices when it
// starts, so new slices mean the new plugin process runs.
func rebootForGPUs(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	selector := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + gpuDriver}
	before, err := client.ResourceV1().ResourceSlices().List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	old := map[types.UID]bool{}
	for _, slice := range before.Items {
		old[slice.UID] = true
	}
	start := time.Now()
	runDocker(ctx, t, "restart", node)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, selector)
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		return !slices.ContainsFunc(list.Items, func(slice resourceapi.ResourceSlice) bool { return old[slice.UID] }), nil
	})
	if err != nil {
		t.Fatalf("%s rebooted: the example driver did not publish its GPUs anew within 3 min: %v", node, err)
	}
	t.Logf("%s rebooted; the example driver published its GPUs anew %.1fs later", node, time.Since(start).Seconds())
}
