// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// exampleDriverName is the driver name of examples/gpu-driver.
const exampleDriverName = "gpu.example.com"

// startExampleDriver runs the example driver (built by make build from its
// own module, against the library, as a driver author builds it) on the
// cluster's node with gpus GPUs, the GPUs named in brokenFile being broken,
// and waits until its ResourceSlice is published. It stops the driver at the
// end of the test.
func startExampleDriver(t *testing.T, gpus int, brokenFile string) {
	t.Helper()
	deleteTaintRulesAtEnd(t, exampleDriverName)
	binary, err := localcluster.OutputPath("bin", "gpu-driver")
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(cluster.LogDir(), "gpu-driver.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(binary,
		"-node-name="+cluster.NodeName(),
		"-kubeconfig="+cluster.Kubeconfig(),
		"-gpus="+strconv.Itoa(gpus),
		"-cdi-dir="+cluster.CDISpecDir(),
		"-plugin-registry-dir="+filepath.Join(cluster.KubeletRootDir(), "plugins_registry"),
		"-plugin-dir="+filepath.Join(cluster.KubeletRootDir(), "plugins", exampleDriverName),
		"-broken-devices-file="+brokenFile,
		"-health-interval=1s",
		"-http-address=127.0.0.1:0",
		"-v=4",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (make build builds it): %v", binary, err)
	}
	// exited is closed when the process ended, with its error in waitErr.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.Join(errors.New("the example driver exited, see gpu-driver.log"), waitErr)
		default:
		}
		return len(exampleDevices(ctx)) == gpus, nil
	})
	if err != nil {
		t.Fatalf("example driver's ResourceSlice: %v", err)
	}
}

// exampleDevices returns the example driver's published devices on the
// node, with their taints: those in its ResourceSlices and those of its
// DeviceTaintRules for the node's pool.
func exampleDevices(ctx context.Context) map[string][]resourceapi.DeviceTaint {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{resourceapi.ResourceSliceSelectorDriver: exampleDriverName, resourceapi.ResourceSliceSelectorNodeName: cluster.NodeName()}.AsSelector().String(),
	})
	if err != nil {
		return nil
	}
	devices := map[string][]resourceapi.DeviceTaint{}
	for _, slice := range list.Items {
		for _, device := range slice.Spec.Devices {
			devices[device.Name] = device.Taints
		}
	}
	rules, err := listDeviceTaintRules(ctx, failfastplugin.DeviceTaintRuleDriverLabel+"="+exampleDriverName)
	if err != nil {
		return nil
	}
	for _, rule := range rules {
		selector := rule.Spec.DeviceSelector
		if selector == nil || selector.Pool == nil || *selector.Pool != cluster.NodeName() || selector.Device == nil {
			continue
		}
		if _, ok := devices[*selector.Device]; ok {
			devices[*selector.Device] = append(devices[*selector.Device], rule.Spec.Taint)
		}
	}
	return devices
}

// podLogs waits until the logs of the pod's container hold every one of want.
func podLogs(t *testing.T, ns, name string, want ...string) string {
	t.Helper()
	var logs string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		data, err := client.CoreV1().Pods(ns).GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		logs = string(data)
		return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(logs, w) }), nil
	})
	if err != nil {
		t.Fatalf("logs of %s/%s: %q, want %q", ns, name, logs, want)
	}
	return logs
}

// TestExampleDriver runs examples/gpu-driver on the real cluster with 3 GPUs,
// gpu-0 broken, no admission webhook:
//   - a pod allocated the broken GPU fails permanently, naming it, and the
//     GPU is tainted (DeviceFault: a DeviceTaintRule);
//   - the next pod is given another GPU (the taint keeps the scheduler away)
//     and runs, with the CDI environment of its GPU and config;
//   - a pod whose claim has invalid config fails permanently with the
//     validator's words first (admission.ValidateClaim at prepare);
//   - deleting the pods leaves no CDI spec and no allocated claim;
//   - gpu-0 repaired, the running driver's health check untaints it.
func TestExampleDriver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	brokenFile := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(brokenFile, []byte("gpu-0 # fan failure\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startExampleDriver(t, 3, brokenFile)
	class, err := e2eframework.EnsureDeviceClassFor(ctx, client, exampleDriverName)
	if err != nil {
		t.Fatal(err)
	}
	ns := namespaceFor(t)
	template := func(name, sharing string) {
		parameters := []byte(`{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"` + sharing + `"}`)
		if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx,
			e2eframework.ClaimTemplateFor(ns, name, class, exampleDriverName, parameters), metav1.CreateOptions{}); err != nil {
			t.Fatalf("claim template %s: %v", name, err)
		}
	}
	template("time-sliced", "TimeSlicing")
	template("mps", "MPS")

	// The allocator tries devices in order: the first pod gets gpu-0.
	createPodWith(t, ns, "broken", v1.RestartPolicyNever, "time-sliced")
	pod := waitFor(t, ns, "broken", 2*time.Minute, "failed", podFailed)
	checkFailedPod(t, pod, "GPU gpu-0 failed its health check")
	checkForkMessage(t, pod, exampleDriverName)
	taints := exampleDevices(ctx)["gpu-0"]
	if !slices.ContainsFunc(taints, func(taint resourceapi.DeviceTaint) bool {
		return taint.Key == failfastplugin.DefaultDeviceFaultTaintKey && taint.Effect == resourceapi.DeviceTaintEffectNoSchedule
	}) {
		t.Errorf("gpu-0 taints after its pod failed: %+v, want the device fault's NoSchedule taint", taints)
	}

	// The taint keeps the scheduler away from gpu-0.
	createPodWith(t, ns, "runs", v1.RestartPolicyNever, "time-sliced")
	waitFor(t, ns, "runs", 2*time.Minute, "running", podRunning)
	logs := podLogs(t, ns, "runs", "DRA_GPU_DEVICE_DEV=gpu-", "DRA_GPU_SHARING_DEV=TimeSlicing")
	if strings.Contains(logs, "DRA_GPU_DEVICE_DEV=gpu-0") {
		t.Errorf("the pod after the fault was given the tainted gpu-0: %q", logs)
	}

	// Invalid config that no webhook refused fails at prepare, the
	// validator's words first.
	createPodWith(t, ns, "invalid", v1.RestartPolicyNever, "mps")
	pod = waitFor(t, ns, "invalid", 2*time.Minute, "failed", podFailed)
	checkFailedPod(t, pod, `sharing must be Exclusive or TimeSlicing, got "MPS"`, "invalid-mps-")
	checkForkMessage(t, pod, `got "MPS" [ResourceClaim `+ns+"/invalid-mps-")

	// Nothing stays behind: no CDI spec of the driver, no allocated claim.
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = nil
		specs, _ := filepath.Glob(filepath.Join(cluster.CDISpecDir(), exampleDriverName+"-*.json"))
		left = append(left, specs...)
		claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, claim := range claims.Items {
			if claim.Status.Allocation != nil {
				left = append(left, "allocated claim "+claim.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("left after deleting the pods: %v", left)
	}

	// gpu-0 is repaired while the driver runs: its next health check
	// untaints it, no restart.
	if err := os.WriteFile(brokenFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		taints = exampleDevices(ctx)["gpu-0"]
		return !slices.ContainsFunc(taints, func(taint resourceapi.DeviceTaint) bool {
			return taint.Key == failfastplugin.DefaultDeviceFaultTaintKey
		}), nil
	})
	if err != nil {
		t.Errorf("gpu-0 repaired: still tainted %+v, want its fault cleared by the driver's health check", taints)
	}
}
