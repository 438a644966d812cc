// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// formatNumber prints n with digits decimals, "-" when it is not a number.
func formatNumber(n Number, digits int) string {
	if n.IsNaN() {
		return "-"
	}
	return strconv.FormatFloat(float64(n), 'f', digits, 64)
}

// table is a Markdown table under construction.
type table struct{ b *strings.Builder }

func newTable(b *strings.Builder, header ...string) table {
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	return table{b}
}

func (t table) row(cells ...string) { fmt.Fprintf(t.b, "| %s |\n", strings.Join(cells, " | ")) }

// compare is a row "metric | stock | fork | fork/stock".
func (t table) compare(metric string, stock, fork Number, digits int) {
	t.row(metric, formatNumber(stock, digits), formatNumber(fork, digits), formatNumber(ratio(fork, stock), 3))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// Markdown is report.md: one table per scenario, the goals, the machine,
// the versions and the command.
func (r *Results) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# dra-failfast benchmark: fork vs stock kubelet (%s mode)\n\n", r.Mode)
	fmt.Fprintf(&b, "Run %s, %s wall time. Command: `%s`.\n\n", r.Started.Format(time.RFC3339), (time.Duration(r.WallSeconds) * time.Second).String(), r.Command)
	fmt.Fprintf(&b, "Machine: %d cores, %.1f GiB memory, kernel %s, %s.\n\n", r.Machine.Cores, float64(r.Machine.MemoryBytes)/(1<<30), r.Machine.Kernel, r.Machine.OS)
	fmt.Fprintf(&b, "- fork: `%s` with %s=true\n- stock: `%s`\n- %s, source %s\n", r.Versions.Fork, gateName, r.Versions.Stock, r.Versions.Go, r.Versions.Commit)
	fmt.Fprintf(&b, "- kubelet syncFrequency %s; test driver with %d devices\n", r.Settings.SyncFrequency, r.Settings.Devices)
	for _, note := range r.Settings.Notes {
		fmt.Fprintf(&b, "- %s\n", note)
	}
	fmt.Fprintf(&b, "\nOne local single-node cluster; only the kubelet binary is replaced between runs, interleaved fork, stock, then stock, fork, and so on; each section says how many repetitions it ran. Times are medians over repetitions.\n\n")

	b.WriteString("## Goals\n\n")
	t := newTable(&b, "scenario", "target", "measured", "met")
	for _, g := range r.Goals {
		t.row(g.Scenario, g.Target, g.Measured, yesNo(g.Met))
	}

	if r.Sizes.runs("1 time to Failed") {
		r.writeTimeToFailed(&b)
	}
	if r.Sizes.only() == nil {
		r.writeFailingScenarios(&b)
	}
	if r.Sizes.runs("3b storm") {
		r.writeRaisedQPSStorm(&b)
	}
	if r.Sizes.runs("4 healthy path") {
		r.writeHealthy(&b)
	}
	if r.Sizes.only() == nil {
		r.writeRecoveryScenarios(&b)
	}
	return b.String()
}

// writeRaisedQPSStorm writes the section of scenario 3b.
func (r *Results) writeRaisedQPSStorm(b *strings.Builder) {
	s := r.Storm
	q := s.RaisedQPSFork
	fmt.Fprintf(b, "\n### 3b. Storm with the fork at kubeAPIQPS %d: %d pods, %s window\n\n", s.KubeletAPIQPS, q.Pods, time.Duration(q.WindowSeconds)*time.Second)
	fmt.Fprintf(b, "Scenario 3 again on the fork, restarted with kubeAPIQPS %d and kubeAPIBurst %d instead of the defaults 50 and 100: every request the kubelet makes for a pod waits for that limiter.\n\n", s.KubeletAPIQPS, 2*s.KubeletAPIQPS)
	if len(s.RaisedQPSRuns) > 1 {
		fmt.Fprintf(b, "%d repetitions, one per round: the column is the median run by seconds until all Failed (all runs: %s s).\n\n",
			len(s.RaisedQPSRuns), s.raisedQPSSeconds())
	}
	header, runs := []string{"fork", "kubeAPIQPS 50 (3)", fmt.Sprintf("kubeAPIQPS %d (3b)", s.KubeletAPIQPS)}, []StormRun{s.Fork, q}
	if r.Sizes.only() != nil { // scenario 3 was not run
		header, runs = []string{header[0], header[2]}, runs[1:]
	}
	t := newTable(b, header...)
	stormRow := func(metric string, value func(StormRun) string) {
		cells := []string{metric}
		for _, run := range runs {
			cells = append(cells, value(run))
		}
		t.row(cells...)
	}
	stormRow("pods Failed", func(r StormRun) string { return fmt.Sprintf("%d of %d", r.Failed, r.Pods) })
	stormRow("seconds until all Failed", func(r StormRun) string { return formatNumber(r.AllFailedSeconds, 1) })
	stormRow("seconds until all bound to the node (control plane)", func(r StormRun) string { return formatNumber(r.AllBoundSeconds, 1) })
	stormRow("bound -> Failed per pod, p50 / p99 / max (ms)", func(r StormRun) string {
		return formatNumber(r.BoundToFailed.P50, 0) + " / " + formatNumber(r.BoundToFailed.P99, 0) + " / " + formatNumber(r.BoundToFailed.Max, 0)
	})
	stormRow("driver prepare / unprepare calls", func(r StormRun) string { return fmt.Sprintf("%d / %d", r.PrepareCalls, r.UnprepareCalls) })
}

