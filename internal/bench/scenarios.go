// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

// permanent is the opaque config of a claim the driver fails permanently.
var permanent = testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "bench: the device refuses this configuration"}.Parameters()

// invalidConfig is opaque config the driver cannot decode ("Sometimes" is no
// prepare value): what a Deployment with a mistyped claim template carries.
var invalidConfig = []byte(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`)

// podTimeout bounds the wait for one pod to reach the phase a scenario
// expects.
const podTimeout = 3 * time.Minute

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// podNames returns prefix-000 ... for n pods, as createPods names them.
func podNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return names
}

// timeToFailed (scenario 1, fork): permanently failing pods one after
// another; for each, the driver's answer -> Failed and create -> Failed.
func (e *env) timeToFailed(ctx context.Context) (run TimeToFailedRun, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, "time-to-failed", permanent)
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	for i := range e.sizes.FailingPods {
		name := fmt.Sprintf("fail-%03d", i)
		sent, err := e.createPod(ctx, ns, name)
		if err != nil {
			return run, err
		}
		if err := w.wait(ctx, []string{name}, v1.PodFailed, podTimeout); err != nil {
			return run, err
		}
		failed, _ := w.at(name, v1.PodFailed)
		claims, err := e.claimsOf(ctx, ns, []string{name})
		if err != nil {
			return run, err
		}
		claim, ok := claims[name]
		if !ok || claim.LastPrepareAnswered == nil || !claim.Permanent {
			return run, fmt.Errorf("pod %s/%s Failed, but the driver has no permanent answer for its claim: %+v", ns, name, claim)
		}
		run.DriverToFailedMs = append(run.DriverToFailedMs, milliseconds(failed.Sub(*claim.LastPrepareAnswered)))
		run.ApplyToFailedMs = append(run.ApplyToFailedMs, milliseconds(failed.Sub(sent)))
	}
	run.DriverToFailed, run.ApplyToFailed = quantilesOf(run.DriverToFailedMs), quantilesOf(run.ApplyToFailedMs)
	e.logf("time to Failed (%d pods): driver answer -> Failed p50 %.0f ms p99 %.0f ms; create -> Failed p50 %.0f ms",
		run.DriverToFailed.N, run.DriverToFailed.P50, run.DriverToFailed.P99, run.ApplyToFailed.P50)
	return run, nil
}

// driverCalls (scenario 2): permanently failing pods created at once,
// watched for the calls window; every driver call of their claims.
func (e *env) driverCallsOverWindow(ctx context.Context) (run CallsRun, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, "calls", permanent)
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	start := time.Now()
	sent, err := e.createPods(ctx, ns, "calls", e.sizes.CallsPods)
	if err != nil {
		return run, err
	}
	names := podNames("calls", e.sizes.CallsPods)
	if err := sleepReporting(ctx, start.Add(e.sizes.CallsWindow), time.Minute, func() {
		prepare, unprepare, _ := e.driverCalls(ctx, ns)
		e.logf("driver calls on %s: %d prepare, %d unprepare for %d pods so far", e.current, prepare, unprepare, len(names))
	}); err != nil {
		return run, err
	}
	run.WindowSeconds = e.sizes.CallsWindow.Seconds()
	claims, err := e.claimsOf(ctx, ns, names)
	if err != nil {
		return run, err
	}
	var prepares, unprepares, intervals []float64
	for _, name := range names {
		claim := claims[name]
		pod := PodCalls{Prepare: claim.PrepareCalls, Unprepare: claim.UnprepareCalls}
		_, pod.Failed = w.at(name, v1.PodFailed)
		for _, t := range claim.PrepareTimes {
			pod.PrepareAt = append(pod.PrepareAt, t.Sub(sent[name]).Seconds())
		}
		for _, t := range claim.UnprepareTimes {
			pod.UnprepareAt = append(pod.UnprepareAt, t.Sub(sent[name]).Seconds())
		}
		intervals = append(intervals, retryIntervals(claim.PrepareTimes)...)
		if pod.Failed {
			run.Failed++
		}
		prepares, unprepares = append(prepares, float64(pod.Prepare)), append(unprepares, float64(pod.Unprepare))
		run.Pods = append(run.Pods, pod)
	}
	run.PreparePerPod, run.UnpreparePerPod = median(prepares), median(unprepares)
	run.RetryIntervalMedian, run.RetryInterval = median(intervals), spreadOf(intervals)
	e.logf("driver calls per pod over %s on %s: %s prepare, %s unprepare (median); retry interval median %s s; %d of %d Failed",
		e.sizes.CallsWindow, e.current, formatNumber(run.PreparePerPod, 1), formatNumber(run.UnpreparePerPod, 1), formatNumber(run.RetryIntervalMedian, 1), run.Failed, len(names))
	return run, nil
}

// storm (scenario 3): many permanently failing pods created at once; what
// the kubelet spends over the storm window.
func (e *env) storm(ctx context.Context) (run StormRun, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, "storm", permanent)
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	before, err := e.sampleKubelet(ctx)
	if err != nil {
		return run, err
	}
	start := time.Now()
	if _, err := e.createPods(ctx, ns, "storm", e.sizes.StormPods); err != nil {
		return run, err
	}
	// The kubelet's spending over time: a failing pod costs the fork once,
	// the stock kubelet at every retry.
	var timeline []StormSample
	sample := func() error {
		now, err := e.sampleKubelet(ctx)
		if err != nil {
			return err
		}
		failed, _ := w.count(v1.PodFailed)
		timeline = append(timeline, StormSample{Seconds: time.Since(start).Seconds(), Failed: failed,
			KubeletCPUSeconds: now.cpuSeconds - before.cpuSeconds, KubeletAPIRequests: now.apiRequests - before.apiRequests})
		return nil
	}
	var sampleErr error
	if err := sleepReporting(ctx, start.Add(e.sizes.StormWindow), e.sizes.StormWindow/10, func() {
		sampleErr = errors.Join(sampleErr, sample())
		failed, seen := w.count(v1.PodFailed)
		e.logf("storm on %s: %d of %d pods Failed", e.current, failed, seen)
	}); err != nil {
		return run, err
	}
	if err := errors.Join(sampleErr, sample()); err != nil {
		return run, err
	}
	end := timeline[len(timeline)-1]
	run = StormRun{Pods: e.sizes.StormPods, WindowSeconds: e.sizes.StormWindow.Seconds(), AllFailedSeconds: NaN,
		KubeletCPUSeconds: end.KubeletCPUSeconds, KubeletAPIRequests: end.KubeletAPIRequests, Timeline: timeline}
	run.AllBoundSeconds = NaN
	var last, lastBound time.Time
	var boundToFailed []float64
	bound := 0
	for _, name := range podNames("storm", e.sizes.StormPods) {
		b, isBound := w.boundAt(name)
		if isBound {
			bound++
			if b.After(lastBound) {
				lastBound = b
			}
		}
		if t, ok := w.at(name, v1.PodFailed); ok {
			run.Failed++
			if t.After(last) {
				last = t
			}
			if isBound {
				boundToFailed = append(boundToFailed, float64(t.Sub(b).Microseconds())/1000)
			}
		}
	}
	if run.Failed == run.Pods {
		run.AllFailedSeconds = Number(last.Sub(start).Seconds())
	}
	if bound == run.Pods {
		run.AllBoundSeconds = Number(lastBound.Sub(start).Seconds())
	}
	run.BoundToFailed = quantilesOf(boundToFailed)
	if run.PrepareCalls, run.UnprepareCalls, err = e.driverCalls(ctx, ns); err != nil {
		return run, err
	}
	if run.KubeletEvents, err = e.kubeletEvents(ctx, ns); err != nil {
		return run, err
	}
	e.logf("storm on %s: %d of %d Failed (all in %s s, all bound in %s s, bound -> Failed p50 %s ms, max %s ms), kubelet %.1f CPU s, %.0f API requests, %d prepare / %d unprepare calls, %d kubelet Event writes",
		e.current, run.Failed, run.Pods, formatNumber(run.AllFailedSeconds, 1), formatNumber(run.AllBoundSeconds, 1),
		formatNumber(run.BoundToFailed.P50, 0), formatNumber(run.BoundToFailed.Max, 0), run.KubeletCPUSeconds, run.KubeletAPIRequests, run.PrepareCalls, run.UnprepareCalls, run.KubeletEvents)
	return run, nil
}

// healthy (scenario 4): healthy DRA pods one after another, then in
// batches: create -> Running.
func (e *env) healthy(ctx context.Context) (run HealthyRun, err error) {
	sequential, err := e.healthyPods(ctx, "healthy-seq", 1)
	if err != nil {
		return run, err
	}
	batched, err := e.healthyPods(ctx, "healthy-batch", e.sizes.HealthyBatch)
	if err != nil {
		return run, err
	}
	run = HealthyRun{Sequential: quantilesOf(sequential), Batched: quantilesOf(batched)}
	e.logf("healthy on %s: create -> Running sequential p50 %.0f ms p99 %.0f ms; batches of %d p50 %.0f ms p99 %.0f ms",
		e.current, run.Sequential.P50, run.Sequential.P99, e.sizes.HealthyBatch, run.Batched.P50, run.Batched.P99)
	return run, nil
}

// healthyPods creates HealthyPods healthy pods, batch at a time, each batch
// after the previous one is Running, and returns create -> Running in ms.
func (e *env) healthyPods(ctx context.Context, scenario string, batch int) (ms []float64, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, scenario, nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = done(err) }()
	for b := 0; b*batch < e.sizes.HealthyPods; b++ {
		n := min(batch, e.sizes.HealthyPods-b*batch)
		prefix := fmt.Sprintf("ok-%03d", b)
		sent, err := e.createPods(ctx, ns, prefix, n)
		if err != nil {
			return nil, err
		}
		names := podNames(prefix, n)
		if err := w.wait(ctx, names, v1.PodRunning, podTimeout); err != nil {
			return nil, err
		}
		for _, name := range names {
			running, _ := w.at(name, v1.PodRunning)
			ms = append(ms, milliseconds(running.Sub(sent[name])))
		}
	}
	return ms, nil
}

// transient (scenario 5): pods whose driver fails TransientFailures times,
// then prepares: create -> Running.
func (e *env) transient(ctx context.Context) (run TransientRun, err error) {
	spec := testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To(int64(e.sizes.TransientFailures)), Message: "bench: device busy"}
	ns, w, done, err := e.scenarioNamespace(ctx, "transient", spec.Parameters())
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	sent, err := e.createPods(ctx, ns, "transient", e.sizes.TransientPods)
	if err != nil {
		return run, err
	}
	names := podNames("transient", e.sizes.TransientPods)
	if err := w.wait(ctx, names, v1.PodRunning, podTimeout); err != nil {
		return run, err
	}
	claims, err := e.claimsOf(ctx, ns, names)
	if err != nil {
		return run, err
	}
	var toRunning, intervals []float64
	for _, name := range names {
		running, _ := w.at(name, v1.PodRunning)
		toRunning = append(toRunning, milliseconds(running.Sub(sent[name])))
		intervals = append(intervals, retryIntervals(claims[name].PrepareTimes)...)
	}
	run = TransientRun{Pods: len(names), Failures: e.sizes.TransientFailures, ToRunning: quantilesOf(toRunning),
		RetryIntervalMedian: median(intervals), RetryInterval: spreadOf(intervals)}
	e.logf("transient on %s: create -> Running p50 %.1fs max %.1fs, retry interval median %s s",
		e.current, run.ToRunning.P50/1000, run.ToRunning.Max/1000, formatNumber(run.RetryIntervalMedian, 1))
	return run, nil
}

// churn (scenario 6): a Deployment whose claims carry invalid config,
// watched for the churn window.
func (e *env) churn(ctx context.Context) (run ChurnRun, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, "churn", invalidConfig)
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	labels := map[string]string{"app": "churn"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "churn"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(e.sizes.ChurnReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(v1.RestartPolicyAlways)},
		},
	}
	start := time.Now()
	if _, err := e.client.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		return run, fmt.Errorf("deployment in %s: %w", ns, err)
	}
	if err := sleepReporting(ctx, start.Add(e.sizes.ChurnWindow), time.Minute, func() {
		failed, seen := w.count(v1.PodFailed)
		e.logf("churn on %s: %d pods created, %d Failed", e.current, seen, failed)
	}); err != nil {
		return run, err
	}
	// Stop the churn before counting, so that the counts belong to the window.
	if _, err := e.client.AppsV1().Deployments(ns).Patch(ctx, "churn", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		return run, fmt.Errorf("scale the deployment down: %w", err)
	}
	pods, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return run, err
	}
	_, run.PodsCreated = w.count(v1.PodFailed)
	for _, pod := range pods.Items {
		switch pod.Status.Phase {
		case v1.PodFailed:
			run.FailedLeft++
		case v1.PodPending:
			run.Pending++
		}
	}
	run.Replicas, run.WindowSeconds = e.sizes.ChurnReplicas, e.sizes.ChurnWindow.Seconds()
	if run.PrepareCalls, run.UnprepareCalls, err = e.driverCalls(ctx, ns); err != nil {
		return run, err
	}
	e.logf("churn on %s over %s: %d pods created, %d Failed left, %d Pending, %d prepare / %d unprepare calls",
		e.current, e.sizes.ChurnWindow, run.PodsCreated, run.FailedLeft, run.Pending, run.PrepareCalls, run.UnprepareCalls)
	return run, nil
}

// retryIntervals returns the seconds between consecutive times.
func retryIntervals(times []time.Time) []float64 {
	sorted := slices.Clone(times)
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	var out []float64
	for i := 1; i < len(sorted); i++ {
		out = append(out, sorted[i].Sub(sorted[i-1]).Seconds())
	}
	return out
}
