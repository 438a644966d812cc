// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
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

// storm (scenarios 3 and 3b): many permanently failing pods created at
// once in a namespace named for scenario; what the kubelet spends over window.
func (e *env) storm(ctx context.Context, scenario string, window time.Duration) (run StormRun, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, scenario, permanent)
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
	if err := sleepReporting(ctx, start.Add(window), window/10, func() {
		sampleErr = errors.Join(sampleErr, sample())
		failed, seen := w.count(v1.PodFailed)
		e.logf("%s on %s: %d of %d pods Failed", scenario, e.current, failed, seen)
	}); err != nil {
		return run, err
	}
	if err := errors.Join(sampleErr, sample()); err != nil {
		return run, err
	}
	end := timeline[len(timeline)-1]
	run = StormRun{Pods: e.sizes.StormPods, WindowSeconds: window.Seconds(), AllFailedSeconds: NaN,
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
	if run.NodeRequests, err = e.c.NodeRequests(ns); err != nil {
		return run, err
	}
	perPod, eventsPerPod := run.requestsPerPod()
	e.logf("%s on %s: %d of %d Failed (all in %s s, all bound in %s s, bound -> Failed p50 %s ms, max %s ms), kubelet %.1f CPU s, %.0f API requests, %d prepare / %d unprepare calls, %d kubelet Event writes; per pod %s API requests and %s Events (audit: %v)",
		scenario, e.current, run.Failed, run.Pods, formatNumber(run.AllFailedSeconds, 1), formatNumber(run.AllBoundSeconds, 1),
		formatNumber(run.BoundToFailed.P50, 0), formatNumber(run.BoundToFailed.Max, 0), run.KubeletCPUSeconds, run.KubeletAPIRequests, run.PrepareCalls, run.UnprepareCalls, run.KubeletEvents,
		formatNumber(perPod, 2), formatNumber(eventsPerPod, 2), run.NodeRequests)
	return run, nil
}

// healthy (scenario 4): healthy DRA pods one after another, then in
// batches: create -> Running.
func (e *env) healthy(ctx context.Context) (run HealthyRun, err error) {
	start, err := e.healthyCounters(ctx)
	if err != nil {
		return run, err
	}
	sequential, err := e.healthyPods(ctx, "healthy-seq", 1)
	if err != nil {
		return run, err
	}
	between, err := e.healthyCounters(ctx)
	if err != nil {
		return run, err
	}
	batched, err := e.healthyPods(ctx, "healthy-batch", e.sizes.HealthyBatch)
	if err != nil {
		return run, err
	}
	end, err := e.healthyCounters(ctx)
	if err != nil {
		return run, err
	}
	pods := Number(e.sizes.HealthyPods)
	sequentialWork, batchedWork := between.since(start), end.since(between)
	run = HealthyRun{Sequential: quantilesOf(sequential), Batched: quantilesOf(batched), SequentialMs: sequential, BatchedMs: batched,
		SequentialKubeletStartMs: sequentialWork.startMs(), SequentialCPUMsPerPod: Number(1000*sequentialWork.cpuSeconds) / pods,
		BatchedKubeletStartMs: batchedWork.startMs(), BatchedCPUMsPerPod: Number(1000*batchedWork.cpuSeconds) / pods,
		BatchedRequestsPerPod: Number(batchedWork.requests) / pods, BatchedPrepareMs: NaN}
	if batchedWork.prepares > 0 {
		run.BatchedPrepareMs = Number(1000 * batchedWork.prepareSeconds / batchedWork.prepares)
	}
	e.logf("healthy on %s: create -> Running sequential p50 %.0f ms p99 %.0f ms (per pod: the kubelet's start %s ms, %s ms CPU); batches of %d p50 %.0f ms p99 %.0f ms (per pod: the kubelet's start %s ms, the DRA manager's PrepareResources %s ms, %s API requests and %s ms CPU of the kubelet)",
		e.current, run.Sequential.P50, run.Sequential.P99, formatNumber(run.SequentialKubeletStartMs, 0), formatNumber(run.SequentialCPUMsPerPod, 1),
		e.sizes.HealthyBatch, run.Batched.P50, run.Batched.P99,
		formatNumber(run.BatchedKubeletStartMs, 0), formatNumber(run.BatchedPrepareMs, 1), formatNumber(run.BatchedRequestsPerPod, 2), formatNumber(run.BatchedCPUMsPerPod, 1))
	return run, nil
}