// writeHealthy writes the section of scenario 4.
func (r *Results) writeHealthy(b *strings.Builder) {
	h := r.Healthy
	fmt.Fprintf(b, "\n## 4. Healthy path: %d DRA pods, create -> Running (ms)\n\nOne after another, then in batches of %d; %d repetition(s) per kubelet. The spread is the range of the p50 over repetitions: a difference inside it is noise.\n\n", h.Pods, h.Batch, len(h.Fork))
	t := newTable(b, "ms", "stock", "fork", "fork/stock", "stock p50 spread", "fork p50 spread")
	for _, row := range []struct {
		name        string
		stock, fork Quantiles
		sSp, fSp    Spread
	}{
		{"sequential", h.StockSequential, h.ForkSequential, h.StockSequentialP50Spread, h.ForkSequentialP50Spread},
		{"batched", h.StockBatched, h.ForkBatched, h.StockBatchedP50Spread, h.ForkBatchedP50Spread},
	} {
		t.row(row.name+" p50", formatNumber(row.stock.P50, 0), formatNumber(row.fork.P50, 0), formatNumber(ratio(row.fork.P50, row.stock.P50), 3), spreadText(row.sSp, 0), spreadText(row.fSp, 0))
		t.row(row.name+" p99", formatNumber(row.stock.P99, 0), formatNumber(row.fork.P99, 0), formatNumber(ratio(row.fork.P99, row.stock.P99), 3), "", "")
	}
	for _, row := range []struct {
		name        string
		stock, fork Number
		digits      int
	}{
		{"sequential: the kubelet's own start (first sight -> Running), mean per pod", h.StockSequentialKubeletStartMs, h.ForkSequentialKubeletStartMs, 0},
		{"sequential: the kubelet's CPU time per pod", h.StockSequentialCPUMsPerPod, h.ForkSequentialCPUMsPerPod, 1},
		{"batched: the kubelet's own start (first sight -> Running), mean per pod", h.StockBatchedKubeletStartMs, h.ForkBatchedKubeletStartMs, 0},
		{"batched: the DRA manager's PrepareResources, mean per pod", h.StockBatchedPrepareMs, h.ForkBatchedPrepareMs, 1},
		{"batched: the kubelet's API requests per pod", h.StockBatchedRequestsPerPod, h.ForkBatchedRequestsPerPod, 2},
		{"batched: the kubelet's CPU time per pod", h.StockBatchedCPUMsPerPod, h.ForkBatchedCPUMsPerPod, 1},
	} {
		t.row(row.name, formatNumber(row.stock, row.digits), formatNumber(row.fork, row.digits), formatNumber(ratio(row.fork, row.stock), 3), "", "")
	}
	if len(h.SequentialRounds.Rounds) < 2 {
		return
	}
	b.WriteString("\nfork/stock of the p50, round by round: each round measures both kubelets back to back, so the drift between rounds cancels out of each ratio; the mean over rounds and its standard error tell whether a gap is the fork's.\n\n")
	t = newTable(b, "fork/stock p50 per round", "mean", "standard error", "rounds")
	for _, row := range []struct {
		name   string
		rounds PairedRatio
	}{
		{"sequential", h.SequentialRounds},
		{"batched", h.BatchedRounds},
	} {
		var rounds []string
		for _, x := range row.rounds.Rounds {
			rounds = append(rounds, formatNumber(x, 3))
		}
		t.row(row.name, formatNumber(row.rounds.Mean, 3), formatNumber(row.rounds.StdErr, 3), strings.Join(rounds, ", "))
	}
}

