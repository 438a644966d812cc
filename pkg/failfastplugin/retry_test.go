// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/failfastplugintest"
)

// brownout makes verb on resource of client fail with ServiceUnavailable
// while the returned flag is set (it starts set).
func brownout(client *failfastplugintest.Clientset, verb, resource string) *atomic.Bool {
	down := &atomic.Bool{}
	down.Store(true)
	client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, apierrors.NewServiceUnavailable("brownout")
		}
		return false, nil, nil
	})
	return down
}

// retryFaults returns loaded DeviceFaults of driverName on client whose
// retries wait 10 ms at first and 50 ms at most.
func retryFaults(t *testing.T, client *failfastplugintest.Clientset, driverName string) *failfastplugin.DeviceFaults {
	t.Helper()
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{WaitTimeout: time.Second}, client, driverName)
	faults.SetRetryBackoff(10*time.Millisecond, 50*time.Millisecond)
	return faults
}

func retries(t *testing.T, driverName string) map[string]float64 {
	t.Helper()
	return counterValues(t, failfastplugin.DeviceTaintRetriesMetric, driverName, "result")
}

// waitForRule waits until device has a rule in the API, and returns it.
func waitForRule(t *testing.T, client *failfastplugintest.Clientset, device failfastplugin.DeviceID) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(rulesInAPI(t, client)[device]) == 1, nil
	})
	if err != nil {
		t.Fatalf("no DeviceTaintRule for %s: %v", device, err)
	}
}

// TestTaintRetried: a fault whose rule the API server did not store within
// the wait (a brownout: creates fail, or the Node cannot be read) still
// fails its claim at once, saying the device is not tainted; the rule is
// written in the background as soon as the API server answers again,
// without a new fault, owned by the Node, and counted.
func TestTaintRetried(t *testing.T) {
	for name, verb := range map[string]struct{ verb, resource, wantText string }{
		"creates fail":        {"create", "devicetaintrules", "create DeviceTaintRule: brownout"},
		"Node cannot be read": {"get", "nodes", "read Node node-1, the owner of the rule: brownout"},
	} {
		t.Run(name, func(t *testing.T) {
			driverName := strings.ReplaceAll(strings.ToLower(name), " ", "-") + ".retry.dra-failfast.test"
			client := newFaultAPI(t)
			faults := retryFaults(t, client, driverName)
			before := retries(t, driverName) // the counters are the process's
			down := brownout(client, verb.verb, verb.resource)
			broken := dev(faultNode, "dev-0")
			err := prepareErr(t, faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}}), "broken")
			if !failfastplugin.IsPermanent(err) || !strings.Contains(err.Error(), "not tainted: "+verb.wantText) {
				t.Fatalf("claim: %v, want permanent, saying %q", err, verb.wantText)
			}
			if got := faults.PendingTaints(); !reflect.DeepEqual(got, []failfastplugin.DeviceID{broken}) {
				t.Errorf("PendingTaints = %v", got)
			}
			// A few retries fail while the brownout lasts.
			if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return retries(t, driverName)[failfastplugin.RetryFailed]-before[failfastplugin.RetryFailed] >= 2, nil
			}); err != nil {
				t.Fatalf("retries during the brownout: %v", retries(t, driverName))
			}
			if got := rulesInAPI(t, client); len(got) != 0 {
				t.Fatalf("rules during the brownout: %v", got)
			}
			down.Store(false)
			waitForRule(t, client, broken)
			rule := rulesInAPI(t, client)[broken][0]
			if owners := rule.OwnerReferences; len(owners) != 1 || owners[0].UID != "node-1-uid" {
				t.Errorf("owners %+v, want the Node", owners)
			}
			if rule.Spec.Taint.Value != "device-fault" || rule.Spec.Taint.Key != failfastplugin.DefaultDeviceFaultTaintKey {
				t.Errorf("taint %+v", rule.Spec.Taint)
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return len(faults.PendingTaints()) == 0 && retries(t, driverName)[failfastplugin.RetryTainted]-before[failfastplugin.RetryTainted] == 1, nil
			}); err != nil {
				t.Errorf("after the brownout: pending %v, retries %v", faults.PendingTaints(), retries(t, driverName))
			}
			if got := faults.TaintedDevices(); !reflect.DeepEqual(got, []failfastplugin.DeviceID{broken}) {
				t.Errorf("TaintedDevices = %v", got)
			}
		})
	}
}

// TestClearedFaultNotRetried: a fault cleared while its taint waits for a
// retry is never tainted.
func TestClearedFaultNotRetried(t *testing.T) {
	const driverName = "cleared.retry.dra-failfast.test"
	client := newFaultAPI(t)
	faults := retryFaults(t, client, driverName)
	down := brownout(client, "create", "devicetaintrules")
	broken := dev(faultNode, "dev-0")
	if err := prepareErr(t, faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}}), "broken"); !strings.Contains(err.Error(), "not tainted") {
		t.Fatalf("claim: %v", err)
	}
	if err := faults.ClearDeviceFault(t.Context(), broken); err != nil {
		t.Fatal(err)
	}
	if got := faults.PendingTaints(); len(got) != 0 {
		t.Errorf("PendingTaints after ClearDeviceFault = %v", got)
	}
	down.Store(false)
	// Many times the longest wait between two retries.
	time.Sleep(500 * time.Millisecond)
	if got := rulesInAPI(t, client); len(got) != 0 {
		t.Errorf("rules after the fault was cleared: %v", got)
	}
}