// healthyCounters are the kubelet's counters that scenario 4 reads around
// each phase (one after another, batches): where the fork's work on a
// healthy pod happens (the DRA manager's PrepareResources,
// dra_operations_duration_seconds, successful operations), what a batch asks
// of the kubelet's client rate limiter (rest_client_requests_total) and of
// the CPU (/proc).
type healthyCounters struct {
	prepareSeconds, prepares, requests, cpuSeconds float64
	// The kubelet's own part of a pod's start: from the pod's first sight
	// to Running (kubelet_pod_start_duration_seconds); the rest of create
	// -> Running is the API server's, the scheduler's and the claim's.
	startSeconds, starts float64
}

// since is what the kubelet did from c0 to c.
func (c healthyCounters) since(c0 healthyCounters) healthyCounters {
	return healthyCounters{prepareSeconds: c.prepareSeconds - c0.prepareSeconds, prepares: c.prepares - c0.prepares,
		requests: c.requests - c0.requests, cpuSeconds: c.cpuSeconds - c0.cpuSeconds,
		startSeconds: c.startSeconds - c0.startSeconds, starts: c.starts - c0.starts}
}

// startMs is the mean of the kubelet's own start duration per pod started,
// NaN when none started.
func (c healthyCounters) startMs() Number {
	if c.starts <= 0 {
		return NaN
	}
	return Number(1000 * c.startSeconds / c.starts)
}

func (e *env) healthyCounters(ctx context.Context) (healthyCounters, error) {
	var c healthyCounters
	pid, err := e.c.KubeletPID()
	if err != nil {
		return c, err
	}
	if c.cpuSeconds, err = processCPUSeconds(pid); err != nil {
		return c, err
	}
	data, err := e2eframework.KubeletMetrics(ctx, e.c)
	if err != nil {
		return healthyCounters{}, err
	}
	prepare := map[string]string{"operation_name": "PrepareResources", "is_error": "false"}
	for _, m := range []struct {
		name   string
		labels map[string]string
		value  *float64
	}{
		{"dra_operations_duration_seconds_sum", prepare, &c.prepareSeconds},
		{"dra_operations_duration_seconds_count", prepare, &c.prepares},
		{"rest_client_requests_total", nil, &c.requests},
		{"kubelet_pod_start_duration_seconds_sum", nil, &c.startSeconds},
		{"kubelet_pod_start_duration_seconds_count", nil, &c.starts},
	} {
		value, err := e2eframework.MetricValue(data, m.name, m.labels)
		if err != nil && !errors.Is(err, e2eframework.ErrMetricNotFound) {
			return healthyCounters{}, err
		}
		*m.value = value
	}
	return c, nil
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

// churnDeployment is the Deployment "churn" of the churn scenarios:
// replicas pods, each with a claim from the template "claim".
func churnDeployment(ns string, replicas int) *appsv1.Deployment {
	labels := map[string]string{"app": "churn"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "churn"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(v1.RestartPolicyAlways)},
		},
	}
}

// startChurn creates the churn Deployment of ChurnReplicas pods in ns and
// returns when the create request was sent: the start of the window.
func (e *env) startChurn(ctx context.Context, ns string) (time.Time, error) {
	start := time.Now()
	if _, err := e.client.AppsV1().Deployments(ns).Create(ctx, churnDeployment(ns, e.sizes.ChurnReplicas), metav1.CreateOptions{}); err != nil {
		return start, fmt.Errorf("deployment in %s: %w", ns, err)
	}
	return start, nil
}

// stopChurn scales the churn Deployment in ns to 0: no pod is created after
// the window.
func (e *env) stopChurn(ctx context.Context, ns string) error {
	if _, err := e.client.AppsV1().Deployments(ns).Patch(ctx, "churn", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale the deployment in %s down: %w", ns, err)
	}
	return nil
}

// churnCounts are the pods of a churn window: how many the watch saw created,
// and how many are in each phase now (the Failed ones named).
type churnCounts struct {
	created, failed, pending, running int
	failedPods                        []string
}

func (e *env) countChurn(ctx context.Context, ns string, w *podWatcher) (counts churnCounts, err error) {
	pods, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return counts, fmt.Errorf("pods in %s: %w", ns, err)
	}
	for _, pod := range pods.Items {
		switch pod.Status.Phase {
		case v1.PodFailed:
			counts.failed++
			counts.failedPods = append(counts.failedPods, pod.Name)
		case v1.PodPending:
			counts.pending++
		case v1.PodRunning:
			counts.running++
		}
	}
	_, counts.created = w.count(v1.PodFailed)
	return counts, nil
}

