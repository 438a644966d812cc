// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// deploymentState counts the pods of a Deployment.
type deploymentState struct {
	created, failed, running int
	// failedOn counts the Failed pods per device named in their message:
	// the fork names "(driver/device)"; with the series' kubelet, the
	// message holds only the driver's words, "device NAME is broken".
	failedOn map[string]int
	// runningPods are the names of the Running pods.
	runningPods []string
}

func deploymentPods(ctx context.Context, ns string) (deploymentState, error) {
	st := deploymentState{failedOn: map[string]int{}}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, err
	}
	st.created = len(pods.Items)
	for _, p := range pods.Items {
		switch {
		case failedForDRA(&p):
			st.failed++
			for i := range 16 {
				device := testdriver.DeviceName(i)
				named := strings.Contains(p.Status.Message, "/"+device+")") || strings.Contains(p.Status.Message, "/"+device+",")
				if !forkKubelet {
					named = strings.Contains(p.Status.Message, "device "+device+" is broken")
				}
				if named {
					st.failedOn[device]++
				}
			}
		case podRunning(&p):
			st.running++
			st.runningPods = append(st.runningPods, p.Name)
		}
	}
	return st, nil
}

// createDeployment creates a Deployment of replicas pods with one claim
// each from template "claim".
func createDeployment(t *testing.T, ns string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": "workload"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: e2eframework.PodSpec("claim", v1.RestartPolicyAlways)},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(t.Context(), deployment, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
}