// writeTimeToFailed writes the section of scenario 1.
func (r *Results) writeTimeToFailed(b *strings.Builder) {
	ttf := r.TimeToFailed
	stock := fmt.Sprintf("The stock kubelet never fails them: %d of %d pods Failed within %s (the pods of scenario 2).",
		ttf.StockFailed, ttf.StockPods, time.Duration(ttf.StockWindowSeconds)*time.Second)
	notFailed := fmt.Sprintf("not Failed within %s", time.Duration(ttf.StockWindowSeconds)*time.Second)
	if r.Sizes.FailingOnly {
		stock, notFailed = "The stock kubelet is not run in this mode (it never fails them).", "not run"
	}
	fmt.Fprintf(b, "\n## 1. Time to Failed\n\n%d permanently failing pods created one after another, %d repetition(s) on the fork. %s\n\n",
		ttf.Pods, len(ttf.Runs), stock)
	t := newTable(b, "ms", "p50", "p95", "p99", "max", "stock")
	for _, row := range []struct {
		name string
		q    Quantiles
	}{{"driver answer -> API Failed (fork)", ttf.DriverToFailed}, {"create -> API Failed (fork)", ttf.ApplyToFailed}} {
		t.row(row.name, formatNumber(row.q.P50, 0), formatNumber(row.q.P95, 0), formatNumber(row.q.P99, 0), formatNumber(row.q.Max, 0), notFailed)
	}
	fmt.Fprintf(b, "\n![CDF of the time to Failed](%s)\n", TimeToFailedPlot)
}

// writeFailingScenarios writes the sections of scenarios 2 and 3.
func (r *Results) writeFailingScenarios(b *strings.Builder) {
	fmt.Fprintf(b, "\n## 2. Driver calls per permanently failing pod over %s\n\n%d pods created at once on each kubelet, kubelet syncFrequency %s. The stock kubelet retries a failed NodePrepareResources at the pod's next resync: syncFrequency plus up to 50%% jitter.\n\n",
		time.Duration(r.DriverCalls.Fork.WindowSeconds)*time.Second, len(r.DriverCalls.Fork.Pods), r.Settings.SyncFrequency)
	t := newTable(b, "per pod (median)", "stock", "fork", "fork/stock")
	t.compare("prepare calls", r.DriverCalls.Stock.PreparePerPod, r.DriverCalls.Fork.PreparePerPod, 1)
	t.compare("unprepare calls", r.DriverCalls.Stock.UnpreparePerPod, r.DriverCalls.Fork.UnpreparePerPod, 1)
	t.compare("seconds between prepare calls (median)", r.DriverCalls.Stock.RetryIntervalMedian, r.DriverCalls.Fork.RetryIntervalMedian, 1)
	t.row("seconds between prepare calls (min-max)", spreadText(r.DriverCalls.Stock.RetryInterval, 1), spreadText(r.DriverCalls.Fork.RetryInterval, 1), "")
	t.row("pods Failed", strconv.Itoa(r.DriverCalls.Stock.Failed), strconv.Itoa(r.DriverCalls.Fork.Failed), "")
	fmt.Fprintf(b, "\n![Cumulative driver calls for a failing pod](%s)\n", DriverCallsPlot)

	s := r.Storm
	fmt.Fprintf(b, "\n## 3. Storm: %d permanently failing pods at once, %s window\n\n", s.Fork.Pods, time.Duration(s.Fork.WindowSeconds)*time.Second)
	t = newTable(b, "over the window", "stock", "fork", "fork/stock")
	t.row("pods Failed", strconv.Itoa(s.Stock.Failed), strconv.Itoa(s.Fork.Failed), "")
	t.row("seconds until all Failed", formatNumber(s.Stock.AllFailedSeconds, 1), formatNumber(s.Fork.AllFailedSeconds, 1), "")
	t.row("seconds until all bound to the node (control plane)", formatNumber(s.Stock.AllBoundSeconds, 1), formatNumber(s.Fork.AllBoundSeconds, 1), "")
	t.row("bound -> Failed per pod, p50 / p99 / max (ms, the kubelet's part)", "-",
		formatNumber(s.Fork.BoundToFailed.P50, 0)+" / "+formatNumber(s.Fork.BoundToFailed.P99, 0)+" / "+formatNumber(s.Fork.BoundToFailed.Max, 0), "")
	t.compare("kubelet CPU seconds", Number(s.Stock.KubeletCPUSeconds), Number(s.Fork.KubeletCPUSeconds), 2)
	t.compare("kubelet API requests", Number(s.Stock.KubeletAPIRequests), Number(s.Fork.KubeletAPIRequests), 0)
	t.compare("driver prepare calls", Number(s.Stock.PrepareCalls), Number(s.Fork.PrepareCalls), 0)
	t.compare("driver unprepare calls", Number(s.Stock.UnprepareCalls), Number(s.Fork.UnprepareCalls), 0)
	t.compare("kubelet Event writes", Number(s.Stock.KubeletEvents), Number(s.Fork.KubeletEvents), 0)
	stockPerPod, stockEventsPerPod := s.Stock.requestsPerPod()
	forkPerPod, forkEventsPerPod := s.Fork.requestsPerPod()
	t.compare("node API requests per pod, Events apart (audit log)", stockPerPod, forkPerPod, 2)
	t.compare("node Event writes per pod (audit log)", stockEventsPerPod, forkEventsPerPod, 2)
	stockCPU, stockRequests := s.Stock.secondHalf()
	forkCPU, forkRequests := s.Fork.secondHalf()
	t.compare("kubelet CPU seconds, second half of the window", stockCPU, forkCPU, 2)
	t.compare("kubelet API requests, second half of the window", stockRequests, forkRequests, 0)
	fmt.Fprintf(b, "\nThe second half of the window is the steady state: every pod has been admitted, the fork has failed its pods, and the stock kubelet keeps retrying.\n\n![Kubelet CPU over the storm window](%s)\n", StormCPUPlot)
	writeRequestsPerPod(b, s.Stock, s.Fork)

}