// churn (scenario 6): a Deployment whose claims carry invalid config,
// watched for the churn window.
func (e *env) churn(ctx context.Context) (run ChurnRun, err error) {
	ns, w, done, err := e.scenarioNamespace(ctx, "churn", invalidConfig)
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	start, err := e.startChurn(ctx, ns)
	if err != nil {
		return run, err
	}
	if err := sleepReporting(ctx, start.Add(e.sizes.ChurnWindow), time.Minute, func() {
		failed, seen := w.count(v1.PodFailed)
		e.logf("churn on %s: %d pods created, %d Failed", e.current, seen, failed)
	}); err != nil {
		return run, err
	}
	// Stop the churn before counting, so that the counts belong to the window.
	if err := e.stopChurn(ctx, ns); err != nil {
		return run, err
	}
	counts, err := e.countChurn(ctx, ns, w)
	if err != nil {
		return run, err
	}
	run.PodsCreated, run.FailedLeft, run.Pending = counts.created, counts.failed, counts.pending
	run.Replicas, run.WindowSeconds = e.sizes.ChurnReplicas, e.sizes.ChurnWindow.Seconds()
	if run.PrepareCalls, run.UnprepareCalls, err = e.driverCalls(ctx, ns); err != nil {
		return run, err
	}
	e.logf("churn on %s over %s: %d pods created, %d Failed left, %d Pending, %d prepare / %d unprepare calls",
		e.current, e.sizes.ChurnWindow, run.PodsCreated, run.FailedLeft, run.Pending, run.PrepareCalls, run.UnprepareCalls)
	return run, nil
}

// claimCreationFailedReason is the reason of the resourceclaim controller's
// Event when it cannot create a pod's claims (here: from a template that
// does not exist).
const claimCreationFailedReason = "FailedResourceClaimCreation"

// webhookChurn (scenario 6a): the churn Deployment with the driver's
// admission webhook registered, as the webhook-up branch of the e2e test
// TestWebhookDownDeploymentChurn does it: the claim template with invalid
// config is created first and refused, the Deployment is created all the
// same, and its pods reference a template that does not exist. They wait,
// unscheduled: the resourceclaim controller says it cannot create their
// claims (FailedResourceClaimCreation), and no pod reaches the kubelet.
func (e *env) webhookChurn(ctx context.Context) (run WebhookChurnRun, err error) {
	ns, w, done, err := e.watchedNamespace(ctx, "churn-webhook")
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	if err := e.driver.RegisterWebhook(ctx, e.c); err != nil {
		return run, err
	}
	// Unregistered before the namespace goes (the deferred calls run in
	// reverse), so that no other scenario runs with the webhook.
	defer func() {
		unregisterErr := e.driver.UnregisterWebhook(ctx, e.c)
		if unregisterErr == nil {
			unregisterErr = e.awaitWebhook(ctx, ns, false)
		}
		err = errors.Join(err, unregisterErr)
	}()
	if err := e.awaitWebhook(ctx, ns, true); err != nil {
		return run, err
	}
	tmpl := e2eframework.ClaimTemplate(ns, "claim", invalidConfig)
	_, createErr := e.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
	switch denial := webhookDenial(createErr); {
	case denial != "":
		run.TemplateDenied, run.DenyMessage = true, truncate(denial, maxDenyMessage)
	case createErr != nil:
		return run, fmt.Errorf("claim template in %s: %w", ns, createErr)
	default:
		e.logf("churn with the webhook on %s: the template with invalid config was admitted", e.current)
	}
	start, err := e.startChurn(ctx, ns)
	if err != nil {
		return run, err
	}
	if err := sleepReporting(ctx, start.Add(e.sizes.MitigatedChurnWindow), time.Minute, func() {
		failed, seen := w.count(v1.PodFailed)
		e.logf("churn with the webhook on %s: %d pods created, %d Failed", e.current, seen, failed)
	}); err != nil {
		return run, err
	}
	counts, err := e.countChurn(ctx, ns, w)
	if err != nil {
		return run, err
	}
	run.PodsCreated, run.Failed, run.Pending, run.Running = counts.created, counts.failed, counts.pending, counts.running
	run.Replicas, run.WindowSeconds = e.sizes.ChurnReplicas, e.sizes.MitigatedChurnWindow.Seconds()
	if run.PrepareCalls, run.UnprepareCalls, err = e.driverCalls(ctx, ns); err != nil {
		return run, err
	}
	// The Events are written asynchronously: wait up to 10s for the first,
	// as the e2e test does.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := e.reasonEvents(ctx, ns, claimCreationFailedReason)
		run.ClaimCreationFailures = n
		return err == nil && n > 0, nil
	}); err != nil && ctx.Err() != nil {
		return run, ctx.Err()
	}
	if err := e.stopChurn(ctx, ns); err != nil {
		return run, err
	}
	e.logf("churn with the webhook on %s over %s: template denied %v, %d pods created, %d Failed, %d Pending, %d Running, %d %s Event writes, %d prepare / %d unprepare calls",
		e.current, e.sizes.MitigatedChurnWindow, run.TemplateDenied, run.PodsCreated, run.Failed, run.Pending, run.Running,
		run.ClaimCreationFailures, claimCreationFailedReason, run.PrepareCalls, run.UnprepareCalls)
	return run, nil
}

