// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// Bounds of what reaches the API from a driver (pkg/kubelet/cm/dra).
const (
	maxStatusMessage = 1024
	maxEventMessage  = 1024
)

// namespaceFor makes a namespace for the test (named after it) and deletes it
// at the end.
func namespaceFor(t *testing.T) string {
	t.Helper()
	return namespaceWithLabels(t, nil)
}

// namespaceWithLabels is namespaceFor with labels on the namespace.
func namespaceWithLabels(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := t.Name()
	if mode := labels[e2eframework.WebhookNamespaceLabel]; mode != "" {
		name += "-" + mode
	}
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ",", "", " ", "-").Replace(name))
	if len(ns) > 63 {
		ns = strings.TrimRight(ns[:63], "-")
	}
	if err := e2eframework.CreateNamespaceWithLabels(t.Context(), client, ns, labels); err != nil {
		t.Fatalf("namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return ns
}

// createTemplate creates the claim template name in ns for one device of
// driver d, with parameters as its opaque config (nil: none).
func createTemplate(t *testing.T, ns, name string, d *e2eframework.Driver, parameters []byte) {
	t.Helper()
	tmpl := e2eframework.ClaimTemplateFor(ns, name, d.DeviceClass(), d.Name(), parameters)
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("claim template: %v", err)
	}
}

// behavior is shorthand for the opaque parameters of spec.
func behavior(spec testdriver.BehaviorSpec) []byte { return spec.Parameters() }

// createPodWith creates pod ns/name whose claims come from the templates
// (one pod claim per template, named like it).
// podSpecWith is the spec of createPodWith: one claim per template, named after it.
func podSpecWith(restartPolicy v1.RestartPolicy, templates ...string) v1.PodSpec {
	spec := e2eframework.PodSpec(templates[0], restartPolicy)
	spec.ResourceClaims, spec.Containers[0].Resources.Claims = nil, nil
	for _, tmpl := range templates {
		spec.ResourceClaims = append(spec.ResourceClaims, v1.PodResourceClaim{Name: tmpl, ResourceClaimTemplateName: ptr.To(tmpl)})
		spec.Containers[0].Resources.Claims = append(spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: tmpl})
	}
	return spec
}

func createPodWith(t *testing.T, ns, name string, restartPolicy v1.RestartPolicy, templates ...string) {
	t.Helper()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: podSpecWith(restartPolicy, templates...)}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
}

// statsOf returns driver d's counters for the claim that pod ns/pod got
// from its template (named "<pod>-<template>-<suffix>"; template "" matches any).
func statsOf(t *testing.T, d *e2eframework.Driver, ns, pod, template string) (string, testdriver.ClaimStats) {
	t.Helper()
	stats, err := d.Client.Stats(t.Context())
	if err != nil {
		t.Fatalf("driver %s stats: %v", d.Name(), err)
	}
	for uid, claim := range stats.Claims {
		if claim.Namespace == ns && strings.HasPrefix(claim.Name, pod+"-"+template) {
			return uid, claim
		}
	}
	return "", testdriver.ClaimStats{}
}

// waitForCalls waits until driver d saw at least prepares NodePrepareResources
// calls for the claim of pod ns/pod.
func waitForCalls(t *testing.T, d *e2eframework.Driver, ns, pod string, prepares int, timeout time.Duration) testdriver.ClaimStats {
	t.Helper()
	var stats testdriver.ClaimStats
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, stats = statsOf(t, d, ns, pod, "")
		return stats.PrepareCalls >= prepares, nil
	})
	if err != nil {
		t.Fatalf("driver %s: %d prepare calls for pod %s/%s within %v, want %d: %+v", d.Name(), stats.PrepareCalls, ns, pod, timeout, prepares, stats)
	}
	return stats
}

func getPod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return pod
}

func podFailed(p *v1.Pod) bool  { return p.Status.Phase == v1.PodFailed }
func podRunning(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }

// failedForDRA tells whether the pod was failed for a permanent DRA failure.
func failedForDRA(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == failfastdra.PodFailedReason
}

