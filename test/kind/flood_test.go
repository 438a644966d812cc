// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// nonDeviceName are the runs of characters a device name (a DNS label) cannot have.
var nonDeviceName = regexp.MustCompile(`[^a-z0-9]+`)

const (
	testDriverPluginLabel = "app.kubernetes.io/name=dra-test-driver,app.kubernetes.io/component=kubelet-plugin"
	// floodRules is how many rules the attacker writes: as many as the attack the policy was
	// tightened for (350 rules of 250 KiB each took every plugin that restarted to 241 MB).
	floodRules = 350
	// maxPluginHWM bounds the peak RSS of the victim's restarted plugin: half its memory limit
	// (deploy/test-driver/kubelet-plugin.yaml, 256Mi); it starts at about 40 MB.
	maxPluginHWM = 128 << 20
)

// TestNodeCannotHarmOtherNodesPlugins: the test driver's plugin on the first worker, with its
// pod's real token (whoever takes over that node holds one), attacks the second worker's plugin:
//   - a DeviceTaintRule in its own pool under its own name but with a 250 KiB annotation, an
//     extra label, a finalizer, an owner that is not its Node, or without the node label: each
//     denied by the policy (what one node writes is bounded in size);
//   - a flood of rules the policy admits (floodRules, in its own pool, under its own names);
//   - a ResourceSlice of its own node naming the victim's pool: denied.
//
// Then the victim's plugin restarts (its pod deleted, as a DaemonSet roll or a reboot would): it
// lists only its own node's rules, so it starts, stays under half its memory limit (VmHWM of the
// process) and prepares a claim for a new pod. The attacker's rules are deleted when the test ends.
func TestNodeCannotHarmOtherNodesPlugins(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	attacker, victim := workers[0], workers[1]
	const driverName = testdriver.DefaultDriverName
	asAttacker := pluginTokenClient(ctx, t, client, testDriverNamespace, "dra-test-driver", testDriverPluginLabel, attacker.name)
	t.Cleanup(func() { deleteFlood(context.WithoutCancel(ctx), t, client, attacker.name) })

	rule := func(device string) *resourceapi.DeviceTaintRule {
		id := failfastplugin.DeviceID{Pool: attacker.name, Device: device}
		return &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{
				Name: failfastplugin.DeviceTaintRuleName(driverName, attacker.name, id),
				Labels: map[string]string{
					failfastplugin.DeviceTaintRuleDriverLabel: driverName,
					failfastplugin.DeviceTaintRuleNodeLabel:   failfastplugin.DeviceTaintRuleNodeLabelValue(attacker.name),
				},
				Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: attacker.name},
			},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driverName), Pool: ptr.To(id.Pool), Device: ptr.To(id.Device)},
				Taint:          resourceapi.DeviceTaint{Key: failfastplugin.DefaultDeviceFaultTaintKey, Value: "flood", Effect: resourceapi.DeviceTaintEffectNoSchedule},
			},
		}
	}
	fat := strings.Repeat("x", 250<<10)
	for name, tc := range map[string]struct {
		change   func(*resourceapi.DeviceTaintRule)
		wantText string
	}{
		"a 250 KiB annotation": {
			change:   func(r *resourceapi.DeviceTaintRule) { r.Annotations["flood.example.com/padding"] = fat },
			wantText: "with annotations other than dra-failfast.io/node",
		},
		"an extra label": {
			change:   func(r *resourceapi.DeviceTaintRule) { r.Labels["flood.example.com/padding"] = "x" },
			wantText: "with labels other than dra-failfast.io/driver and dra-failfast.io/node=" + attacker.name,
		},
		"no node label": {
			change:   func(r *resourceapi.DeviceTaintRule) { delete(r.Labels, failfastplugin.DeviceTaintRuleNodeLabel) },
			wantText: "with labels other than dra-failfast.io/driver and dra-failfast.io/node=" + attacker.name,
		},
		"the victim's node label": {
			change:   func(r *resourceapi.DeviceTaintRule) { r.Labels[failfastplugin.DeviceTaintRuleNodeLabel] = victim.name },
			wantText: "with labels other than dra-failfast.io/driver and dra-failfast.io/node=" + attacker.name,
		},
		"a finalizer": {
			change:   func(r *resourceapi.DeviceTaintRule) { r.Finalizers = []string{"flood.example.com/keep"} },
			wantText: "a DeviceTaintRule with finalizers",
		},
		"owned by the victim's Node": {
			change: func(r *resourceapi.DeviceTaintRule) {
				r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: victim.name, UID: "0"}}
			},
			wantText: "owned by anything but its own Node",
		},
	} {
		r := rule("bounded-" + strings.Trim(nonDeviceName.ReplaceAllString(strings.ToLower(name), "-"), "-"))
		tc.change(r)
		created, err := asAttacker.ResourceV1().DeviceTaintRules().Create(ctx, r, metav1.CreateOptions{})
		switch {
		case err == nil:
			t.Errorf("%s: rule %s admitted, want it denied", name, created.Name)
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantText):
			t.Errorf("%s: got %v, want a denial naming %q", name, err, tc.wantText)
		}
	}

	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "flood-test-victims-pool"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: driverName, NodeName: ptr.To(attacker.name),
			Pool:    resourceapi.ResourcePool{Name: victim.name, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "dev-0"}},
		},
	}
	_, err := asAttacker.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if wantText := "may not write a ResourceSlice of pool '" + victim.name + "'"; err == nil || !strings.Contains(err.Error(), wantText) {
		t.Errorf("a slice of %s naming %s's pool: %v, want a denial naming %q", attacker.name, victim.name, err, wantText)
	}

	start := time.Now()
	for i := range floodRules {
		if _, err := asAttacker.ResourceV1().DeviceTaintRules().Create(ctx, rule(fmt.Sprintf("flood-%03d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("flood rule %d: %v (the policy admits rules in the writer's own pool)", i, err)
		}
	}
	t.Logf("%s wrote %d admitted rules in %.1fs", attacker.name, floodRules, time.Since(start).Seconds())

	hwmBefore := pluginHWM(ctx, t, victim.name)
	restartPlugin(ctx, t, client, victim.name)
	hwm := pluginHWM(ctx, t, victim.name)
	t.Logf("%s's plugin after a restart with %d of %s's rules in the API: VmHWM %d KiB (before: %d KiB, limit %d KiB)", victim.name, floodRules, attacker.name, hwm>>10, hwmBefore>>10, maxPluginHWM>>10)
	if hwm > maxPluginHWM {
		t.Errorf("%s's restarted plugin peaked at %d KiB, want at most %d KiB", victim.name, hwm>>10, maxPluginHWM>>10)
	}

	namespace := newNamespace(t, client, "kind-flood", map[string][]byte{"healthy": nil})
	podName := "after-flood"
	createPod(t, client, podOn(namespace, podName, "healthy", victim.name))
	if _, err := e2eframework.WaitForPod(ctx, client, namespace, podName, 2*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }); err != nil {
		t.Fatalf("pod %s on %s after the flood: not Running: %v", podName, victim.name, err)
	}
	if claim := claimOf(ctx, t, victim, namespace, podName); !claim.Prepared {
		t.Errorf("%s's claim on %s: not prepared: %+v", podName, victim.name, claim)
	}
	checkNoLeaks(t, client, workers, namespace)
}

// pluginHWM returns the peak resident memory (VmHWM) of the test driver's plugin process on node.
func pluginHWM(ctx context.Context, t *testing.T, node string) int64 {
	t.Helper()
	out := strings.TrimSpace(dockerExec(ctx, t, node, `for p in $(pgrep -f -- '[-]-taint-broken'); do awk '/^VmHWM/ {print $2}' /proc/$p/status; done`))
	kib, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("VmHWM of the test driver's plugin on %s: %q: %v", node, out, err)
	}
	return kib << 10
}

