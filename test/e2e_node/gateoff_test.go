// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// (c) With the feature gate off the fork is the stock kubelet, down to what it
// writes to the API: the same pods (healthy, transient then running,
// permanent-marked, and a running pod on which another client wrote a
// DRAPermanentDriverFailure condition with status False) run under the stock
// kubelet and then under the fork with the gate off, and every pod status
// PATCH body each kubelet sent (from the apiserver's audit log) is compared,
// UIDs, times, IDs and addresses normalized; and every metric family on the
// kubelet's /metrics, with its label names, is the same (issue 34: the fork
// registered its own after the first prepare, gate or not). With the gate off
// a permanent answer is retried as in stock and the pod stays Pending. Not parallel: it
// swaps kubelets, and restores the fork with the gate on, so that the order
// of tests does not matter.
func TestGateOffIsStock(t *testing.T) {
	fork := cluster.KubeletPath()
	stock := filepath.Join(filepath.Dir(fork), "kubelet-stock")
	t.Cleanup(func() {
		replaceKubelet(context.Background(), t, fork, map[string]bool{gate: true})
	})
	patches := map[string]map[string][]string{} // kubelet -> pod -> normalized patch bodies
	metrics := map[string]map[string][]string{} // kubelet -> metric family -> label name sets
	for _, run := range []struct {
		name   string
		binary string
		gates  map[string]bool
	}{{"stock", stock, nil}, {"gate-off", fork, map[string]bool{gate: false}}} {
		t.Run(run.name, func(t *testing.T) {
			replaceKubelet(t.Context(), t, run.binary, run.gates)
			ns := namespaceFor(t)
			patches[run.name] = statusPatchesOfScenario(t, ns)
			metrics[run.name] = metricShapes(t)
			if run.name == "gate-off" {
				checkGateOffRetries(t, ns)
			}
			deleteAndCheckNoLeaks(t, ns, driver)
		})
	}
	// /metrics: the same metric families with the same label names, after
	// the same pods (a family exists once it has a sample). But one: the
	// kubelet's server sets kubelet_metrics_provider when it installs its
	// handlers, a no-op when that comes before servermetrics.Register() in
	// the kubelet's start, so upstream's kubelet shows it or not from one
	// start to the next (stock lacked it once in the e2e suite, 2026-11-28).
	for _, shapes := range metrics {
		delete(shapes, "kubelet_metrics_provider")
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(metrics["stock"])), func(family string) bool { return strings.Contains(family, "dra_") }) {
		t.Error("the stock kubelet exposes no DRA metric after preparing claims: the scrape is not working")
	}
	if onlyStock, onlyFork := shapesDifference(metrics["stock"], metrics["gate-off"]), shapesDifference(metrics["gate-off"], metrics["stock"]); len(onlyStock)+len(onlyFork) > 0 {
		t.Errorf("metrics on /metrics differ (family: label names): only stock %v; only fork, gate off %v", onlyStock, onlyFork)
	} else {
		t.Logf("/metrics: the same %d metric families, label names included", len(metrics["stock"]))
	}
	// What each kubelet wrote to each pod's status over its life, as a set
	// of field assignments: how the assignments are grouped into patches
	// depends on when syncs and resyncs fall (one CI run grouped the foreign
	// pod's differently in the two runs), what is written does not.
	for _, pod := range []string{"healthy", "transient", "permanent", "foreign"} {
		stockPatches, forkPatches := patches["stock"][pod], patches["gate-off"][pod]
		if len(stockPatches) == 0 {
			t.Errorf("pod %s: the stock kubelet sent no status patch: the audit log is not working", pod)
		}
		stockWrote, forkWrote := writtenFields(t, stockPatches), writtenFields(t, forkPatches)
		if onlyStock, onlyFork := setDifference(stockWrote, forkWrote), setDifference(forkWrote, stockWrote); len(onlyStock)+len(onlyFork) > 0 {
			// One line first: CI shows the first line of each message only.
			t.Errorf("pod %s: the kubelets wrote different status fields: only stock %q; only fork, gate off %q\nstock (%d patches):\n  %s\nfork, gate off (%d patches):\n  %s", pod,
				onlyStock, onlyFork, len(stockPatches), strings.Join(stockPatches, "\n  "), len(forkPatches), strings.Join(forkPatches, "\n  "))
		} else {
			t.Logf("pod %s: the same %d status fields written (%d patches by stock, %d by the fork), e.g. %s", pod, len(stockWrote), len(stockPatches), len(forkPatches), stockPatches[len(stockPatches)-1])
		}
	}
}