// writeRecoveryScenarios writes the sections of scenarios 5 and 6.
func (r *Results) writeRecoveryScenarios(b *strings.Builder) {
	tr := r.Transient
	fmt.Fprintf(b, "\n## 5. Transient then success: %d pods, driver fails %d time(s) then prepares\n\n", tr.Fork.Pods, tr.Fork.Failures)
	t := newTable(b, "", "stock", "fork", "fork/stock")
	t.compare("create -> Running p50 (s)", tr.Stock.ToRunning.P50/1000, tr.Fork.ToRunning.P50/1000, 1)
	t.compare("create -> Running max (s)", tr.Stock.ToRunning.Max/1000, tr.Fork.ToRunning.Max/1000, 1)
	t.compare("seconds between prepare calls (median)", tr.Stock.RetryIntervalMedian, tr.Fork.RetryIntervalMedian, 1)

	c := r.Churn
	fmt.Fprintf(b, "\n## 6. Controller churn: a %d-replica Deployment with invalid claim config, %s\n\nNo admission webhook: this is the churn that KEP-5322's reviewers worried about, unmitigated. 6a and 6b measure the two answers to it (see docs/operators.md): the driver's admission webhook, and device taints.\n\n", c.Fork.Replicas, time.Duration(c.Fork.WindowSeconds)*time.Second)
	t = newTable(b, "over the window", "stock", "fork", "fork/stock")
	t.compare("pods created", Number(c.Stock.PodsCreated), Number(c.Fork.PodsCreated), 0)
	t.compare("Failed pods left behind", Number(c.Stock.FailedLeft), Number(c.Fork.FailedLeft), 0)
	t.compare("Pending pods at the end", Number(c.Stock.Pending), Number(c.Fork.Pending), 0)
	t.compare("driver prepare calls", Number(c.Stock.PrepareCalls), Number(c.Fork.PrepareCalls), 0)
	t.compare("driver unprepare calls", Number(c.Stock.UnprepareCalls), Number(c.Fork.UnprepareCalls), 0)
	c.writeMitigations(b)
}