// expectNotFailed watches pod ns/name for d and fails the test if it ever
// reaches phase Failed (the fork fails a pod within a second or two of the
// driver's answer).
func expectNotFailed(t *testing.T, ns, name string, d time.Duration) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		pod = getPod(t, ns, name)
		if podFailed(pod) {
			t.Fatalf("pod %s/%s wrongly failed: %s: %s", ns, name, pod.Status.Reason, pod.Status.Message)
		}
		select {
		case <-t.Context().Done():
			return pod
		case <-time.After(250 * time.Millisecond):
		}
	}
	return pod
}

// waitFor waits for pod ns/name to satisfy done.
func waitFor(t *testing.T, ns, name string, timeout time.Duration, what string, done func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	pod, err := e2eframework.WaitForPod(t.Context(), client, ns, name, timeout, done)
	if err != nil {
		var status any = "no pod"
		if pod != nil {
			status = pod.Status
		}
		t.Fatalf("pod %s/%s not %s within %v: %v; status %+v", ns, name, what, timeout, err, status)
	}
	return pod
}

// checkFailedPod checks what a user sees of a pod failed for a permanent DRA
// failure, with any kubelet that implements KEP-5322: the reason, a message
// holding words (the driver's words and the claim's name, which every such
// kubelet passes on), the condition, no container started, an Event. The
// fork's kubelet also bounds the message, keeps never-started containers
// waiting with the DRA reason, and frames the message its own way
// (checkForkMessage); the upstream-shaped series' kubelet (make test-series)
// writes today's text behind a "permanent failure: " marker instead, and leaves the
// containers as upstream's TerminatePod leaves them (docs/upstream.md).
func checkFailedPod(t *testing.T, pod *v1.Pod, words ...string) {
	t.Helper()
	if pod.Status.Reason != failfastdra.PodFailedReason {
		t.Errorf("reason = %q, want %q", pod.Status.Reason, failfastdra.PodFailedReason)
	}
	checkText(t, "status message", pod.Status.Message, maxStatusMessage)
	if !forkKubelet && !strings.Contains(pod.Status.Message, seriesMessageMarker) {
		t.Errorf("message %q does not contain %q", pod.Status.Message, seriesMessageMarker)
	}
	for _, want := range words {
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
		// Who wrote the status last, to tell a kubelet window from another writer.
		var writers []string
		for _, f := range pod.ManagedFields {
			writers = append(writers, fmt.Sprintf("%s/%s@%v", f.Manager, f.Subresource, f.Time))
		}
		t.Errorf("no %s=True condition in %+v; resourceVersion %s, status written by %v; status %+v",
			failfastdra.PodConditionType, pod.Status.Conditions, pod.ResourceVersion, writers, pod.Status)
	}
	if started := e2eframework.StartedContainers(pod); len(started) > 0 {
		t.Errorf("containers started: %v", started)
	}
	// Never-started containers stay waiting and name the cause: no exit
	// code, no year-1 start time for kubectl describe to print.
	for _, c := range pod.Status.ContainerStatuses {
		if !forkKubelet {
			t.Logf("container %s: %+v (%s)", c.Name, c.State, kubeletVersion)
		} else if c.State.Waiting == nil || c.State.Waiting.Reason != failfastdra.PodFailedReason || c.State.Terminated != nil {
			t.Errorf("container %s state %+v, want waiting with reason %s", c.Name, c.State, failfastdra.PodFailedReason)
		}
	}
	events := eventsOf(t, pod.Namespace, pod.Name, failfastdra.PodFailedReason)
	if len(events) == 0 {
		t.Errorf("no %s event for pod %s/%s", failfastdra.PodFailedReason, pod.Namespace, pod.Name)
	}
}

// seriesMessageMarker is in the message of a pod failed by the
// upstream-shaped series' kubelet: the permanent marker, then today's text
// of a failed NodePrepareResources (upstream/patches/0004).
const seriesMessageMarker = "permanent failure: NodePrepareResources failed for ResourceClaim "