// statusPatchesOfScenario runs the scenario's pods in ns and returns the
// kubelet's status patches for each, normalized.
func statusPatchesOfScenario(t *testing.T, ns string) map[string][]string {
	t.Helper()
	createTemplate(t, ns, "healthy", driver, nil)
	createTemplate(t, ns, "transient", driver, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "device busy"}))
	createTemplate(t, ns, "permanent", driver, behavior(testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "never works"}))
	createPodWith(t, ns, "healthy", v1.RestartPolicyNever, "healthy")
	createPodWith(t, ns, "transient", v1.RestartPolicyNever, "transient")
	createPodWith(t, ns, "permanent", v1.RestartPolicyNever, "permanent")
	// foreign: runs 15 s, then Succeeded; meanwhile another client writes the
	// condition type the fork owns with the gate on, with status False.
	spec := podSpecWith(v1.RestartPolicyNever, "healthy")
	spec.Containers[0].Args = []string{"--exit-after=15s"}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := waitFor(t, ns, "foreign", time.Minute, "Running", podRunning)
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: failfastdra.PodConditionType, Status: v1.ConditionFalse,
		Reason: "WrittenByAnotherClient", LastTransitionTime: metav1.Now()})
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the foreign condition: %v", err)
	}
	waitFor(t, ns, "healthy", time.Minute, "Running", podRunning)
	waitFor(t, ns, "transient", resyncWait+time.Minute, "Running", podRunning)
	waitForCalls(t, driver, ns, "permanent", 2, resyncWait+time.Minute)
	pod = waitFor(t, ns, "foreign", time.Minute, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if i := slices.IndexFunc(pod.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == failfastdra.PodConditionType }); i < 0 || pod.Status.Conditions[i].Status != v1.ConditionFalse {
		t.Errorf("pod foreign: the condition another client wrote is gone or changed: %+v", pod.Status.Conditions)
	}
	// The last patches come at the pods' next resync, not with a phase
	// change: the pod-level resources (limits) 10-15 s after the pod started
	// running, and again once it terminated. Wait until no patch came for
	// longer than a resync (with its jitter): 2 s and 5 s were each too short
	// once, with the patch in one kubelet's run and not in the other's.
	quiet := syncFrequency + syncFrequency/2 + 2*time.Second
	var raw []localcluster.StatusPatch
	stableSince := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		now, err := cluster.StatusPatches(ns)
		if err != nil {
			return false, err
		}
		if len(now) != len(raw) {
			raw, stableSince = now, time.Now()
		}
		return time.Since(stableSince) >= quiet, nil
	})
	if err != nil {
		t.Fatalf("status patches of %s: %v", ns, err)
	}
	out := map[string][]string{}
	resyncOnly := 0
	for _, p := range raw {
		if p.User != "system:node:"+cluster.NodeName() {
			continue
		}
		if onlyResources(t, p.Body) {
			resyncOnly++
			continue
		}
		out[p.Pod] = append(out[p.Pod], normalizePatch(t, p.Body, ns))
	}
	t.Logf("%s: %d patches of status.resources alone left out", ns, resyncOnly)
	return out
}

// onlyResources tells whether a status patch changes status.resources and
// nothing else: the pod-level resources that the kubelet reports at a pod's
// resyncs, after it started and after it terminated, whenever the resync
// comes (one run had such a patch 20 s after the pod terminated, the other
// none within that time). Their timing is the resync's, not the gate's.
func onlyResources(t *testing.T, body json.RawMessage) bool {
	t.Helper()
	var patch struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(body, &patch); err != nil {
		t.Fatalf("status patch %s: %v", body, err)
	}
	_, has := patch.Status["resources"]
	return has && len(patch.Status) == 1
}

// shapesDifference lists each family of a, with its label name sets, whose
// label name sets b does not have alike.
func shapesDifference(a, b map[string][]string) []string {
	var diff []string
	for family, shapes := range a {
		if !slices.Equal(shapes, b[family]) {
			diff = append(diff, family+"{"+strings.Join(shapes, "} {")+"}")
		}
	}
	slices.Sort(diff)
	return diff
}

