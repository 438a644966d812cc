// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// forkGates are the fork's feature gates in every fork run. The stock
// kubelet gets none: it refuses a gate it does not know.
var forkGates = map[string]bool{string(failfastdra.DRAHandlePermanentDriverFailures): true}

const (
	// controlPlaneQPS is the client rate of kube-controller-manager and
	// kube-scheduler in every run: at their defaults the resourceclaim
	// controller (20 QPS) needs about 20 s to create a storm's claims, and the
	// storm would measure it instead of the kubelets.
	controlPlaneQPS = 200
	// raisedKubeletQPS is the kubelet's kubeAPIQPS in scenario 3b: a
	// rejected pod costs the kubelet about 5 requests (status, claim,
	// token), 1000 for a storm, which its default 50 QPS spreads over 20 s.
	raisedKubeletQPS = 200
	// The kubelet's default client rate (kubeAPIQPS, kubeAPIBurst), at
	// which every scenario but 3b runs.
	defaultKubeletQPS, defaultKubeletBurst = 50, 100
	// upstreamMinimumRequests is the least that a pod failed at its first
	// sync costs the kubelet's client limiter, on upstream's code paths:
	// its service account token and its claim, the first sync's status GET
	// and PATCH, the Failed status's GET and PATCH, and the GET of the sync
	// that TerminatePod forces at the end of every pod's termination
	// (test/e2e_node checkRequestsOfFailedPod checks one pod against it).
	upstreamMinimumRequests = 7
)

// env is the cluster, the driver and the kubelet in use.
type env struct {
	cfg    Config
	sizes  Sizes
	c      *localcluster.Cluster
	client kubernetes.Interface
	driver *e2eframework.Driver
	// faulty is the driver of the device taint churn (scenario 6b): few
	// devices, broken ones reported with failfastplugin.DeviceFault.
	faulty  *e2eframework.Driver
	current Kubelet
	nsSeq   int
	start   time.Time
	out     io.Writer
}

// logf prints one progress line with the time since the run started.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.out, "[bench %6.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// use starts k as the node's kubelet for its turn in a round, even when k
// runs already (only the kubelet restarts): every turn, and so every healthy
// run, begins on a kubelet started for it. Switching only when the kubelet
// changed gave the fork a fresh start before each of its healthy runs and
// the stock kubelet before every other one.
func (e *env) use(ctx context.Context, k Kubelet) error {
	e.logf("starting the node's kubelet as %s for its turn", k)
	if err := e.startKubelet(ctx, k); err != nil {
		return fmt.Errorf("start the %s kubelet: %w", k, err)
	}
	e.current = k
	return nil
}

// startKubelet (re)starts the node's kubelet as k and waits for the drivers.
func (e *env) startKubelet(ctx context.Context, k Kubelet) error {
	path, gates := e.cfg.StockKubelet, map[string]bool(nil)
	if k == Fork {
		path, gates = e.cfg.ForkKubelet, forkGates
	}
	return e2eframework.ReplaceKubelet(ctx, e.c, path, gates, e.drivers()...)
}

// withKubeletAPIQPS runs f with the current kubelet restarted at kubeAPIQPS
// qps, then restarts it at the default rate.
func (e *env) withKubeletAPIQPS(ctx context.Context, qps int, f func() error) error {
	restart := func(qps int) error {
		e.c.SetKubeletAPIQPS(qps)
		if err := e.startKubelet(ctx, e.current); err != nil {
			return fmt.Errorf("restart the %s kubelet at kubeAPIQPS %d (0: default): %w", e.current, qps, err)
		}
		return nil
	}
	if err := restart(qps); err != nil {
		return errors.Join(err, restart(0))
	}
	return errors.Join(f(), restart(0))
}

// drivers are the drivers running next to the kubelet.
func (e *env) drivers() []*e2eframework.Driver {
	var drivers []*e2eframework.Driver
	for _, d := range []*e2eframework.Driver{e.driver, e.faulty} {
		if d != nil {
			drivers = append(drivers, d)
		}
	}
	return drivers
}

// namespace creates a fresh namespace for one scenario run.
func (e *env) namespace(ctx context.Context, scenario string) (string, error) {
	e.nsSeq++
	ns := fmt.Sprintf("bench-%s-%s-%d", scenario, e.current, e.nsSeq)
	if err := e2eframework.CreateNamespace(ctx, e.client, ns); err != nil {
		return "", fmt.Errorf("namespace %s: %w", ns, err)
	}
	return ns, nil
}

