// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

func TestQuantilesOf(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []float64
		want Quantiles
	}{
		"empty":    {nil, Quantiles{}},
		"one":      {[]float64{7}, Quantiles{N: 1, P50: 7, P95: 7, P99: 7, Max: 7}},
		"1..100":   {seq(100), Quantiles{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}},
		"30":       {seq(30), Quantiles{N: 30, P50: 15, P95: 29, P99: 30, Max: 30}},
		"unsorted": {[]float64{3, 1, 2}, Quantiles{N: 3, P50: 2, P95: 3, P99: 3, Max: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := quantilesOf(tc.in); got != tc.want {
				t.Errorf("quantilesOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(n - i) // reversed: quantilesOf must sort
	}
	return out
}

func TestMedianAndRatio(t *testing.T) {
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
	if got := median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("median odd = %v", got)
	}
	if !median(nil).IsNaN() || !ratio(1, 0).IsNaN() || !ratio(NaN, 2).IsNaN() {
		t.Error("nothing measured must give NaN")
	}
	if got := ratio(1, 4); got != 0.25 {
		t.Errorf("ratio = %v", got)
	}
	got := medianQuantiles([]Quantiles{{N: 3, P50: 1, P99: 10}, {N: 3, P50: 3, P99: 30}, {}})
	if got.N != 6 || got.P50 != 2 || got.P99 != 20 {
		t.Errorf("medianQuantiles = %+v (runs without samples must not count)", got)
	}
}

// NaN is null in JSON and comes back as NaN: encoding/json refuses NaN.
func TestNumberJSON(t *testing.T) {
	data, err := json.Marshal(struct{ A, B Number }{NaN, 1.5})
	if err != nil || string(data) != `{"A":null,"B":1.5}` {
		t.Fatalf("Marshal = %s, %v", data, err)
	}
	var back struct{ A, B Number }
	if err := json.Unmarshal(data, &back); err != nil || !back.A.IsNaN() || back.B != 1.5 {
		t.Errorf("Unmarshal = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"A":"x"}`), &back); err == nil {
		t.Error("a string decoded as a Number")
	}
}

func TestParseCPUSeconds(t *testing.T) {
	// A command with a space and a parenthesis; utime 250 and stime 50 ticks.
	line := "1234 (kube let) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 1000 100 18446744073709551615"
	got, err := parseCPUSeconds(line)
	if err != nil || got != 3 {
		t.Errorf("parseCPUSeconds = %v, %v; want 3", got, err)
	}
	for _, bad := range []string{"", "1234 kubelet S 1", "1 (k) S 1 2 3", "1 (k) S 1 1 1 0 -1 4 1 0 0 0 x 5 0"} {
		if _, err := parseCPUSeconds(bad); err == nil {
			t.Errorf("parseCPUSeconds(%q) accepted", bad)
		}
	}
}

// sample is a plausible full run's results.
func sample() *Results {
	r := &Results{Mode: Full, Command: "make bench", Started: time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC), WallSeconds: 3600,
		Machine:  Machine{Cores: 2, MemoryBytes: 24 << 30, Kernel: "6.1.0", OS: "Debian GNU/Linux 12 linux/amd64"},
		Versions: Versions{Fork: "Kubernetes v1.37.1-dra-failfast", Stock: "Kubernetes v1.37.1", Go: "go1.26", Commit: "abc"},
		Settings: Settings{SyncFrequency: "1m0s", Devices: 256, Notes: []string{"note"}},
	}
	r.Sizes, _ = SizesFor(Full)
	for range 2 {
		run := TimeToFailedRun{DriverToFailedMs: []float64{40, 60, 80}, ApplyToFailedMs: []float64{900, 1000, 1100}}
		run.DriverToFailed, run.ApplyToFailed = quantilesOf(run.DriverToFailedMs), quantilesOf(run.ApplyToFailedMs)
		r.TimeToFailed.Runs = append(r.TimeToFailed.Runs, run)
		r.Healthy.Fork = append(r.Healthy.Fork, HealthyRun{Sequential: quantilesOf([]float64{1000, 1100}), Batched: quantilesOf([]float64{2000})})
		r.Healthy.Stock = append(r.Healthy.Stock, HealthyRun{Sequential: quantilesOf([]float64{1000, 1050}), Batched: quantilesOf([]float64{2100})})
	}
	r.DriverCalls = DriverCalls{
		Fork: CallsRun{WindowSeconds: 300, Failed: 1, PreparePerPod: 1, UnpreparePerPod: 1, RetryIntervalMedian: NaN, RetryInterval: spreadOf(nil),
			Pods: []PodCalls{{Prepare: 1, Unprepare: 1, Failed: true, PrepareAt: []float64{1.2}, UnprepareAt: []float64{1.4}}}},
		Stock: CallsRun{WindowSeconds: 300, PreparePerPod: 5, RetryIntervalMedian: 70, RetryInterval: spreadOf([]float64{61, 89}),
			Pods: []PodCalls{{Prepare: 5, PrepareAt: []float64{1, 12, 80, 150, 230}}}},
	}
	r.Storm = Storm{
		Fork: StormRun{Pods: 200, WindowSeconds: 300, Failed: 200, AllFailedSeconds: 40, AllBoundSeconds: 35, BoundToFailed: quantilesOf([]float64{100, 300, 5000}), KubeletCPUSeconds: 10, KubeletAPIRequests: 1200, PrepareCalls: 200, UnprepareCalls: 200, KubeletEvents: 400,
			Timeline: []StormSample{{Seconds: 30, KubeletCPUSeconds: 8, KubeletAPIRequests: 1000}, {Seconds: 150, KubeletCPUSeconds: 9.5, KubeletAPIRequests: 1150}, {Seconds: 300, KubeletCPUSeconds: 10, KubeletAPIRequests: 1200}}},
		Stock: StormRun{Pods: 200, WindowSeconds: 300, AllFailedSeconds: NaN, KubeletCPUSeconds: 60, KubeletAPIRequests: 9000, PrepareCalls: 1000, KubeletEvents: 1200,
			Timeline: []StormSample{{Seconds: 30, KubeletCPUSeconds: 10, KubeletAPIRequests: 2000}, {Seconds: 150, KubeletCPUSeconds: 30, KubeletAPIRequests: 5000}, {Seconds: 300, KubeletCPUSeconds: 60, KubeletAPIRequests: 9000}}},
		RaisedQPSFork: StormRun{Pods: 200, WindowSeconds: 60, Failed: 200, AllFailedSeconds: 7.5, AllBoundSeconds: 3, BoundToFailed: quantilesOf([]float64{100, 3000, 4500}), PrepareCalls: 200, UnprepareCalls: 200},
		KubeletAPIQPS: 200,
	}
	r.Transient = Transient{Fork: TransientRun{Pods: 5, Failures: 2, ToRunning: quantilesOf([]float64{25000})}, Stock: TransientRun{Pods: 5, Failures: 2, ToRunning: quantilesOf([]float64{26000})}}
	r.Churn = Churn{Fork: ChurnRun{Replicas: 2, WindowSeconds: 300, PodsCreated: 400, FailedLeft: 398}, Stock: ChurnRun{Replicas: 2, WindowSeconds: 300, PodsCreated: 2, Pending: 2}}
	denied := WebhookChurnRun{Replicas: 2, WindowSeconds: 120, TemplateDenied: true, PodsCreated: 2, Pending: 2, ClaimCreationFailures: 9,
		DenyMessage: "admission webhook \"validate.driver.dra-failfast.test\" denied the request: bench/claim: `prepare` \"Sometimes\" is not one of\nSucceed, Transient"}
	r.Churn.Webhook = WebhookChurn{Fork: denied, Stock: denied}
	broken := []string{"dev-0", "dev-1"}
	r.Churn.DeviceTaints = TaintChurn{
		Fork: TaintChurnRun{Replicas: 2, WindowSeconds: 120, Devices: 4, BrokenDevices: broken, PodsCreated: 4, Failed: 2, Running: 2,
			FailedOn: map[string]int{"dev-0": 1, "dev-1": 1}, TaintedDevices: broken, AllRunningSeconds: 6.5, PrepareCalls: 4, UnprepareCalls: 4},
		Stock: TaintChurnRun{Replicas: 2, WindowSeconds: 120, Devices: 4, BrokenDevices: broken, PodsCreated: 2, Pending: 2,
			FailedOn: map[string]int{}, TaintedDevices: broken, AllRunningSeconds: NaN, PrepareCalls: 6},
	}
	r.summarize()
	return r
}

func TestSummarizeAndGoals(t *testing.T) {
	r := sample()
	if r.TimeToFailed.DriverToFailed.P99 != 80 || r.TimeToFailed.StockPods != 1 || r.TimeToFailed.StockWindowSeconds != 300 {
		t.Errorf("time to Failed = %+v", r.TimeToFailed)
	}
	if r.Storm.CPURatio != Number(10.0/60) || r.Storm.RequestsRatio != Number(1200.0/9000) {
		t.Errorf("storm ratios = %v, %v", r.Storm.CPURatio, r.Storm.RequestsRatio)
	}
	if s := r.Healthy.ForkSequentialP50Spread; s.Min != 1000 || s.Max != 1000 {
		t.Errorf("spread = %+v", s)
	}
	met := map[string]bool{}
	for _, g := range r.Goals {
		met[g.Target] = g.Met
	}
	want := map[string]bool{
		"p99 driver answer -> API Failed <= 200 ms":               true,
		"fork: exactly 1 prepare and 1 unprepare per failing pod": true,
		"200 pods all Failed <= 10 s after creation":              false,
		"node API requests per pod (audit log, Events apart) <= the upstream minimum (7), and all Failed within 10% of the time the kubelet's client limiter allows them (kubeAPIQPS 50, burst 100)": false,
		"200 pods all Failed <= 10 s after creation, kubelet kubeAPIQPS 200":                                                                              true,
		"fork kubelet CPU <= 1/5 of stock over the window":                                                                                                true,
		"fork kubelet API requests <= 1/5 of stock over the window":                                                                                       true,
		"fork/stock p50 create -> Running <= 1.02 (sequential)":                                                                                           true,
		"fork/stock p50 create -> Running <= 1.02 (batches)":                                                                                              true,
		"fork/stock p50 create -> Running equal (within 10%)":                                                                                             true,
		"invalid template denied at create; the pods wait: none Failed or Running, no driver call (both kubelets)":                                        true,
		"fork: replicas fail on broken devices, at most 1 Failed pod per broken device and none on a healthy one; all replicas Running within the window": true,
	}
	for target, wantMet := range want {
		if got, ok := met[target]; !ok || got != wantMet {
			t.Errorf("goal %q: met %v (present %v), want %v", target, got, ok, wantMet)
		}
	}
	// A second prepare call misses the exactly-once goal.
	r.DriverCalls.Fork.Pods[0].Prepare = 2
	for _, g := range r.goals() {
		if strings.HasPrefix(g.Target, "fork: exactly 1") && g.Met {
			t.Error("two prepare calls met the exactly-once goal")
		}
	}
}

func TestChurnGoals(t *testing.T) {
	for name, tc := range map[string]struct {
		spoil    func(*Results)
		scenario string
	}{
		"template admitted on stock":      {func(r *Results) { r.Churn.Webhook.Stock.TemplateDenied = false }, "6a churn, webhook registered"},
		"a pod Failed with the webhook":   {func(r *Results) { r.Churn.Webhook.Fork.Failed = 1 }, "6a churn, webhook registered"},
		"a pod ran with the webhook":      {func(r *Results) { r.Churn.Webhook.Fork.Running = 1 }, "6a churn, webhook registered"},
		"a driver call with the webhook":  {func(r *Results) { r.Churn.Webhook.Stock.PrepareCalls = 1 }, "6a churn, webhook registered"},
		"webhook scenario not run":        {func(r *Results) { r.Churn.Webhook.Fork = WebhookChurnRun{} }, "6a churn, webhook registered"},
		"a broken device failed two pods": {func(r *Results) { r.Churn.DeviceTaints.Fork.FailedOn["dev-0"] = 2 }, "6b churn, device taints"},
		"a healthy device failed a pod":   {func(r *Results) { r.Churn.DeviceTaints.Fork.FailedOn["dev-2"] = 1 }, "6b churn, device taints"},
		"a replica not running":           {func(r *Results) { r.Churn.DeviceTaints.Fork.Running = 1 }, "6b churn, device taints"},
		"no pod failed: taints not exercised": {func(r *Results) {
			r.Churn.DeviceTaints.Fork.Failed, r.Churn.DeviceTaints.Fork.FailedOn = 0, map[string]int{}
		}, "6b churn, device taints"},
	} {
		t.Run(name, func(t *testing.T) {
			r := sample()
			tc.spoil(r)
			found := false
			for _, g := range r.goals() {
				if g.Scenario != tc.scenario {
					continue
				}
				found = true
				if g.Met {
					t.Errorf("goal %q met: %s", g.Target, g.Measured)
				}
			}
			if !found {
				t.Errorf("no goal for %s", tc.scenario)
			}
		})
	}
}

func TestTaintChurnRunCounts(t *testing.T) {
	broken := []string{"dev-0", "dev-1"}
	for name, tc := range map[string]struct {
		failedOn         map[string]int
		tainted          []string
		maxPerDevice     int
		onHealthy        int
		untaintedFailing []string
	}{
		"none":                     {nil, nil, 0, 0, nil},
		"one per broken device":    {map[string]int{"dev-0": 1, "dev-1": 1}, broken, 1, 0, nil},
		"a broken device churns":   {map[string]int{"dev-0": 3}, []string{"dev-0"}, 3, 0, nil},
		"healthy and unknown":      {map[string]int{"dev-2": 1, unknownDevice: 2}, nil, 2, 3, []string{"dev-2", unknownDevice}},
		"failed but never tainted": {map[string]int{"dev-1": 1, "dev-0": 1}, []string{"dev-0"}, 1, 0, []string{"dev-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			run := TaintChurnRun{BrokenDevices: broken, FailedOn: tc.failedOn, TaintedDevices: tc.tainted}
			if got := run.MaxFailedPerDevice(); got != tc.maxPerDevice {
				t.Errorf("MaxFailedPerDevice = %d, want %d", got, tc.maxPerDevice)
			}
			if got := run.FailedOnHealthy(); got != tc.onHealthy {
				t.Errorf("FailedOnHealthy = %d, want %d", got, tc.onHealthy)
			}
			if got := run.UntaintedFailing(); !slices.Equal(got, tc.untaintedFailing) {
				t.Errorf("UntaintedFailing = %v, want %v", got, tc.untaintedFailing)
			}
		})
	}
}

func TestWebhookDenial(t *testing.T) {
	denied := "admission webhook \"validate.driver.dra-failfast.test\" denied the request: ns/claim: invalid"
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"admitted":          {nil, ""},
		"denied":            {apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaimtemplates"}, "claim", errors.New(denied)), denied},
		"forbidden by RBAC": {apierrors.NewForbidden(schema.GroupResource{Resource: "resourceclaimtemplates"}, "claim", errors.New("user cannot create")), ""},
		"other error":       {errors.New("connection refused: denied the request"), ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := webhookDenial(tc.err)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("webhookDenial = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAllRunningSeconds(t *testing.T) {
	start := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	end := start.Add(time.Minute)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	w := &podWatcher{first: map[string]map[v1.PodPhase]time.Time{
		"a": {v1.PodPending: at(0.1), v1.PodFailed: at(2)},
		"b": {v1.PodPending: at(0.1), v1.PodRunning: at(3)},
		"c": {v1.PodPending: at(2.1), v1.PodRunning: at(5.5)},
		"d": {v1.PodPending: at(3), v1.PodRunning: at(70)},
	}}
	for _, tc := range []struct {
		replicas int
		want     Number
	}{{1, 3}, {2, 5.5}, {3, NaN}, {0, NaN}} {
		got := allRunningSeconds(w, start, end, tc.replicas)
		if got != tc.want && !(got.IsNaN() && tc.want.IsNaN()) {
			t.Errorf("allRunningSeconds(%d replicas) = %v, want %v", tc.replicas, got, tc.want)
		}
	}
}

func TestSmokeCheck(t *testing.T) {
	r := sample()
	r.Sizes.FailingPods, r.Sizes.CallsPods = 3, 1
	if err := r.SmokeCheck(); err != nil {
		t.Fatalf("SmokeCheck of a good run: %v", err)
	}
	// How far the fork got within the short window of 6b is not checked.
	r.Churn.DeviceTaints.Fork.Failed, r.Churn.DeviceTaints.Fork.FailedOn, r.Churn.DeviceTaints.Fork.Running = 0, map[string]int{}, 0
	if err := r.SmokeCheck(); err != nil {
		t.Errorf("SmokeCheck of a run where no replica reached a broken device yet: %v", err)
	}
	for name, spoil := range map[string]func(*Results){
		"a fork pod prepared twice":  func(r *Results) { r.DriverCalls.Fork.Pods[0].Prepare = 2 },
		"a fork pod not Failed":      func(r *Results) { r.DriverCalls.Fork.Pods[0].Failed = false },
		"stock failed a pod":         func(r *Results) { r.DriverCalls.Stock.Failed = 1 },
		"storm pod left":             func(r *Results) { r.Storm.Fork.Failed = 199 },
		"storm retried":              func(r *Results) { r.Storm.Fork.PrepareCalls = 201 },
		"raised-QPS storm pod left":  func(r *Results) { r.Storm.RaisedQPSFork.Failed = 199 },
		"raised-QPS storm retried":   func(r *Results) { r.Storm.RaisedQPSFork.PrepareCalls = 201 },
		"raised-QPS storm not run":   func(r *Results) { r.Storm.RaisedQPSFork = StormRun{} },
		"time to Failed short":       func(r *Results) { r.TimeToFailed.DriverToFailed.N = 5 },
		"calls scenario missing pod": func(r *Results) { r.DriverCalls.Fork.Pods = nil },
		"webhook admitted template":  func(r *Results) { r.Churn.Webhook.Fork.TemplateDenied = false },
		"webhook: a pod Failed":      func(r *Results) { r.Churn.Webhook.Stock.Failed = 1 },
		"webhook: a driver call":     func(r *Results) { r.Churn.Webhook.Fork.PrepareCalls = 1 },
		"webhook: pods not created":  func(r *Results) { r.Churn.Webhook.Stock.PodsCreated = 0 },
		"webhook: no claim Events":   func(r *Results) { r.Churn.Webhook.Fork.ClaimCreationFailures = 0 },
		"webhook not run":            func(r *Results) { r.Churn.Webhook.Stock = WebhookChurnRun{} },
		"taints: two on one device":  func(r *Results) { r.Churn.DeviceTaints.Fork.FailedOn["dev-1"] = 2 },
		"taints: healthy device":     func(r *Results) { r.Churn.DeviceTaints.Fork.FailedOn["dev-3"] = 1 },
		"taints: device not tainted": func(r *Results) { r.Churn.DeviceTaints.Fork.TaintedDevices = []string{"dev-0"} },
		"taints: stock failed a pod": func(r *Results) { r.Churn.DeviceTaints.Stock.Failed = 1 },
		"taints not run":             func(r *Results) { r.Churn.DeviceTaints.Fork = TaintChurnRun{} },
	} {
		t.Run(name, func(t *testing.T) {
			r := sample()
			r.Sizes.FailingPods, r.Sizes.CallsPods = 3, 1
			spoil(r)
			if err := r.SmokeCheck(); err == nil {
				t.Error("SmokeCheck passed")
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	md := sample().Markdown()
	for _, want := range []string{
		"## 1. Time to Failed", "## 2. Driver calls", "## 3. Storm", "### 3b. Storm with the fork at kubeAPIQPS 200: 200 pods, 1m0s window", "| seconds until all Failed | 40.0 | 7.5 |", "## 4. Healthy path", "## 5. Transient", "## 6. Controller churn",
		"| kubelet CPU seconds | 60.00 | 10.00 | 0.167 |",
		"| seconds until all Failed | - | 40.0 |",
		"| seconds until all bound to the node (control plane) | 0.0 | 35.0 |",
		"| bound -> Failed per pod, p50 / p99 / max (ms, the kubelet's part) | - | 300 / 5000 / 5000 |",
		"| 3 storm | 200 pods all Failed <= 10 s after creation | 40.0 s (all bound to the node after 35.0 s) | **no** |",
		"| kubelet CPU seconds, second half of the window | 30.00 | 0.50 | 0.017 |",
		"| kubelet API requests, second half of the window | 4000 | 50 | 0.013 |",
		"not Failed within 5m0s",
		"### 6a. With the driver's admission webhook registered: the same Deployment, 2m0s",
		"| claim template denied at create | yes | yes |",
		"| FailedResourceClaimCreation Event writes | 9 | 9 |",
		"| driver prepare calls | 0 | 0 |",
		"The API server's answer: `admission webhook \"validate.driver.dra-failfast.test\" denied the request: bench/claim: 'prepare' \"Sometimes\" is not one of Succeed, Transient`",
		"### 6b. With device taints: 2 of 4 devices broken, 2m0s",
		"(" + faultyDriverName + "), the first of them broken (dev-0, dev-1)",
		"| pods created | 2 | 4 |",
		"| Failed pods of one broken device, at most | 0 | 1 |",
		"| Failed pods on healthy devices | 0 | 0 |",
		"| Running pods at the end | 0 | 2 |",
		"| seconds until all replicas Running | - | 6.5 |",
		"| devices tainted at the end | dev-0, dev-1 | dev-0, dev-1 |",
		"| 6b churn, device taints | fork: replicas fail on broken devices, at most 1 Failed pod per broken device and none on a healthy one; all replicas Running within the window | 2 Failed (at most 1 per device, 0 on healthy ones), 2 of 2 Running, all after 6.5 s | yes |",
		"Command: `make bench`", "2 cores, 24.0 GiB",
		"](" + TimeToFailedPlot + ")", "](" + DriverCallsPlot + ")",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "NaN") {
		t.Error("report prints NaN")
	}
}

func TestPlotsAreSVG(t *testing.T) {
	r := sample()
	for name, svg := range map[string]string{"cdf": r.timeToFailedPlot(), "calls": r.driverCallsPlot(), "storm": r.stormCPUPlot(), "empty": (&Results{}).driverCallsPlot()} {
		t.Run(name, func(t *testing.T) {
			lines, err := svgLines([]byte(svg))
			if err != nil {
				t.Fatal(err)
			}
			if lines != 2 {
				t.Errorf("%d lines, want 2", lines)
			}
			if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
				t.Error("coordinates not numbers")
			}
		})
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ span, want float64 }{{300, 50}, {1, 0.2}, {0, 1}, {73, 10}, {1000, 200}} {
		if got := niceStep(tc.span, 8); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("niceStep(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
}

func TestSizesFor(t *testing.T) {
	if _, err := SizesFor("fast"); err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("unknown mode: %v", err)
	}
	full, _ := SizesFor(Full)
	if full.FailingPods != 30 || full.StormPods != 200 || full.HealthyPods != 100 || full.CallsWindow != 5*time.Minute {
		t.Errorf("full sizes are not the issue's: %+v", full)
	}
	// A round's fork/stock ratio spreads about 3 %: fewer than four rounds
	// cannot tell the healthy path's 2 % goal from noise. An odd count of
	// failing-path runs makes 3b's median a run, not the slower of two.
	for _, mode := range []Mode{Full, Latency, HealthyPath} {
		if sizes, _ := SizesFor(mode); sizes.HealthyRounds < 4 {
			t.Errorf("%s: %d healthy rounds, want at least 4", mode, sizes.HealthyRounds)
		}
	}
	for _, mode := range []Mode{Full, FailingPath} {
		if sizes, _ := SizesFor(mode); sizes.Repetitions%2 != 1 {
			t.Errorf("%s: %d failing-path repetitions, want an odd count", mode, sizes.Repetitions)
		}
	}
	for _, mode := range []Mode{Full, Smoke} {
		sizes, _ := SizesFor(mode)
		if sizes.MitigatedChurnWindow <= 0 || sizes.MitigatedChurnWindow > sizes.ChurnWindow || sizes.ChurnReplicas < 1 {
			t.Errorf("%s: mitigated churn window %v, churn window %v, %d replicas", mode, sizes.MitigatedChurnWindow, sizes.ChurnWindow, sizes.ChurnReplicas)
		}
		if devices := faultyDevices(sizes); devices-taintBrokenDevices < sizes.ChurnReplicas || devices > testdriver.MaxDevices {
			t.Errorf("%s: %d devices for the device taint churn, %d broken: not enough healthy ones for %d replicas", mode, devices, taintBrokenDevices, sizes.ChurnReplicas)
		}
	}
}

func TestCheckRun(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	r.Sizes.FailingPods, r.Sizes.CallsPods = 3, 1
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	if err := CheckRun(dir); err != nil {
		t.Fatalf("CheckRun of a good run: %v", err)
	}
	// The mitigated churn runs come back from results.json as they went.
	back, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Churn.DeviceTaints.Fork, r.Churn.DeviceTaints.Fork; got.MaxFailedPerDevice() != 1 || got.AllRunningSeconds != want.AllRunningSeconds || !slices.Equal(got.TaintedDevices, want.TaintedDevices) {
		t.Errorf("device taint churn read back as %+v, want %+v", got, want)
	}
	if !back.Churn.DeviceTaints.Stock.AllRunningSeconds.IsNaN() || back.Churn.Webhook.Fork != r.Churn.Webhook.Fork {
		t.Errorf("churn read back as %+v", back.Churn)
	}
	report := filepath.Join(dir, ReportFile)
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, []byte(strings.Replace(string(md), "### 6b. ", "### ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckRun(dir); err == nil || !strings.Contains(err.Error(), "scenario 6b") {
		t.Errorf("CheckRun of a report without 6b: %v", err)
	}
	if err := os.WriteFile(report, md, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, DriverCallsPlot), []byte("<html/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckRun(dir); err == nil || !strings.Contains(err.Error(), DriverCallsPlot) {
		t.Errorf("CheckRun with a broken plot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckRun(dir); err == nil {
		t.Error("CheckRun accepted broken results.json")
	}
}

// The storm goal at the kubelet's default rate: requests per pod (Events
// apart) at most the upstream minimum, and all Failed within 10% of what
// the client limiter allows for them.
func TestStormLimiterGoal(t *testing.T) {
	requests := func(gets int) map[string]int {
		return map[string]int{"get pods": gets, "patch pods/status": 400, "create serviceaccounts/token": 200, "get resourceclaims": 200, "create events": 400}
	}
	for _, tc := range []struct {
		name      string
		requests  map[string]int
		allFailed Number
		want      bool
	}{
		{name: "5 per pod, as fast as the limiter", requests: requests(200), allFailed: 18, want: true}, // (1000-100)/50 = 18 s
		{name: "5 per pod, 10% slower", requests: requests(200), allFailed: 19.8, want: true},           // 1.1 x 18 s
		{name: "5 per pod, more than 10% slower", requests: requests(200), allFailed: 20, want: false},  //
		{name: "8 per pod, above the minimum", requests: requests(800), allFailed: 10, want: false},     //
		{name: "no audit log", allFailed: 10, want: false},                                              //
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			r.Storm.Fork.NodeRequests, r.Storm.Fork.AllFailedSeconds = tc.requests, tc.allFailed
			for _, g := range r.goals() {
				if strings.HasPrefix(g.Target, "node API requests per pod") {
					if g.Met != tc.want {
						t.Errorf("met = %v, want %v (%s)", g.Met, tc.want, g.Measured)
					}
					return
				}
			}
			t.Fatal("no storm limiter goal")
		})
	}
}

// A report rendered again (-render) checks today's goals against the
// recorded samples, not the goals recorded with them.
func TestReadResultsChecksGoalsAgain(t *testing.T) {
	r := sample()
	r.Goals = []Goal{{Scenario: "0 retired", Target: "a goal no longer set"}}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Goals) != len(sample().Goals) || got.Goals[0].Scenario == "0 retired" {
		t.Errorf("goals = %+v, want today's", got.Goals)
	}
}

// Mode latency runs scenarios 4 and 3b only, 3b once per round: the goals,
// the report and the files are of those alone, and 3b's goal is its median
// run, a run whose pods did not all fail counting as the slowest.
func TestLatencyMode(t *testing.T) {
	r := sample()
	r.Mode, r.Command = Latency, "make bench BENCH_MODE=latency"
	r.Sizes, _ = SizesFor(Latency)
	r.TimeToFailed, r.DriverCalls, r.Transient, r.Churn = TimeToFailed{}, DriverCalls{}, Transient{}, Churn{}
	r.Storm.Fork, r.Storm.Stock = StormRun{}, StormRun{}
	for _, seconds := range []Number{12, 7, NaN, 9} {
		r.Storm.RaisedQPSRuns = append(r.Storm.RaisedQPSRuns, StormRun{Pods: 200, WindowSeconds: 60, Failed: 200, AllFailedSeconds: seconds, AllBoundSeconds: 3, PrepareCalls: 200, UnprepareCalls: 200})
	}
	r.summarize()
	if got := r.Storm.RaisedQPSFork.AllFailedSeconds; got != 12 {
		t.Errorf("3b median run: all Failed after %v s, want 12 (of 7, 9, 12 and one not all Failed)", got)
	}
	if scenarios, want := goalScenarios(r), []string{"3b storm", "4 healthy path", "4 healthy path"}; !slices.Equal(scenarios, want) {
		t.Errorf("goals of scenarios %v, want %v", scenarios, want)
	}
	if r.Goals[0].Met || !strings.Contains(r.Goals[0].Measured, "12.0 s (all bound to the node after 3.0 s), median of 4 runs: 12.0, 7.0, -, 9.0 s") {
		t.Errorf("3b goal: %+v", r.Goals[0])
	}
	dir, files := writeResults(t, r)
	if want := []string{ReportFile, ResultsFile}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v (no plot of a scenario not run)", files, want)
	}
	md := reportIn(t, dir)
	for _, want := range []string{"### 3b. Storm", "4 repetitions, one per round", "(all runs: 12.0, 7.0, -, 9.0 s)", "| fork | kubeAPIQPS 200 (3b) |\n", "| seconds until all Failed | 12.0 |", "## 4. Healthy path"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, unwanted := range []string{"## 1. ", "## 2. ", "## 3. ", "## 5. ", "## 6. ", "NaN"} {
		if strings.Contains(string(md), unwanted) {
			t.Errorf("report has %q", unwanted)
		}
	}
	again, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Goals, r.Goals) {
		t.Errorf("goals read again %v, want %v", again.Goals, r.Goals)
	}
}

// Mode failing runs scenarios 1 and 3b on the fork alone (make test-series
// runs it with the fork's and with the series' kubelet): the goals, the
// report and the files are of those alone, and no stock kubelet appears.
func TestFailingMode(t *testing.T) {
	r := sample()
	r.Mode, r.Command = FailingPath, "BENCH_MODE=failing hack/bench.sh -fork-kubelet _output/bin/kubelet-series"
	r.Sizes, _ = SizesFor(FailingPath)
	r.DriverCalls, r.Transient, r.Churn, r.Healthy = DriverCalls{}, Transient{}, Churn{}, Healthy{}
	r.Storm.Fork, r.Storm.Stock = StormRun{}, StormRun{}
	r.Storm.RaisedQPSRuns = []StormRun{{Pods: 200, WindowSeconds: 60, Failed: 200, AllFailedSeconds: 8, AllBoundSeconds: 3, PrepareCalls: 200, UnprepareCalls: 200}}
	r.summarize()
	if scenarios, want := goalScenarios(r), []string{"1 time to Failed", "3b storm"}; !slices.Equal(scenarios, want) {
		t.Errorf("goals of scenarios %v, want %v", scenarios, want)
	}
	dir, files := writeResults(t, r)
	if want := []string{ReportFile, ResultsFile, TimeToFailedPlot}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v (only the plot of scenario 1)", files, want)
	}
	md := reportIn(t, dir)
	for _, want := range []string{"## 1. Time to Failed", "The stock kubelet is not run in this mode", "### 3b. Storm", "| seconds until all Failed | 8.0 |", "hack/bench.sh -fork-kubelet _output/bin/kubelet-series"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, unwanted := range []string{"## 2. ", "## 3. ", "## 4. ", "## 5. ", "## 6. ", "NaN"} {
		if strings.Contains(string(md), unwanted) {
			t.Errorf("report has %q", unwanted)
		}
	}
}

// writeResults writes r into a new directory and returns it and its files.
// reportIn reads report.md in dir.
func reportIn(t *testing.T, dir string) string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(md)
}

func writeResults(t *testing.T, r *Results) (dir string, files []string) {
	t.Helper()
	dir = t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files = append(files, e.Name())
	}
	return dir, files
}

// Mode healthy runs scenario 4 alone, ten rounds: the goals and the report
// are of it alone, and each goal gives the round-by-round ratio with its
// standard error beside the ratio of the medians.
func TestHealthyMode(t *testing.T) {
	r := sample()
	r.Mode, r.Command = HealthyPath, "make bench BENCH_MODE=healthy"
	r.Sizes, _ = SizesFor(HealthyPath)
	r.TimeToFailed, r.DriverCalls, r.Transient, r.Churn, r.Storm = TimeToFailed{}, DriverCalls{}, Transient{}, Churn{}, Storm{}
	r.Healthy = Healthy{}
	for i := range r.Sizes.HealthyRounds {
		stock := 600 + 10*float64(i%3)
		r.Healthy.Stock = append(r.Healthy.Stock, HealthyRun{Sequential: quantilesOf([]float64{stock}), Batched: quantilesOf([]float64{3000}),
			SequentialKubeletStartMs: 300, SequentialCPUMsPerPod: 40})
		r.Healthy.Fork = append(r.Healthy.Fork, HealthyRun{Sequential: quantilesOf([]float64{stock * 1.01}), Batched: quantilesOf([]float64{3000}),
			SequentialKubeletStartMs: 303, SequentialCPUMsPerPod: 41})
	}
	r.summarize()
	if scenarios, want := goalScenarios(r), []string{"4 healthy path", "4 healthy path"}; !slices.Equal(scenarios, want) {
		t.Errorf("goals of scenarios %v, want %v", scenarios, want)
	}
	if g := r.Goals[0]; !g.Met || !strings.HasSuffix(g.Measured, "; round by round 1.010, standard error 0.000 (10 rounds)") {
		t.Errorf("sequential goal: %+v", g)
	}
	dir, files := writeResults(t, r)
	if want := []string{ReportFile, ResultsFile}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v (no plot of a scenario not run)", files, want)
	}
	md := reportIn(t, dir)
	for _, want := range []string{"## 4. Healthy path", "| sequential: the kubelet's own start (first sight -> Running), mean per pod | 300 | 303 | 1.010 |",
		"| sequential: the kubelet's CPU time per pod | 40.0 | 41.0 | 1.025 |", "| sequential | 1.010 | 0.000 | 1.010, 1.010,"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, unwanted := range []string{"## 1. ", "## 2. ", "## 3. ", "### 3b. ", "## 5. ", "## 6. "} {
		if strings.Contains(string(md), unwanted) {
			t.Errorf("report has %q", unwanted)
		}
	}
}

// pairedRatio pairs the kubelets round by round: the ratios' mean and its
// standard error, rounds without both values left out.
func TestPairedRatio(t *testing.T) {
	runs := func(p50s ...float64) []HealthyRun {
		var rs []HealthyRun
		for _, p50 := range p50s {
			q := quantilesOf([]float64{p50})
			if math.IsNaN(p50) {
				q = Quantiles{P50: NaN}
			}
			rs = append(rs, HealthyRun{Sequential: q})
		}
		return rs
	}
	for name, tc := range map[string]struct {
		fork, stock  []HealthyRun
		rounds       []Number
		mean, stdErr Number
	}{
		"no round":              {mean: NaN, stdErr: NaN},
		"one round, no error":   {fork: runs(110), stock: runs(100), rounds: []Number{1.1}, mean: 1.1, stdErr: NaN},
		"two rounds":            {fork: runs(110, 90), stock: runs(100, 100), rounds: []Number{1.1, 0.9}, mean: 1, stdErr: 0.1},
		"drift cancels":         {fork: runs(101, 202, 303), stock: runs(100, 200, 300), rounds: []Number{1.01, 1.01, 1.01}, mean: 1.01, stdErr: 0},
		"a round without stock": {fork: runs(110, 90, 500), stock: runs(100, 100), rounds: []Number{1.1, 0.9}, mean: 1, stdErr: 0.1},
		"a value missing":       {fork: runs(110, math.NaN(), 90), stock: runs(100, 100, 100), rounds: []Number{1.1, 0.9}, mean: 1, stdErr: 0.1},
	} {
		t.Run(name, func(t *testing.T) {
			got := pairedRatio(tc.fork, tc.stock, func(run HealthyRun) Number { return run.Sequential.P50 })
			near := func(a, b Number) bool { return a.IsNaN() && b.IsNaN() || math.Abs(float64(a-b)) < 1e-9 }
			if len(got.Rounds) != len(tc.rounds) || !near(got.Mean, tc.mean) || !near(got.StdErr, tc.stdErr) {
				t.Fatalf("pairedRatio = %+v, want rounds %v, mean %v, standard error %v", got, tc.rounds, tc.mean, tc.stdErr)
			}
			for i := range tc.rounds {
				if !near(got.Rounds[i], tc.rounds[i]) {
					t.Errorf("round %d: %v, want %v", i, got.Rounds[i], tc.rounds[i])
				}
			}
		})
	}
}

// A goal's round-by-round text says when its limit lies within two
// standard errors of the rounds' mean: such a run settles nothing.
func TestPairedRatioText(t *testing.T) {
	const unsettled = ": 1.02 lies within two standard errors, too few rounds to settle the goal (make bench BENCH_MODE=healthy)"
	rounds := func(n int) []Number { return make([]Number, n) }
	for name, tc := range map[string]struct {
		p    PairedRatio
		want string
	}{
		"one round: nothing":            {PairedRatio{Rounds: rounds(1), Mean: 1.1, StdErr: NaN}, ""},
		"below the limit, settled":      {PairedRatio{Rounds: rounds(10), Mean: 0.994, StdErr: 0.009}, "; round by round 0.994, standard error 0.009 (10 rounds)"},
		"above the limit, settled":      {PairedRatio{Rounds: rounds(10), Mean: 1.1, StdErr: 0.01}, "; round by round 1.100, standard error 0.010 (10 rounds)"},
		"above the limit, within noise": {PairedRatio{Rounds: rounds(2), Mean: 1.065, StdErr: 0.044}, "; round by round 1.065, standard error 0.044 (2 rounds)" + unsettled},
		"below the limit, within noise": {PairedRatio{Rounds: rounds(10), Mean: 1.014, StdErr: 0.038}, "; round by round 1.014, standard error 0.038 (10 rounds)" + unsettled},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.p.text(1.02); got != tc.want {
				t.Errorf("text(1.02) = %q, want %q", got, tc.want)
			}
		})
	}
}

// goalScenarios lists the scenario of each goal of r, in order.
func goalScenarios(r *Results) []string {
	var scenarios []string
	for _, g := range r.Goals {
		scenarios = append(scenarios, g.Scenario)
	}
	return scenarios
}