// metricShapes returns every metric family on the kubelet's /metrics, with
// its label names.
func metricShapes(t *testing.T) map[string][]string {
	t.Helper()
	text, err := e2eframework.KubeletMetrics(t.Context(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := e2eframework.MetricShapes(text, "")
	if err != nil {
		t.Fatal(err)
	}
	return shapes
}

// checkGateOffRetries: with the gate off the permanent answer is retried,
// the pod stays Pending, with the stock event and no DRA failure event.
func checkGateOffRetries(t *testing.T, ns string) {
	t.Helper()
	stats := claimStatsOf(t, ns, "permanent")
	if pod := getPod(t, ns, "permanent"); pod.Status.Phase != v1.PodPending {
		t.Errorf("pod left Pending with the gate off: %+v", pod.Status)
	}
	if stats.PrepareCalls < 2 || stats.UnprepareCalls != 0 {
		t.Errorf("driver stats %+v, want retries and no unprepare while the pod is retried", stats)
	}
	if events := eventsOf(t, ns, "permanent", "FailedPrepareDynamicResources"); len(events) == 0 {
		t.Error("no FailedPrepareDynamicResources event")
	}
	list, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=permanent,reason=" + failfastdra.PodFailedReason})
	if err != nil || len(list.Items) > 0 {
		t.Errorf("%s event with the gate off: %v %v", failfastdra.PodFailedReason, err, list)
	}
}

func claimStatsOf(t *testing.T, ns, pod string) testdriver.ClaimStats {
	t.Helper()
	_, stats := statsOf(t, driver, ns, pod, "")
	return stats
}

var (
	claimName  = regexp.MustCompile(`-[a-z0-9]{5}\b`)
	uuid       = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	deviceName = regexp.MustCompile(`\bdev-\d+\b`)
	normalized = map[string]string{"uid": "<uid>", "containerID": "<id>", "imageID": "<id>", "ip": "<ip>", "podIP": "<ip>", "hostIP": "<ip>"}
	// timeKeys are left out: the API keeps times to the second, so a patch
	// carries a time only when it moved past a second boundary since the
	// last one, which differs from run to run.
	timeKeys = map[string]bool{"lastTransitionTime": true, "lastProbeTime": true, "startedAt": true, "finishedAt": true, "startTime": true}
)

// normalizePatch rewrites what differs between two runs of the same pods
// (UIDs, times, container and image IDs, addresses, the namespace, which of
// the driver's devices a claim got) and returns the body as canonical JSON.
func normalizePatch(t *testing.T, body json.RawMessage, ns string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("status patch %s: %v", body, err)
	}
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if timeKeys[k] {
					delete(x, k)
					continue
				}
				x[k] = walk(k, e)
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(key, e)
			}
			return x
		case string:
			if r, ok := normalized[key]; ok && x != "" {
				return r
			}
			x = deviceName.ReplaceAllString(uuid.ReplaceAllString(strings.ReplaceAll(x, ns, "<ns>"), "<uid>"), "dev-<n>")
			return claimName.ReplaceAllString(x, "-<suffix>")
		}
		return v
	}
	out, err := json.Marshal(walk("", v))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// writtenFields returns the field assignments that normalized status patches
// make, as sorted unique "path=value" strings. List elements that merge by a
// key (conditions by type, container statuses by name) are addressed by it;
// other lists are one value. Merge directives ($setElementOrder: the order
// of the conditions known at the time of a patch) are left out, and so is
// status.resources (written at resyncs, whenever they fall).
func writtenFields(t *testing.T, bodies []string) []string {
	t.Helper()
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.HasPrefix(k, "$") || path == "status" && k == "resources" {
					continue
				}
				walk(path+"."+k, e)
			}
			return
		case []any:
			if keyed := listKeys(x); keyed != nil {
				for i, e := range x {
					walk(path+"["+keyed[i]+"]", e)
				}
				return
			}
		}
		value, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, path+"="+string(value))
	}
	for _, body := range bodies {
		var patch map[string]any
		if err := json.Unmarshal([]byte(body), &patch); err != nil {
			t.Fatalf("status patch %s: %v", body, err)
		}
		if status, ok := patch["status"]; ok {
			walk("status", status)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// listKeys returns the merge key of each element of a list of objects that
// all have a "type" or all have a "name", or nil.
func listKeys(list []any) []string {
	for _, key := range []string{"type", "name"} {
		keys := make([]string, 0, len(list))
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				break
			}
			k, ok := m[key].(string)
			if !ok {
				break
			}
			keys = append(keys, key+"="+k)
		}
		if len(list) > 0 && len(keys) == len(list) {
			return keys
		}
	}
	return nil
}

// setDifference returns the elements of sorted a that are not in sorted b.
func setDifference(a, b []string) []string {
	var out []string
	for _, e := range a {
		if _, found := slices.BinarySearch(b, e); !found {
			out = append(out, e)
		}
	}
	return out
}