// checkForkMessage checks the parts of a failed pod's message that only the
// fork's kubelet writes (the failing drivers named, claims as
// namespace/name); nothing with another kubelet.
func checkForkMessage(t *testing.T, pod *v1.Pod, parts ...string) {
	t.Helper()
	if !forkKubelet {
		return
	}
	for _, want := range parts {
		if !strings.Contains(pod.Status.Message, want) {
			t.Errorf("message %q does not contain %q", pod.Status.Message, want)
		}
	}
}

// eventsOf waits briefly for events of the object with reason and returns them
// (events are written asynchronously), their texts checked to be bounded.
func eventsOf(t *testing.T, ns, name, reason string) []v1.Event {
	t.Helper()
	var events []v1.Event
	_ = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, nil
		}
		events = list.Items
		return len(events) > 0, nil
	})
	for _, e := range events {
		checkText(t, "event "+e.Reason, e.Message, maxEventMessage)
	}
	return events
}

// checkText checks a text that came (in part) from a driver: bounded and
// printable. The bound is the fork's message budget, which the
// upstream-shaped series does not carry (docs/upstream.md): with its kubelet
// the text's length is only logged.
func checkText(t *testing.T, what, text string, limit int) {
	t.Helper()
	if !forkKubelet {
		t.Logf("%s: %d bytes (%s: not bounded)", what, len(text), kubeletVersion)
		return
	}
	if len(text) > limit {
		t.Errorf("%s is %d bytes, limit %d", what, len(text), limit)
	}
	if i := strings.IndexFunc(text, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }); i >= 0 {
		t.Errorf("%s has a control or non-printable character at byte %d: %q", what, i, text)
	}
}

// deleteAndCheckNoLeaks deletes every pod of ns and checks that nothing
// stays prepared: no driver holds a prepared claim of ns, no CDI spec of
// such a claim is left, and no ResourceClaim of ns is reserved any more. It
// returns the number of leaks found (also reported as errors).
func deleteAndCheckNoLeaks(t *testing.T, ns string, drivers ...*e2eframework.Driver) int {
	t.Helper()
	ctx := t.Context()
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("delete pods of %s: %v", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods of %s not gone: %v", ns, err)
	}
	var leaks []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		leaks = leaksIn(ctx, ns, drivers)
		return len(leaks) == 0, nil
	})
	for _, leak := range leaks {
		t.Errorf("leak after deleting the pods of %s: %s", ns, leak)
	}
	if err == nil {
		t.Logf("namespace %s: pods deleted, 0 leaks (prepared claims, CDI specs, reservations)", ns)
	}
	return len(leaks)
}

func leaksIn(ctx context.Context, ns string, drivers []*e2eframework.Driver) []string {
	var leaks []string
	for _, d := range drivers {
		if !d.Running() {
			continue
		}
		stats, err := d.Client.Stats(ctx)
		if err != nil {
			return []string{fmt.Sprintf("driver %s stats: %v", d.Name(), err)}
		}
		for uid, claim := range stats.Claims {
			if claim.Namespace != ns {
				continue
			}
			if claim.Prepared {
				leaks = append(leaks, fmt.Sprintf("driver %s still has claim %s/%s prepared", d.Name(), ns, claim.Name))
			}
			if _, err := os.Stat(testdriver.CDISpecPath(cluster.CDISpecDir(), d.Name(), types.UID(uid))); !errors.Is(err, os.ErrNotExist) {
				leaks = append(leaks, fmt.Sprintf("CDI spec of claim %s/%s of driver %s is left (%v)", ns, claim.Name, d.Name(), err))
			}
		}
	}
	claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return append(leaks, fmt.Sprintf("list claims: %v", err))
	}
	if claims != nil {
		for _, claim := range claims.Items {
			if len(claim.Status.ReservedFor) > 0 {
				leaks = append(leaks, fmt.Sprintf("claim %s/%s still reserved for %v", ns, claim.Name, claim.Status.ReservedFor))
			}
		}
	}
	return leaks
}