// TestRetryQueueBounded: the faults waiting for a retry are bounded; the
// ones beyond are counted as dropped, and their claims still fail.
func TestRetryQueueBounded(t *testing.T) {
	const driverName = "bounded.retry.dra-failfast.test"
	client := newFaultAPI(t)
	faults := retryFaults(t, client, driverName)
	faults.SetRetryBackoff(time.Hour, time.Hour) // nothing retried during the test
	before := retries(t, driverName)[failfastplugin.RetryDropped]
	brownout(client, "create", "devicetaintrules")
	devices := make([]failfastplugin.DeviceID, 1030)
	for i := range devices {
		devices[i] = dev(faultNode, fmt.Sprintf("dev-%04d", i))
	}
	if err := prepareErr(t, faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": devices}}), "broken"); !failfastplugin.IsPermanent(err) {
		t.Fatalf("claim: %v", err)
	}
	if got := len(faults.PendingTaints()); got != 1024 {
		t.Errorf("%d faults wait for a retry, want 1024", got)
	}
	if got := retries(t, driverName)[failfastplugin.RetryDropped] - before; got != 6 {
		t.Errorf("%v dropped, want 6", got)
	}
}

// TestWritesRespectTheirContext: an API server that holds a delete does not
// hold ClearDeviceFault beyond WaitTimeout, even with a context that never
// ends, nor a fault that waits for the write lock the delete holds: the
// fault fails its claim within its wait and is retried.
func TestWritesRespectTheirContext(t *testing.T) {
	const driverName = "lock.retry.dra-failfast.test"
	client := newFaultAPI(t)
	faults := startFaults(t, failfastplugin.DeviceFaultConfig{WaitTimeout: 300 * time.Millisecond}, client, driverName)
	faults.SetRetryBackoff(10*time.Millisecond, 50*time.Millisecond)
	// Two rules to delete: each delete may take a WaitTimeout, so the
	// clear holds the lock longer than the fault's wait.
	held, held2, other := dev(faultNode, "dev-0"), dev(faultNode, "dev-2"), dev(faultNode, "dev-1")
	prepare := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"held": {held, held2}, "other": {other}}})
	if err := prepareErr(t, prepare, "held"); strings.Contains(err.Error(), "not tainted") {
		t.Fatal(err)
	}
	release := make(chan struct{})
	client.OnRequest(func(method, _ string) {
		if method == "DELETE" {
			<-release
		}
	})
	defer close(release)
	cleared := make(chan error, 1)
	start := time.Now()
	go func() { cleared <- faults.ClearDeviceFault(context.Background(), held, held2) }()
	// The delete holds the write lock now (or soon: the fault waits for
	// it either way).
	time.Sleep(50 * time.Millisecond)
	err := prepareErr(t, prepare, "other")
	if !failfastplugin.IsPermanent(err) || !strings.Contains(err.Error(), "not tainted") {
		t.Errorf("fault while the lock is held: %v, want permanent, not tainted", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the fault took %v, its wait is 300ms", elapsed)
	}
	select {
	case err := <-cleared:
		if err == nil {
			t.Errorf("ClearDeviceFault with a held delete: no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ClearDeviceFault with context.Background still waits for a held delete after 10s, its WaitTimeout is 300ms")
	}
	client.OnRequest(nil)
	// Retried once the lock is free.
	waitForRule(t, client, other)
}

// TestRuleOwnerReadAtEachFault: the Node is read at every fault: a Node
// deleted and created again (another UID) owns the rules written after it.
func TestRuleOwnerReadAtEachFault(t *testing.T) {
	const driverName = "owner.retry.dra-failfast.test"
	client := newFaultAPI(t)
	faults := retryFaults(t, client, driverName)
	first, second := dev(faultNode, "dev-0"), dev(faultNode, "dev-1")
	prepare := faults.Wrap(faultPlugin{faults: map[string][]failfastplugin.DeviceID{"first": {first}, "second": {second}}})
	if err := prepareErr(t, prepare, "first"); strings.Contains(err.Error(), "not tainted") {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(t.Context(), faultNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: faultNode, UID: "node-1-uid-2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := prepareErr(t, prepare, "second"); strings.Contains(err.Error(), "not tainted") {
		t.Fatal(err)
	}
	rules := rulesInAPI(t, client)
	for device, want := range map[failfastplugin.DeviceID]types.UID{first: "node-1-uid", second: "node-1-uid-2"} {
		if owners := rules[device][0].OwnerReferences; len(owners) != 1 || owners[0].UID != want {
			t.Errorf("rule of %s: owners %+v, want UID %s", device, owners, want)
		}
	}
}

// TestDeviceTaintRuleNodeLabelValue: the node label's value is a label value
// for every node name, the name itself when it fits, and never another
// node's whole name.
func TestDeviceTaintRuleNodeLabelValue(t *testing.T) {
	long := strings.Repeat("a", 60) + "-.b" + strings.Repeat("c", 100) // 61st byte a '-'
	for node, want := range map[string]string{
		"node-1":                  "node-1",
		strings.Repeat("n", 63):   strings.Repeat("n", 63),
		strings.Repeat("n", 64):   strings.Repeat("n", 61) + "_n",
		long:                      long[:61] + "_n",
		"kind-worker.example.com": "kind-worker.example.com",
	} {
		got := failfastplugin.DeviceTaintRuleNodeLabelValue(node)
		if got != want {
			t.Errorf("DeviceTaintRuleNodeLabelValue(%d bytes) = %q, want %q", len(node), got, want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("DeviceTaintRuleNodeLabelValue(%q) = %q is no label value: %v", node, got, errs)
		}
	}
}