// restartPlugin deletes the test driver's plugin pod on node and waits until its replacement is
// ready: it has read its node's rules by then (the driver's readiness waits for that).
func restartPlugin(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	pods := client.CoreV1().Pods(testDriverNamespace)
	onNode := metav1.ListOptions{LabelSelector: testDriverPluginLabel, FieldSelector: "spec.nodeName=" + node}
	list, err := pods.List(ctx, onNode)
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the test driver's plugin pod on %s: %v (%d pods)", node, err, len(list.Items))
	}
	old := list.Items[0]
	if err := pods.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, false, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, onNode)
		if err != nil {
			return false, nil
		}
		for _, pod := range list.Items {
			if pod.UID == old.UID || pod.DeletionTimestamp != nil {
				continue
			}
			for _, status := range pod.Status.ContainerStatuses {
				if status.RestartCount > 0 {
					return false, fmt.Errorf("the new plugin pod %s restarted %d times (last: %+v)", pod.Name, status.RestartCount, status.LastTerminationState.Terminated)
				}
			}
			for _, condition := range pod.Status.Conditions {
				if condition.Type == v1.PodReady && condition.Status == v1.ConditionTrue {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the test driver's plugin on %s after a restart: %v", node, err)
	}
}

// deleteFlood deletes the rules the attacker's plugin wrote in this test.
func deleteFlood(ctx context.Context, t *testing.T, client kubernetes.Interface, attacker string) {
	rules, err := client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{
		LabelSelector: failfastplugin.DeviceTaintRuleNodeLabel + "=" + failfastplugin.DeviceTaintRuleNodeLabelValue(attacker),
	})
	if err != nil {
		t.Errorf("listing the flood's rules: %v", err)
		return
	}
	for _, rule := range rules.Items {
		if rule.Spec.Taint.Value != "flood" {
			continue
		}
		if err := client.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", rule.Name, err)
		}
	}
}