// startDriver starts a test driver of its own for a test, with its
// DeviceClass, and stops it at the end.
func startDriver(t *testing.T, opts e2eframework.DriverOptions) *e2eframework.Driver {
	t.Helper()
	d, err := e2eframework.StartDriver(t.Context(), cluster, opts)
	if err != nil {
		t.Fatalf("start driver %s: %v", opts.DriverName, err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Logf("stop driver %s: %v", d.Name(), err)
		}
	})
	if opts.TaintBroken {
		deleteTaintRulesAtEnd(t, d.Name())
	}
	if _, err := e2eframework.EnsureDeviceClassFor(t.Context(), client, d.Name()); err != nil {
		t.Fatal(err)
	}
	return d
}

// deleteTaintRulesAtEnd deletes the device fault rules of driver when the
// test ends: they outlive the driver process, and a later test (or run, on
// a kept cluster) with the same driver would find its devices tainted.
func deleteTaintRulesAtEnd(t *testing.T, driver string) {
	t.Cleanup(func() {
		err := deleteDeviceTaintRules(context.WithoutCancel(t.Context()), failfastplugin.DeviceTaintRuleDriverLabel+"="+driver)
		if err != nil {
			t.Errorf("delete the DeviceTaintRules of %s: %v", driver, err)
		}
	})
}

// kubeletMetric reads a kubelet counter, 0 when it has no sample yet.
func kubeletMetric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, err := e2eframework.KubeletMetric(t.Context(), cluster, name, labels)
	if err != nil && !errors.Is(err, e2eframework.ErrMetricNotFound) {
		t.Fatalf("kubelet metric %s: %v", name, err)
	}
	return v
}

// restartKubelet restarts the kubelet with the gate set to enabled and waits
// until every long-lived driver has its devices published again.
func restartKubelet(ctx context.Context, t *testing.T, enabled bool, extra ...*e2eframework.Driver) {
	t.Helper()
	replaceKubelet(ctx, t, cluster.KubeletPath(), map[string]bool{gate: enabled}, extra...)
}

var kubeletMu sync.Mutex

// replaceKubelet runs kubelet binary with featureGates instead of the current
// one and waits until the drivers have their devices published again.
func replaceKubelet(ctx context.Context, t *testing.T, binary string, featureGates map[string]bool, extra ...*e2eframework.Driver) {
	t.Helper()
	replaceKubeletAfter(ctx, t, binary, featureGates, nil, extra...)
}

// replaceKubeletAfter is replaceKubelet that runs whileStopped while no
// kubelet runs.
func replaceKubeletAfter(ctx context.Context, t *testing.T, binary string, featureGates map[string]bool, whileStopped func(context.Context) error, extra ...*e2eframework.Driver) {
	t.Helper()
	kubeletMu.Lock()
	defer kubeletMu.Unlock()
	start := time.Now()
	drivers := append([]*e2eframework.Driver{driver}, extra...)
	if err := e2eframework.ReplaceKubeletAfter(ctx, cluster, binary, featureGates, whileStopped, drivers...); err != nil {
		t.Fatalf("run kubelet %s with %v: %v", binary, featureGates, err)
	}
	t.Logf("kubelet %s running with %v, devices published again %.1fs after the restart began", filepath.Base(binary), featureGates, time.Since(start).Seconds())
}

// createConditionJob creates e2eframework.ConditionJob in ns: it fails on the
// DRA failure's condition, rules come first.
func createConditionJob(t *testing.T, ns, name, template string, rules ...batchv1.PodFailurePolicyRule) {
	t.Helper()
	if _, err := client.BatchV1().Jobs(ns).Create(t.Context(), e2eframework.ConditionJob(ns, name, template, rules...), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job %s: %v", name, err)
	}
}

// jobFailedReason waits up to timeout for Job ns/name to fail and returns
// the reason of its Failed condition, "" if it did not fail.
func jobFailedReason(t *testing.T, ns, name string, timeout time.Duration) string {
	t.Helper()
	return e2eframework.JobFailedReason(t.Context(), client, ns, name, timeout)
}

// jobPods counts the pods Job ns/name created.
func jobPods(t *testing.T, ns, name string) int {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}