// scenarioNamespace sets up one scenario run: watchedNamespace and the
// claim template "claim" with parameters.
func (e *env) scenarioNamespace(ctx context.Context, scenario string, parameters []byte) (ns string, w *podWatcher, done func(err error) error, err error) {
	if ns, w, done, err = e.watchedNamespace(ctx, scenario); err != nil {
		return "", nil, nil, err
	}
	if err := e.createTemplate(ctx, ns, parameters); err != nil {
		return "", nil, nil, done(err)
	}
	return ns, w, done, nil
}

// watchedNamespace sets up one scenario run without a claim template: a
// fresh namespace and a watch of its pods. done stops the watch and deletes
// the namespace; it returns err joined with any cleanup error (a failed
// cleanup fails the run: the next one would not start on an idle node).
func (e *env) watchedNamespace(ctx context.Context, scenario string) (ns string, w *podWatcher, done func(err error) error, err error) {
	if ns, err = e.namespace(ctx, scenario); err != nil {
		return "", nil, nil, err
	}
	done = func(err error) error {
		if w != nil {
			w.stop()
		}
		return errors.Join(err, e.deleteNamespace(ctx, ns))
	}
	if w, err = e.watchPods(ctx, ns); err != nil {
		return "", nil, nil, done(err)
	}
	return ns, w, done, nil
}

// deleteNamespace deletes ns and, with Sizes.AwaitCleanup, waits until it
// is gone, so that the next run starts on an idle node with its devices free.
func (e *env) deleteNamespace(ctx context.Context, ns string) error {
	start := time.Now()
	if err := e.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	if !e.sizes.AwaitCleanup {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone after %s: %w", ns, time.Since(start).Round(time.Second), err)
	}
	e.logf("namespace %s deleted in %.0fs", ns, time.Since(start).Seconds())
	return nil
}

// createTemplate creates the claim template "claim" in ns with parameters
// as the driver's opaque config (nil: none, the driver prepares).
func (e *env) createTemplate(ctx context.Context, ns string, parameters []byte) error {
	tmpl := e2eframework.ClaimTemplate(ns, "claim", parameters)
	if _, err := e.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("claim template in %s: %w", ns, err)
	}
	return nil
}

// podSpec is the benchmark's workload: one container with a claim from the
// template "claim".
func podSpec(restartPolicy v1.RestartPolicy) v1.PodSpec {
	spec := e2eframework.PodSpec("claim", restartPolicy)
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return spec
}

// createPod creates pod ns/name and returns when the create request was sent.
func (e *env) createPod(ctx context.Context, ns, name string) (time.Time, error) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: podSpec(v1.RestartPolicyNever)}
	sent := time.Now()
	if _, err := e.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return sent, fmt.Errorf("create pod %s/%s: %w", ns, name, err)
	}
	return sent, nil
}

// createPods creates pods name-000... at once (in parallel) and returns
// when each create request was sent, by name.
func (e *env) createPods(ctx context.Context, ns, prefix string, n int) (map[string]time.Time, error) {
	var (
		mu    sync.Mutex
		sent  = make(map[string]time.Time, n)
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 20)
	)
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			at, err := e.createPod(ctx, ns, name)
			mu.Lock()
			defer mu.Unlock()
			sent[name] = at
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return sent, fmt.Errorf("%d of %d creates failed, first: %w", len(errs), n, errs[0])
	}
	return sent, nil
}

// claimsOf returns the driver's counters of the pods in ns, by pod name.
func (e *env) claimsOf(ctx context.Context, ns string, pods []string) (map[string]testdriver.ClaimStats, error) {
	return claimsOn(ctx, e.driver, ns, pods)
}

// claimsOn returns driver d's counters of the pods in ns, by pod name.
func claimsOn(ctx context.Context, d *e2eframework.Driver, ns string, pods []string) (map[string]testdriver.ClaimStats, error) {
	stats, err := d.Client.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("driver %s stats: %w", d.Name(), err)
	}
	claims := make(map[string]testdriver.ClaimStats, len(pods))
	for _, pod := range pods {
		if claim, ok := e2eframework.PodClaim(stats, ns, pod); ok {
			claims[pod] = claim
		}
	}
	return claims, nil
}

// driverCalls sums the driver's calls for the claims of ns.
func (e *env) driverCalls(ctx context.Context, ns string) (prepare, unprepare int, err error) {
	return callsOn(ctx, e.driver, ns)
}

// callsOn sums driver d's calls for the claims of ns.
func callsOn(ctx context.Context, d *e2eframework.Driver, ns string) (prepare, unprepare int, err error) {
	stats, err := d.Client.Stats(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("driver %s stats: %w", d.Name(), err)
	}
	for _, claim := range stats.Claims {
		if claim.Namespace == ns {
			prepare += claim.PrepareCalls
			unprepare += claim.UnprepareCalls
		}
	}
	return prepare, unprepare, nil
}

// kubeletSample is what the kubelet has spent so far.
type kubeletSample struct {
	cpuSeconds  float64
	apiRequests float64
}