// writeMitigations writes the sections of scenarios 6a and 6b: the churn
// with the webhook registered, and with device taints.
func (c Churn) writeMitigations(b *strings.Builder) {
	count := func(n int) string { return strconv.Itoa(n) }
	w := c.Webhook
	fmt.Fprintf(b, "\n### 6a. With the driver's admission webhook registered: the same Deployment, %s\n\n"+
		"The test driver's validating webhook (the one the e2e tests register) checks the driver's opaque config when the claim template is created, and refuses it. "+
		"The Deployment is created all the same: its pods reference a template that does not exist, the resourceclaim controller cannot create their claims (%s Events), "+
		"and they wait, unscheduled. No pod reaches the kubelet: both kubelets should show the same.\n\n",
		time.Duration(w.Fork.WindowSeconds)*time.Second, claimCreationFailedReason)
	t := newTable(b, "over the window", "stock", "fork")
	t.row("claim template denied at create", yesNo(w.Stock.TemplateDenied), yesNo(w.Fork.TemplateDenied))
	for _, row := range []struct {
		name        string
		stock, fork int
	}{
		{"pods created", w.Stock.PodsCreated, w.Fork.PodsCreated},
		{"Failed pods", w.Stock.Failed, w.Fork.Failed},
		{"Pending pods at the end", w.Stock.Pending, w.Fork.Pending},
		{"Running pods at the end", w.Stock.Running, w.Fork.Running},
		{claimCreationFailedReason + " Event writes", w.Stock.ClaimCreationFailures, w.Fork.ClaimCreationFailures},
		{"driver prepare calls", w.Stock.PrepareCalls, w.Fork.PrepareCalls},
		{"driver unprepare calls", w.Stock.UnprepareCalls, w.Fork.UnprepareCalls},
	} {
		t.row(row.name, count(row.stock), count(row.fork))
	}
	if message := cmp.Or(w.Fork.DenyMessage, w.Stock.DenyMessage); message != "" {
		fmt.Fprintf(b, "\nThe API server's answer: `%s`\n", strings.NewReplacer("`", "'", "\n", " ").Replace(message))
	}

	d := c.DeviceTaints
	fmt.Fprintf(b, "\n### 6b. With device taints: %d of %d devices broken, %s\n\n"+
		"A %d-replica Deployment with valid claims for the devices of a second test driver (%s), the first of them broken (%s). "+
		"The driver reports a broken device with failfastplugin.DeviceFault: the device is tainted NoSchedule, and once the taint is in the API the kubelet gets a permanent answer. "+
		"The allocator tries devices in order, so the replicas land on the broken devices first. "+
		"The fork fails such a pod once, and the ReplicaSet's replacement, kept off the tainted device, runs; "+
		"the stock kubelet retries the prepare at every resync and the pod stays Pending (a NoSchedule taint does not evict).\n\n",
		len(d.Fork.BrokenDevices), d.Fork.Devices, time.Duration(d.Fork.WindowSeconds)*time.Second,
		d.Fork.Replicas, faultyDriverName, strings.Join(d.Fork.BrokenDevices, ", "))
	t = newTable(b, "over the window", "stock", "fork")
	for _, row := range []struct {
		name        string
		stock, fork int
	}{
		{"pods created", d.Stock.PodsCreated, d.Fork.PodsCreated},
		{"Failed pods", d.Stock.Failed, d.Fork.Failed},
		{"Failed pods of one broken device, at most", d.Stock.MaxFailedPerDevice(), d.Fork.MaxFailedPerDevice()},
		{"Failed pods on healthy devices", d.Stock.FailedOnHealthy(), d.Fork.FailedOnHealthy()},
		{"Running pods at the end", d.Stock.Running, d.Fork.Running},
		{"Pending pods at the end", d.Stock.Pending, d.Fork.Pending},
	} {
		t.row(row.name, count(row.stock), count(row.fork))
	}
	t.row("seconds until all replicas Running", formatNumber(d.Stock.AllRunningSeconds, 1), formatNumber(d.Fork.AllRunningSeconds, 1))
	t.row("devices tainted at the end", devicesText(d.Stock.TaintedDevices), devicesText(d.Fork.TaintedDevices))
	t.row("driver prepare calls", count(d.Stock.PrepareCalls), count(d.Fork.PrepareCalls))
	t.row("driver unprepare calls", count(d.Stock.UnprepareCalls), count(d.Fork.UnprepareCalls))
}

func devicesText(devices []string) string {
	if len(devices) == 0 {
		return "none"
	}
	return strings.Join(devices, ", ")
}

func spreadText(s Spread, digits int) string {
	if s.Min.IsNaN() {
		return "-"
	}
	return formatNumber(s.Min, digits) + "-" + formatNumber(s.Max, digits)
}

// writeRequestsPerPod breaks the storm's node requests per pod down by
// request (the audit log): what failing a pod costs the fork, what retrying
// it costs the stock kubelet over the window.
func writeRequestsPerPod(b *strings.Builder, stock, fork StormRun) {
	if stock.NodeRequests == nil && fork.NodeRequests == nil {
		return
	}
	keys := map[string]bool{}
	for k := range stock.NodeRequests {
		keys[k] = true
	}
	for k := range fork.NodeRequests {
		keys[k] = true
	}
	sorted := slices.Sorted(maps.Keys(keys))
	fmt.Fprintf(b, "\nNode requests per pod over the window, by request (apiserver audit log):\n\n")
	t := newTable(b, "per pod", "stock", "fork")
	perPod := func(r StormRun, k string) string {
		if r.Pods == 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(r.NodeRequests[k])/float64(r.Pods), 'f', 2, 64)
	}
	for _, k := range sorted {
		t.row("`"+k+"`", perPod(stock, k), perPod(fork, k))
	}
}