func scaleDeployment(t *testing.T, ns string, replicas int32) {
	t.Helper()
	scale, err := client.AppsV1().Deployments(ns).GetScale(t.Context(), "workload", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = replicas
	if _, err := client.AppsV1().Deployments(ns).UpdateScale(t.Context(), "workload", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitForRunning waits until want pods of the Deployment run.
func waitForRunning(t *testing.T, ns string, want int, timeout time.Duration) deploymentState {
	t.Helper()
	var st deploymentState
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		st, err = deploymentPods(ctx, ns)
		return err == nil && st.running == want, nil
	})
	if err != nil {
		t.Fatalf("%d of %d pods running after %v (%d created, %d failed): %v", st.running, want, timeout, st.created, st.failed, err)
	}
	return st
}

// deviceTaints returns the devices of driver d that carry the device fault
// taint: the devices of its DeviceTaintRules, sorted.
func deviceTaints(t *testing.T, d *e2eframework.Driver) []string {
	t.Helper()
	rules, err := listDeviceTaintRules(t.Context(), failfastplugin.DeviceTaintRuleDriverLabel+"="+d.Name())
	if err != nil {
		t.Fatal(err)
	}
	var tainted []string
	for _, rule := range rules {
		selector := rule.Spec.DeviceSelector
		if taint := rule.Spec.Taint; taint.Key == failfastplugin.DefaultDeviceFaultTaintKey && taint.Effect == resourceapi.DeviceTaintEffectNoSchedule &&
			selector != nil && selector.Device != nil {
			tainted = append(tainted, *selector.Device)
		}
	}
	slices.Sort(tainted)
	return tainted
}

// Issue 15: a Deployment on a node with 4 devices, 2 of them broken. The
// driver reports each broken device with failfastplugin.DeviceFault: it is
// tainted before the pod fails, so it fails at most one pod, and both
// replicas end up on the healthy devices. The taints outlive a restart of
// the driver (issue 35): a third replica after it fails no pod and gets no
// tainted device. Clearing the fault makes the device schedulable again.
func TestDeviceFaultTaintStopsChurn(t *testing.T) {
	t.Parallel()
	faulty := startDriver(t, e2eframework.DriverOptions{DriverName: "faulty.dra-failfast.test", Devices: 4, TaintBroken: true})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", faulty, nil)
	broken := []string{testdriver.DeviceName(0), testdriver.DeviceName(1)}
	for _, device := range broken {
		if err := faulty.Client.SetBroken(t.Context(), device, true); err != nil {
			t.Fatalf("break %s: %v", device, err)
		}
	}
	start := time.Now()
	createDeployment(t, ns, 2)
	st := waitForRunning(t, ns, 2, 3*time.Minute)
	t.Logf("both replicas running %.1fs after the Deployment was created: %d pods created, %d failed permanently (per device %v)",
		time.Since(start).Seconds(), st.created, st.failed, st.failedOn)
	for device, n := range st.failedOn {
		if !slices.Contains(broken, device) {
			t.Errorf("a pod failed on healthy device %s", device)
		}
		if n > 1 {
			t.Errorf("device %s failed %d pods: its taint did not keep the scheduler away", device, n)
		}
	}
	if st.failed > len(broken) {
		t.Errorf("%d pods failed for %d broken devices", st.failed, len(broken))
	}
	// The allocator tries devices in order, so the first replica lands on
	// a broken device: without a failed pod the scenario did not happen.
	if st.failed < 1 {
		t.Error("no pod failed on a broken device: the taint was never exercised")
	}
	// The taints are DeviceTaintRules, exactly of the devices that failed a pod.
	var failedDevices []string
	for device := range st.failedOn {
		failedDevices = append(failedDevices, device)
	}
	slices.Sort(failedDevices)
	if tainted := deviceTaints(t, faulty); !slices.Equal(tainted, failedDevices) {
		t.Errorf("tainted devices %v, want the devices that failed a pod %v", tainted, failedDevices)
	}
	if p50, p99, n, err := taintWaitQuantiles(t.Context(), faulty); err != nil {
		t.Errorf("taint wait histogram: %v", err)
	} else {
		t.Logf("taint wait until visible in the API, %d faults: p50 <= %v, p99 <= %v (histogram bucket bounds)", n, p50, p99)
	}
	// The running replicas hold healthy devices.
	stats, err := faulty.Client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range stats.Claims {
		if claim.Prepared && slices.ContainsFunc(claim.Devices, func(d string) bool { return slices.Contains(broken, d) }) {
			t.Errorf("claim %s prepared on a broken device: %v", claim.Name, claim.Devices)
		}
	}

	// The driver restarts (a DaemonSet roll, an OOM kill): the new process
	// knows nothing of the broken devices, yet their taints stay, and it
	// finds them.
	if err := faulty.Restart(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	if tainted := deviceTaints(t, faulty); !slices.Equal(tainted, failedDevices) {
		t.Errorf("after the driver restarted: tainted devices %v, want %v", tainted, failedDevices)
	}
	if stats, err := faulty.Client.Stats(t.Context()); err != nil || !slices.Equal(stats.TaintedDevices, failedDevices) {
		t.Errorf("after the driver restarted: it knows tainted devices %v (%v), want %v", stats.TaintedDevices, err, failedDevices)
	}
	// A third replica: the scheduler still avoids the tainted devices, so
	// no pod fails (the restarted driver would answer Permanent only for
	// broken devices it knows; the taint keeps pods off them anyway).
	scaleDeployment(t, ns, 3)
	time.Sleep(15 * time.Second)
	after, err := deploymentPods(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if after.failed != st.failed {
		t.Errorf("after the driver restarted, %d pods failed, was %d", after.failed, st.failed)
	}
	stats, err = faulty.Client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range stats.Claims {
		if claim.Prepared && slices.ContainsFunc(claim.Devices, func(d string) bool { return slices.Contains(failedDevices, d) }) {
			t.Errorf("after the driver restarted, claim %s got a tainted device: %v", claim.Name, claim.Devices)
		}
	}
	t.Logf("after the driver restarted: %v tainted, %d pods running, %d failed since", deviceTaints(t, faulty), after.running, after.failed-st.failed)

	// Repaired: the driver clears the faults, the taints go, all 4 devices
	// can be allocated again.
	for _, device := range broken {
		if err := faulty.Client.SetBroken(t.Context(), device, false); err != nil {
			t.Fatalf("repair %s: %v", device, err)
		}
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return len(deviceTaints(t, faulty)) == 0, nil
	}); err != nil {
		t.Fatalf("taints still there after the faults were cleared: %v", deviceTaints(t, faulty))
	}
	scaleDeployment(t, ns, 4)
	waitForRunning(t, ns, 4, 2*time.Minute)
	if err := client.AppsV1().Deployments(ns).Delete(t.Context(), "workload", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAndCheckNoLeaks(t, ns, faulty)
}

// churnWindow is how long the Deployment without taints is watched.
const churnWindow = 3 * time.Minute

// The same Deployment when the driver does not taint: the ReplicaSet
// replaces each Failed pod at once, and the allocator, which tries devices
// in order, gives the replacement a broken device again as soon as the
// failed pod's claim released it. The churn is reported, over churnWindow;
// it must be more failed pods than broken devices, all on broken devices.
func TestDeviceFaultWithoutTaintChurns(t *testing.T) {
	t.Parallel()
	untainted := startDriver(t, e2eframework.DriverOptions{DriverName: "untainted.dra-failfast.test", Devices: 4})
	ns := namespaceFor(t)
	createTemplate(t, ns, "claim", untainted, nil)
	broken := []string{testdriver.DeviceName(0), testdriver.DeviceName(1)}
	for _, device := range broken {
		if err := untainted.Client.SetBroken(t.Context(), device, true); err != nil {
			t.Fatalf("break %s: %v", device, err)
		}
	}
	createDeployment(t, ns, 2)
	time.Sleep(churnWindow)
	st, err := deploymentPods(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without taints, %v after the Deployment was created: %d pods created, %d failed permanently (per device %v), %d running",
		churnWindow, st.created, st.failed, st.failedOn, st.running)
	for device := range st.failedOn {
		if !slices.Contains(broken, device) {
			t.Errorf("a pod failed on healthy device %s", device)
		}
	}
	// What this test shows is that a device without a taint fails pod after
	// pod: more failures than broken devices, or the churn did not happen.
	if st.failed <= len(broken) {
		t.Errorf("without taints only %d pods failed for %d broken devices in %v: no churn, the scenario did not happen", st.failed, len(broken), churnWindow)
	}
	if tainted := deviceTaints(t, untainted); len(tainted) > 0 {
		t.Errorf("devices tainted by a driver that does not taint: %v", tainted)
	}
	if err := client.AppsV1().Deployments(ns).Delete(t.Context(), "workload", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAndCheckNoLeaks(t, ns, untainted)
}

// taintWaitQuantiles reads the driver's taint wait histogram from its
// /metrics and returns the upper bounds of the buckets holding the median
// and the 99th percentile, and the number of waits.
func taintWaitQuantiles(ctx context.Context, d *e2eframework.Driver) (p50, p99 time.Duration, n int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.Client.BaseURL+"/metrics", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, 0, err
	}
	type bucket struct {
		le    float64
		count float64
	}
	var buckets []bucket
	prefix := failfastplugin.DeviceTaintWaitMetric + "_bucket{"
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, `driver_name="`+d.Name()+`"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, rest, _ := strings.Cut(rest, `"`)
		fields := strings.Fields(rest)
		if le == "+Inf" || len(fields) == 0 {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64)
		count, err2 := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err1 != nil || err2 != nil {
			return 0, 0, 0, fmt.Errorf("bucket line %q", line)
		}
		buckets = append(buckets, bucket{bound, count})
	}
	if len(buckets) == 0 || buckets[len(buckets)-1].count == 0 {
		return 0, 0, 0, fmt.Errorf("no observations of %s for %s", failfastplugin.DeviceTaintWaitMetric, d.Name())
	}
	slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	total := buckets[len(buckets)-1].count
	quantile := func(q float64) time.Duration {
		for _, b := range buckets {
			if b.count >= q*total {
				return time.Duration(b.le * float64(time.Second))
			}
		}
		return time.Duration(buckets[len(buckets)-1].le * float64(time.Second))
	}
	return quantile(0.5), quantile(0.99), int(total), nil
}
