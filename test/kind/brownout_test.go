// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// TestDeviceFaultThroughBrownout: the test driver's plugin on the fork's worker loses the API
// server (its own client's requests fail, POST /brownout; the kubelet keeps its own) while the
// device of a new pod is broken. The pod still fails once, its message saying the device was not
// tainted; no DeviceTaintRule exists during the brownout. Once the API server is reachable again,
// the device gets its rule without a new fault (the library's background retry), and the time
// from recovery to the rule is logged.
func TestDeviceFaultThroughBrownout(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	w := workers[0] // the fork: the pod fails
	namespace := newNamespace(t, client, "kind-brownout", map[string][]byte{"healthy": nil})
	_, published, err := e2eframework.NodeSlices(ctx, client, testdriver.DefaultDriverName, w.name)
	if err != nil || published == 0 {
		t.Fatalf("the test driver's devices on %s: %v (%d)", w.name, err, published)
	}
	// Every device broken: whichever the scheduler allocates faults.
	var devices []string
	for i := range published {
		devices = append(devices, testdriver.DeviceName(i))
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		if err := w.driver.SetBrownout(ctx, false); err != nil {
			t.Errorf("ending the brownout: %v", err)
		}
		for _, device := range devices {
			// Clears the fault and deletes its rule.
			if err := w.driver.SetBroken(ctx, device, false); err != nil {
				t.Errorf("repairing %s: %v", device, err)
			}
		}
	})
	for _, device := range devices {
		if err := w.driver.SetBroken(ctx, device, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.driver.SetBrownout(ctx, true); err != nil {
		t.Fatal(err)
	}
	const podName = "faults-in-brownout"
	createPod(t, client, podOn(namespace, podName, "healthy", w.name))
	pod, err := e2eframework.WaitForPod(ctx, client, namespace, podName, 2*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if err != nil {
		t.Fatalf("pod %s on %s: not Failed: %v", podName, w, err)
	}
	if !strings.Contains(pod.Status.Message, "not tainted") {
		t.Errorf("pod %s: message %q, want it to say the device was not tainted", podName, pod.Status.Message)
	}
	claim := claimOf(ctx, t, w, namespace, podName)
	if len(claim.Devices) != 1 || claim.PrepareCalls != 1 {
		t.Fatalf("claim of %s: %+v, want one prepare call for one device", podName, claim)
	}
	device := claim.Devices[0]
	ruleOf := func(ctx context.Context) (bool, error) {
		name := failfastplugin.DeviceTaintRuleName(testdriver.DefaultDriverName, w.name, failfastplugin.DeviceID{Pool: w.name, Device: device})
		_, err := client.ResourceV1().DeviceTaintRules().Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	}
	// A few of the retries fail meanwhile (1 s, 2 s, 4 s, 8 s after the fault).
	time.Sleep(10 * time.Second)
	if tainted, _ := ruleOf(ctx); tainted {
		t.Fatalf("%s's %s has a DeviceTaintRule during the brownout: the brownout did not hold", w.name, device)
	}
	if err := w.driver.SetBrownout(ctx, false); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, ruleOf); err != nil {
		t.Fatalf("%s's %s: no DeviceTaintRule 3 min after the API server came back: %v", w.name, device, err)
	}
	t.Logf("%s's %s tainted %.1fs after the API server was reachable again, without a new fault (prepare calls: %d)",
		w.name, device, time.Since(recovered).Seconds(), claimOf(ctx, t, w, namespace, podName).PrepareCalls)
}