// sampleKubelet reads the kubelet's CPU time from /proc and its API
// requests from its rest_client_requests_total.
func (e *env) sampleKubelet(ctx context.Context) (kubeletSample, error) {
	pid, err := e.c.KubeletPID()
	if err != nil {
		return kubeletSample{}, err
	}
	cpu, err := processCPUSeconds(pid)
	if err != nil {
		return kubeletSample{}, err
	}
	requests, err := e2eframework.KubeletMetric(ctx, e.c, "rest_client_requests_total", nil)
	if err != nil {
		return kubeletSample{}, err
	}
	return kubeletSample{cpuSeconds: cpu, apiRequests: requests}, nil
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// processCPUSeconds returns the user plus system CPU time of pid.
func processCPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUSeconds(string(data))
}

// parseCPUSeconds reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command (field 2) may hold spaces and
// parentheses: fields are counted after its last ')'.
func parseCPUSeconds(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat line without a command: %.40q", stat)
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat line with %d fields after the command, want at least 13", len(fields))
	}
	var ticks float64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat cpu time %q: %w", f, err)
		}
		ticks += float64(n)
	}
	return ticks / clockTicks, nil
}

// kubeletEvents counts the Event writes of the kubelet in ns: an Event
// repeated N times was written N times (created, then its count updated).
func (e *env) kubeletEvents(ctx context.Context, ns string) (int, error) {
	events, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("events in %s: %w", ns, err)
	}
	writes := 0
	for _, ev := range events.Items {
		if ev.Source.Component != "kubelet" && ev.ReportingController != "kubelet" {
			continue
		}
		writes += int(max(ev.Count, 1))
	}
	return writes, nil
}

// reasonEvents counts the Event writes with reason in ns, as kubeletEvents
// does.
func (e *env) reasonEvents(ctx context.Context, ns, reason string) (int, error) {
	events, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		return 0, fmt.Errorf("%s events in %s: %w", reason, ns, err)
	}
	writes := 0
	for _, ev := range events.Items {
		writes += int(max(ev.Count, 1))
	}
	return writes, nil
}

// podWatcher records when each pod of a namespace was first seen in each
// phase, from a watch (an informer), so that times do not depend on polling.
type podWatcher struct {
	mu    sync.Mutex
	first map[string]map[v1.PodPhase]time.Time
	// bound is when each pod was first seen bound to the node (spec.nodeName
	// set by the scheduler): what comes before is the control plane's time.
	bound map[string]time.Time
	stop  context.CancelFunc
}

// watchPods starts a podWatcher for ns; call stop when done.
func (e *env) watchPods(ctx context.Context, ns string) (*podWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatcher{first: map[string]map[v1.PodPhase]time.Time{}, bound: map[string]time.Time{}, stop: cancel}
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		phases := w.first[pod.Name]
		if phases == nil {
			phases = map[v1.PodPhase]time.Time{}
			w.first[pod.Name] = phases
		}
		if _, ok := phases[pod.Status.Phase]; !ok {
			phases[pod.Status.Phase] = now
		}
		if _, ok := w.bound[pod.Name]; !ok && pod.Spec.NodeName != "" {
			w.bound[pod.Name] = now
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		cancel()
		return nil, fmt.Errorf("pod watch in %s did not sync", ns)
	}
	return w, nil
}

// at returns when pod was first seen in phase.
func (w *podWatcher) at(pod string, phase v1.PodPhase) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.first[pod][phase]
	return t, ok
}

// boundAt returns when pod was first seen bound to the node.
func (w *podWatcher) boundAt(pod string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.bound[pod]
	return t, ok
}

// count returns how many pods were seen in phase, and how many pods were
// seen at all.
func (w *podWatcher) count(phase v1.PodPhase) (inPhase, pods int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, phases := range w.first {
		if _, ok := phases[phase]; ok {
			inPhase++
		}
	}
	return inPhase, len(w.first)
}

// names returns the pods seen, sorted.
func (w *podWatcher) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.first))
}

// wait waits until every pod of pods was seen in phase.
func (w *podWatcher) wait(ctx context.Context, pods []string, phase v1.PodPhase, timeout time.Duration) error {
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		missing = missing[:0]
		for _, pod := range pods {
			if _, ok := w.at(pod, phase); !ok {
				missing = append(missing, pod)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods not %s within %s (first: %s): %w", len(missing), len(pods), phase, timeout, missing[0], err)
	}
	return nil
}

// sleepReporting sleeps until deadline, calling report every interval.
func sleepReporting(ctx context.Context, deadline time.Time, interval time.Duration, report func()) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(left, interval)):
			if time.Until(deadline) > 0 {
				report()
			}
		}
	}
}