// maxDenyMessage bounds the webhook's answer kept in the results.
const maxDenyMessage = 512

// truncate cuts s to at most n bytes, at a character boundary, marking the
// cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// webhookDenial returns the message of err if it is an admission webhook's
// denial (403 Forbidden, "admission webhook ... denied the request: ..."),
// "" otherwise.
func webhookDenial(err error) string {
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "denied the request") {
		return ""
	}
	return err.Error()
}

// awaitWebhook waits until the API server applies the driver's webhook to
// ns (effective) or no longer does (!effective): until a dry-run create of a
// claim template with invalid config is refused by it, or admitted. The API
// server learns of a ValidatingWebhookConfiguration through a watch: it is
// not in effect the moment it is created, nor gone the moment it is deleted.
func (e *env) awaitWebhook(ctx context.Context, ns string, effective bool) error {
	start := time.Now()
	tmpl := e2eframework.ClaimTemplate(ns, "webhook-probe", invalidConfig)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = e.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if effective {
			return webhookDenial(last) != "", nil
		}
		return last == nil, nil
	})
	state := map[bool]string{true: "in effect", false: "gone"}[effective]
	if err != nil {
		return fmt.Errorf("the driver's admission webhook not %s for %s after %s (last dry-run create of invalid config: %v): %w",
			state, ns, time.Since(start).Round(time.Second), last, err)
	}
	e.logf("the driver's admission webhook is %s (%.1fs)", state, time.Since(start).Seconds())
	return nil
}

// Scenario 6b's driver: few devices, the first taintBrokenDevices of them
// broken, and as many healthy ones as the churn Deployment has replicas. It
// reports a broken device with failfastplugin.DeviceFault, which taints the
// device NoSchedule before the kubelet gets the permanent answer, as
// TestDeviceFaultTaintStopsChurn runs it (4 devices, 2 broken, 2 replicas).
const (
	faultyDriverName   = "faulty.dra-failfast.test"
	taintBrokenDevices = 2
)

// faultyDevices is how many devices scenario 6b's driver publishes.
func faultyDevices(s Sizes) int { return taintBrokenDevices + s.ChurnReplicas }

// brokenDevices are the devices scenario 6b breaks: the first ones, which
// the allocator, trying devices in order, hands out first.
func brokenDevices() []string {
	devices := make([]string, taintBrokenDevices)
	for i := range devices {
		devices[i] = testdriver.DeviceName(i)
	}
	return devices
}

// unknownDevice is the FailedOn key of a Failed pod whose claim the
// driver never saw.
const unknownDevice = "unknown"

