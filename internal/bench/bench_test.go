// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	}
	r.Transient = Transient{Fork: TransientRun{Pods: 5, Failures: 2, ToRunning: quantilesOf([]float64{25000})}, Stock: TransientRun{Pods: 5, Failures: 2, ToRunning: quantilesOf([]float64{26000})}}
	r.Churn = Churn{Fork: ChurnRun{Replicas: 2, WindowSeconds: 300, PodsCreated: 400, FailedLeft: 398}, Stock: ChurnRun{Replicas: 2, WindowSeconds: 300, PodsCreated: 2, Pending: 2}}
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
		"p99 driver answer -> API Failed <= 200 ms":                 true,
		"fork: exactly 1 prepare and 1 unprepare per failing pod":   true,
		"fork kubelet CPU <= 1/5 of stock over the window":          true,
		"fork kubelet API requests <= 1/5 of stock over the window": true,
		"fork/stock p50 create -> Running <= 1.02 (sequential)":     true,
		"fork/stock p50 create -> Running <= 1.02 (batches)":        true,
		"fork/stock p50 create -> Running equal (within 10%)":       true,
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

func TestSmokeCheck(t *testing.T) {
	r := sample()
	r.Sizes.FailingPods, r.Sizes.CallsPods = 3, 1
	if err := r.SmokeCheck(); err != nil {
		t.Fatalf("SmokeCheck of a good run: %v", err)
	}
	for name, spoil := range map[string]func(*Results){
		"a fork pod prepared twice":  func(r *Results) { r.DriverCalls.Fork.Pods[0].Prepare = 2 },
		"a fork pod not Failed":      func(r *Results) { r.DriverCalls.Fork.Pods[0].Failed = false },
		"stock failed a pod":         func(r *Results) { r.DriverCalls.Stock.Failed = 1 },
		"storm pod left":             func(r *Results) { r.Storm.Fork.Failed = 199 },
		"storm retried":              func(r *Results) { r.Storm.Fork.PrepareCalls = 201 },
		"time to Failed short":       func(r *Results) { r.TimeToFailed.DriverToFailed.N = 5 },
		"calls scenario missing pod": func(r *Results) { r.DriverCalls.Fork.Pods = nil },
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
		"## 1. Time to Failed", "## 2. Driver calls", "## 3. Storm", "## 4. Healthy path", "## 5. Transient", "## 6. Controller churn",
		"| kubelet CPU seconds | 60.00 | 10.00 | 0.167 |",
		"| seconds until all Failed | - | 40.0 |",
		"| seconds until all bound to the node (control plane) | 0.0 | 35.0 |",
		"| bound -> Failed per pod, p50 / p99 / max (ms, the kubelet's part) | - | 300 / 5000 / 5000 |",
		"| 3 storm | 200 pods all Failed <= 10 s after creation | 40.0 s (all bound to the node after 35.0 s) | **no** |",
		"| kubelet CPU seconds, second half of the window | 30.00 | 0.50 | 0.017 |",
		"| kubelet API requests, second half of the window | 4000 | 50 | 0.013 |",
		"not Failed within 5m0s",
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