// taintChurn (scenario 6b): the churn Deployment with claims on the faulty
// driver's devices, the first of which are broken: the replicas land on
// them. The fork fails such a pod once; its device is tainted by then, so
// the replacement gets a healthy device and runs. The stock kubelet retries
// the prepare of the pod on the broken device at every resync: it stays
// Pending.
func (e *env) taintChurn(ctx context.Context) (run TaintChurnRun, err error) {
	d := e.faulty
	ns, w, done, err := e.watchedNamespace(ctx, "churn-taints")
	if err != nil {
		return run, err
	}
	defer func() { err = done(err) }()
	tmpl := e2eframework.ClaimTemplateFor(ns, "claim", d.DeviceClass(), d.Name(), nil)
	if _, err := e.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return run, fmt.Errorf("claim template in %s: %w", ns, err)
	}
	run.Devices, run.BrokenDevices = d.Devices(), brokenDevices()
	// Repaired before the namespace goes (the deferred calls run in
	// reverse): the next run starts with every device healthy and untainted.
	defer func() { err = errors.Join(err, e.repair(ctx, d, run.BrokenDevices)) }()
	for _, device := range run.BrokenDevices {
		if err := d.Client.SetBroken(ctx, device, true); err != nil {
			return run, fmt.Errorf("break %s of %s: %w", device, d.Name(), err)
		}
	}
	start, err := e.startChurn(ctx, ns)
	if err != nil {
		return run, err
	}
	end := start.Add(e.sizes.MitigatedChurnWindow)
	if err := sleepReporting(ctx, end, time.Minute, func() {
		failed, seen := w.count(v1.PodFailed)
		running, _ := w.count(v1.PodRunning)
		e.logf("churn with device taints on %s: %d pods created, %d Failed, %d Running", e.current, seen, failed, running)
	}); err != nil {
		return run, err
	}
	counts, err := e.countChurn(ctx, ns, w)
	if err != nil {
		return run, err
	}
	run.PodsCreated, run.Failed, run.Pending, run.Running = counts.created, counts.failed, counts.pending, counts.running
	failed := counts.failedPods
	run.Replicas, run.WindowSeconds = e.sizes.ChurnReplicas, e.sizes.MitigatedChurnWindow.Seconds()
	run.AllRunningSeconds = allRunningSeconds(w, start, end, run.Replicas)
	claims, err := claimsOn(ctx, d, ns, failed)
	if err != nil {
		return run, err
	}
	run.FailedOn = map[string]int{}
	for _, pod := range failed {
		devices := claims[pod].Devices
		if len(devices) == 0 {
			devices = []string{unknownDevice}
		}
		for _, device := range devices {
			run.FailedOn[device]++
		}
	}
	if run.TaintedDevices, err = e.taintedDevices(ctx, d); err != nil {
		return run, err
	}
	if run.PrepareCalls, run.UnprepareCalls, err = callsOn(ctx, d, ns); err != nil {
		return run, err
	}
	if err := e.stopChurn(ctx, ns); err != nil {
		return run, err
	}
	e.logf("churn with device taints on %s over %s: %d pods created, %d Failed (per device %v), %d Running, %d Pending, all replicas Running after %s s, tainted %v, %d prepare / %d unprepare calls",
		e.current, e.sizes.MitigatedChurnWindow, run.PodsCreated, run.Failed, run.FailedOn, run.Running, run.Pending,
		formatNumber(run.AllRunningSeconds, 1), run.TaintedDevices, run.PrepareCalls, run.UnprepareCalls)
	return run, nil
}

// allRunningSeconds returns the seconds from start until replicas pods had
// been seen Running before end, NaN if fewer were. (A pod of scenario 6b
// that runs keeps running: it holds a healthy device.)
func allRunningSeconds(w *podWatcher, start, end time.Time, replicas int) Number {
	var running []time.Time
	for _, pod := range w.names() {
		if t, ok := w.at(pod, v1.PodRunning); ok && t.Before(end) {
			running = append(running, t)
		}
	}
	if replicas <= 0 || len(running) < replicas {
		return NaN
	}
	slices.SortFunc(running, func(a, b time.Time) int { return a.Compare(b) })
	return Number(running[replicas-1].Sub(start).Seconds())
}

// taintedDevices returns the devices of driver d on the node that carry the
// device fault taint with effect NoSchedule: the devices of its
// DeviceTaintRules for the node's pool, what the scheduler sees, sorted.
func (e *env) taintedDevices(ctx context.Context, d *e2eframework.Driver) ([]string, error) {
	list, err := e.client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{
		LabelSelector: failfastplugin.DeviceTaintRuleDriverLabel + "=" + d.Name(),
	})
	if err != nil {
		return nil, fmt.Errorf("DeviceTaintRules of %s: %w", d.Name(), err)
	}
	var tainted []string
	for _, rule := range list.Items {
		selector, taint := rule.Spec.DeviceSelector, rule.Spec.Taint
		if selector == nil || selector.Pool == nil || *selector.Pool != e.c.NodeName() || selector.Device == nil ||
			taint.Key != failfastplugin.DefaultDeviceFaultTaintKey || taint.Effect != resourceapi.DeviceTaintEffectNoSchedule {
			continue
		}
		if !slices.Contains(tainted, *selector.Device) {
			tainted = append(tainted, *selector.Device)
		}
	}
	slices.Sort(tainted)
	return tainted, nil
}

// repair clears the broken devices of d and waits until their taints are
// gone from its ResourceSlices.
func (e *env) repair(ctx context.Context, d *e2eframework.Driver, broken []string) error {
	start := time.Now()
	for _, device := range broken {
		if err := d.Client.SetBroken(ctx, device, false); err != nil {
			return fmt.Errorf("repair %s of %s: %w", device, d.Name(), err)
		}
	}
	var tainted []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		tainted, err = e.taintedDevices(ctx, d)
		return err == nil && len(tainted) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("devices of %s still tainted a minute after the repair: %v: %w", d.Name(), tainted, err)
	}
	e.logf("devices of %s repaired, taints gone (%.1fs)", d.Name(), time.Since(start).Seconds())
	return nil
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
