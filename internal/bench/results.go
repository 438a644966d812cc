// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Results is results.json.
type Results struct {
	Mode        Mode      `json:"mode"`
	Command     string    `json:"command"`
	Started     time.Time `json:"started"`
	WallSeconds float64   `json:"wallSeconds"`
	Machine     Machine   `json:"machine"`
	Versions    Versions  `json:"versions"`
	Settings    Settings  `json:"settings"`
	Sizes       Sizes     `json:"sizes"`

	TimeToFailed TimeToFailed `json:"timeToFailed"`
	DriverCalls  DriverCalls  `json:"driverCalls"`
	Storm        Storm        `json:"storm"`
	Healthy      Healthy      `json:"healthy"`
	Transient    Transient    `json:"transient"`
	Churn        Churn        `json:"churn"`

	// Goals are the targets, each with what was measured.
	Goals []Goal `json:"goals"`
}

// Machine describes where the run happened.
type Machine struct {
	Cores       int    `json:"cores"`
	MemoryBytes int64  `json:"memoryBytes"`
	Kernel      string `json:"kernel"`
	OS          string `json:"os"`
}

// Versions are the binaries compared and the source they came from.
type Versions struct {
	Fork   string `json:"fork"`
	Stock  string `json:"stock"`
	Go     string `json:"go"`
	Commit string `json:"commit"`
}

// Settings are the kubelet and driver settings both kubelets ran with.
type Settings struct {
	SyncFrequency string          `json:"syncFrequency"`
	ForkGates     map[string]bool `json:"forkGates"`
	Devices       int             `json:"devices"`
	Notes         []string        `json:"notes"`
}

// Quantiles of a sample, in milliseconds (N: sample size).
type Quantiles struct {
	N   int    `json:"n"`
	P50 Number `json:"p50"`
	P95 Number `json:"p95"`
	P99 Number `json:"p99"`
	Max Number `json:"max"`
}

// Number is a float64 that is null in JSON when it is not a number (a
// ratio without a denominator, a median of nothing).
type Number float64

// NaN is the Number of nothing measured.
var NaN = Number(math.NaN())

// IsNaN tells whether n is not a number.
func (n Number) IsNaN() bool { return math.IsNaN(float64(n)) }

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) {
	if n.IsNaN() || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Number) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*n = NaN
		return nil
	}
	var f float64
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// quantilesOf returns the nearest-rank quantiles of ms.
func quantilesOf(ms []float64) Quantiles {
	if len(ms) == 0 {
		return Quantiles{}
	}
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	rank := func(p float64) Number {
		i := int(math.Ceil(p*float64(len(sorted)))) - 1
		return Number(sorted[max(i, 0)])
	}
	return Quantiles{N: len(sorted), P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: Number(sorted[len(sorted)-1])}
}

// median returns the median of xs (the mean of the middle two for an even
// count), NaN for none.
func median(xs []float64) Number {
	if len(xs) == 0 {
		return NaN
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return Number(sorted[n/2])
	}
	return Number((sorted[n/2-1] + sorted[n/2]) / 2)
}

// medianQuantiles is the quantile-wise median over repetitions.
func medianQuantiles(runs []Quantiles) Quantiles {
	pick := func(f func(Quantiles) Number) Number {
		xs := make([]float64, 0, len(runs))
		for _, q := range runs {
			if q.N > 0 {
				xs = append(xs, float64(f(q)))
			}
		}
		return median(xs)
	}
	n := 0
	for _, q := range runs {
		n += q.N
	}
	return Quantiles{N: n,
		P50: pick(func(q Quantiles) Number { return q.P50 }), P95: pick(func(q Quantiles) Number { return q.P95 }),
		P99: pick(func(q Quantiles) Number { return q.P99 }), Max: pick(func(q Quantiles) Number { return q.Max })}
}

// medianStormRun is the run whose AllFailedSeconds is the median of runs
// (the upper median of an even count); a run whose pods did not all fail
// counts as the slowest.
func medianStormRun(runs []StormRun) StormRun {
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b StormRun) int {
		return cmp.Compare(allFailedOrInf(a), allFailedOrInf(b))
	})
	return sorted[len(sorted)/2]
}

func allFailedOrInf(r StormRun) float64 {
	if r.AllFailedSeconds.IsNaN() {
		return math.Inf(1)
	}
	return float64(r.AllFailedSeconds)
}

// Spread is the range of one statistic over repetitions.
type Spread struct {
	Min Number `json:"min"`
	Max Number `json:"max"`
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{Min: NaN, Max: NaN}
	}
	return Spread{Min: Number(slices.Min(xs)), Max: Number(slices.Max(xs))}
}

// ratio is a/b, NaN when b is 0 or either is NaN.
func ratio(a, b Number) Number {
	if b == 0 || a.IsNaN() || b.IsNaN() {
		return NaN
	}
	return a / b
}

// TimeToFailed is scenario 1: permanently failing pods created one after
// another on the fork. The stock kubelet never fails them: its figures are
// the scenario-2 pods watched for the whole calls window.
type TimeToFailed struct {
	Pods int               `json:"pods"`
	Runs []TimeToFailedRun `json:"runs"`
	// DriverToFailed and ApplyToFailed are the medians over Runs.
	DriverToFailed Quantiles `json:"driverToFailedMs"`
	ApplyToFailed  Quantiles `json:"applyToFailedMs"`
	// StockFailed of StockPods failed within StockWindowSeconds.
	StockFailed        int     `json:"stockFailed"`
	StockPods          int     `json:"stockPods"`
	StockWindowSeconds float64 `json:"stockWindowSeconds"`
}

// TimeToFailedRun is one repetition of scenario 1.
type TimeToFailedRun struct {
	// DriverToFailedMs: from the driver's permanent answer (driver-side
	// clock) to phase Failed seen by a watch. ApplyToFailedMs: from the
	// create request to phase Failed.
	DriverToFailedMs []float64 `json:"driverToFailedMs"`
	ApplyToFailedMs  []float64 `json:"applyToFailedMs"`
	DriverToFailed   Quantiles `json:"driverToFailed"`
	ApplyToFailed    Quantiles `json:"applyToFailed"`
}

// DriverCalls is scenario 2.
type DriverCalls struct {
	Fork  CallsRun `json:"fork"`
	Stock CallsRun `json:"stock"`
}

// CallsRun is scenario 2 on one kubelet.
type CallsRun struct {
	WindowSeconds float64    `json:"windowSeconds"`
	Pods          []PodCalls `json:"pods"`
	// PreparePerPod and UnpreparePerPod: the median over the pods.
	PreparePerPod   Number `json:"preparePerPod"`
	UnpreparePerPod Number `json:"unpreparePerPod"`
	// RetryInterval: seconds between consecutive prepare calls of a pod.
	RetryIntervalMedian Number `json:"retryIntervalMedianSeconds"`
	RetryInterval       Spread `json:"retryIntervalSeconds"`
	Failed              int    `json:"failed"`
}

// PodCalls are the driver calls for one pod's claim.
type PodCalls struct {
	Prepare   int  `json:"prepare"`
	Unprepare int  `json:"unprepare"`
	Failed    bool `json:"failed"`
	// Offsets of the calls in seconds since the pod was created.
	PrepareAt   []float64 `json:"prepareAtSeconds"`
	UnprepareAt []float64 `json:"unprepareAtSeconds"`
}

// Storm is scenario 3, and 3b: the storm on the fork with the kubelet's
// client rate raised (KubeletAPIQPS, burst twice that).
type Storm struct {
	Fork  StormRun `json:"fork"`
	Stock StormRun `json:"stock"`
	// RaisedQPSRuns are scenario 3b's repetitions (one per round, fork
	// only); RaisedQPSFork is their median by AllFailedSeconds, the upper
	// one of an even count (results before 2026-11-27 have only it).
	RaisedQPSRuns []StormRun `json:"raisedQPSRuns,omitempty"`
	RaisedQPSFork StormRun   `json:"raisedQPSFork"`
	KubeletAPIQPS int        `json:"kubeletAPIQPS"`
	// CPURatio and RequestsRatio are fork/stock.
	CPURatio      Number `json:"cpuRatio"`
	RequestsRatio Number `json:"requestsRatio"`
}

// StormRun is scenario 3 on one kubelet.
type StormRun struct {
	Pods          int     `json:"pods"`
	WindowSeconds float64 `json:"windowSeconds"`
	Failed        int     `json:"failed"`
	// AllFailedSeconds: from the first create to the last pod Failed, NaN
	// if not all failed within the window.
	AllFailedSeconds Number `json:"allFailedSeconds"`
	// AllBoundSeconds: from the first create to the last pod bound to the
	// node (the control plane's part: claims created from templates,
	// allocated, pods scheduled), NaN if not all were bound.
	AllBoundSeconds Number `json:"allBoundSeconds"`
	// BoundToFailed: per pod, from bound to the node to Failed (ms): the
	// kubelet's part.
	BoundToFailed      Quantiles `json:"boundToFailedMs"`
	KubeletCPUSeconds  float64   `json:"kubeletCPUSeconds"`
	KubeletAPIRequests float64   `json:"kubeletAPIRequests"`
	PrepareCalls       int       `json:"prepareCalls"`
	UnprepareCalls     int       `json:"unprepareCalls"`
	// KubeletEvents counts the kubelet's Event writes in the namespace
	// (each Event's count: a repeated Event is one update each time).
	KubeletEvents int `json:"kubeletEvents"`
	// NodeRequests counts the node's requests in the namespace over the
	// window, by "verb resource[/subresource]", from the apiserver's audit
	// log (localcluster.Cluster.NodeRequests).
	NodeRequests map[string]int `json:"nodeRequests,omitempty"`
	// Timeline samples the kubelet's spending from the first create, ten
	// times over the window.
	Timeline []StormSample `json:"timeline"`
}

// StormSample is the kubelet's spending since the storm began.
type StormSample struct {
	Seconds            float64 `json:"seconds"`
	Failed             int     `json:"failed"`
	KubeletCPUSeconds  float64 `json:"kubeletCPUSeconds"`
	KubeletAPIRequests float64 `json:"kubeletAPIRequests"`
}

// secondHalf returns the kubelet's CPU seconds and API requests in the
// second half of the window (from the first sample at or after its middle to
// the end): the steady state, once the pods have been admitted. NaN without
// samples.
func (r StormRun) secondHalf() (cpu, requests Number) {
	if len(r.Timeline) < 2 {
		return NaN, NaN
	}
	end := r.Timeline[len(r.Timeline)-1]
	for _, s := range r.Timeline {
		if s.Seconds >= r.WindowSeconds/2 && s != end {
			return Number(end.KubeletCPUSeconds - s.KubeletCPUSeconds), Number(end.KubeletAPIRequests - s.KubeletAPIRequests)
		}
	}
	return NaN, NaN
}

// Healthy is scenario 4.
type Healthy struct {
	Pods  int          `json:"pods"`
	Batch int          `json:"batch"`
	Fork  []HealthyRun `json:"fork"`
	Stock []HealthyRun `json:"stock"`
	// Medians over repetitions per kubelet.
	ForkSequential  Quantiles `json:"forkSequential"`
	StockSequential Quantiles `json:"stockSequential"`
	ForkBatched     Quantiles `json:"forkBatched"`
	StockBatched    Quantiles `json:"stockBatched"`
	// Spread of the p50 over repetitions, per kubelet: the noise.
	ForkSequentialP50Spread  Spread `json:"forkSequentialP50Spread"`
	StockSequentialP50Spread Spread `json:"stockSequentialP50Spread"`
	ForkBatchedP50Spread     Spread `json:"forkBatchedP50Spread"`
	StockBatchedP50Spread    Spread `json:"stockBatchedP50Spread"`
	// Median over repetitions of HealthyRun.SequentialKubeletStartMs and
	// HealthyRun.SequentialCPUMsPerPod.
	ForkSequentialKubeletStartMs  Number `json:"forkSequentialKubeletStartMs"`
	StockSequentialKubeletStartMs Number `json:"stockSequentialKubeletStartMs"`
	ForkSequentialCPUMsPerPod     Number `json:"forkSequentialCPUMsPerPod"`
	StockSequentialCPUMsPerPod    Number `json:"stockSequentialCPUMsPerPod"`
	// Median over repetitions of HealthyRun.BatchedPrepareMs.
	ForkBatchedPrepareMs  Number `json:"forkBatchedPrepareMs"`
	StockBatchedPrepareMs Number `json:"stockBatchedPrepareMs"`
	// Median over repetitions of HealthyRun.BatchedRequestsPerPod.
	ForkBatchedRequestsPerPod  Number `json:"forkBatchedRequestsPerPod"`
	StockBatchedRequestsPerPod Number `json:"stockBatchedRequestsPerPod"`
	// Median over repetitions of HealthyRun.BatchedKubeletStartMs.
	ForkBatchedKubeletStartMs  Number `json:"forkBatchedKubeletStartMs"`
	StockBatchedKubeletStartMs Number `json:"stockBatchedKubeletStartMs"`
	// Median over repetitions of HealthyRun.BatchedCPUMsPerPod.
	ForkBatchedCPUMsPerPod  Number `json:"forkBatchedCPUMsPerPod"`
	StockBatchedCPUMsPerPod Number `json:"stockBatchedCPUMsPerPod"`
	// fork/stock of the p50, round by round.
	SequentialRounds PairedRatio `json:"sequentialRounds"`
	BatchedRounds    PairedRatio `json:"batchedRounds"`
}

// PairedRatio is fork/stock of one statistic in each round, where the two
// kubelets ran back to back: the drift between rounds (a p50 moves about 5 %
// from one repetition to the next on two cores) cancels out of each ratio.
type PairedRatio struct {
	Rounds []Number `json:"rounds"`
	Mean   Number   `json:"mean"`
	// StdErr is the standard error of Mean: the rounds' sample standard
	// deviation over the square root of their count; NaN under two rounds.
	StdErr Number `json:"stdErr"`
}

// text is what a goal with the given limit adds for the rounds: "; round
// by round 1.012, standard error 0.006 (10 rounds)", nothing under two
// rounds. When the limit lies within two standard errors of the mean, the
// text says that the run does not settle the goal either way: a full run's
// two rounds of a 2 % ratio whose rounds spread by 5 % (docs/benchmarks.md).
func (p PairedRatio) text(limit Number) string {
	if len(p.Rounds) < 2 {
		return ""
	}
	text := fmt.Sprintf("; round by round %s, standard error %s (%d rounds)", formatNumber(p.Mean, 3), formatNumber(p.StdErr, 3), len(p.Rounds))
	if math.Abs(float64(p.Mean-limit)) < 2*float64(p.StdErr) {
		text += fmt.Sprintf(": %s lies within two standard errors, too few rounds to settle the goal (make bench BENCH_MODE=healthy)", formatNumber(limit, 2))
	}
	return text
}

// pairedRatio pairs fork[i] with stock[i] (round i) and summarizes the
// ratios of pick; a round missing either kubelet or a value is left out.
func pairedRatio(fork, stock []HealthyRun, pick func(HealthyRun) Number) PairedRatio {
	p := PairedRatio{Mean: NaN, StdErr: NaN}
	var sum float64
	for i := range min(len(fork), len(stock)) {
		if x := ratio(pick(fork[i]), pick(stock[i])); !x.IsNaN() {
			p.Rounds = append(p.Rounds, x)
			sum += float64(x)
		}
	}
	n := float64(len(p.Rounds))
	if n == 0 {
		return p
	}
	p.Mean = Number(sum / n)
	if n < 2 {
		return p
	}
	var squares float64
	for _, x := range p.Rounds {
		squares += (float64(x) - float64(p.Mean)) * (float64(x) - float64(p.Mean))
	}
	p.StdErr = Number(math.Sqrt(squares/(n-1)) / math.Sqrt(n))
	return p
}

// HealthyRun is one repetition of scenario 4 on one kubelet: apply ->
// Running in milliseconds.
type HealthyRun struct {
	Sequential Quantiles `json:"sequential"`
	Batched    Quantiles `json:"batched"`
	// SequentialMs and BatchedMs are every pod's create -> Running, in the
	// order the pods were created: what the quantiles summarize.
	SequentialMs []float64 `json:"sequentialMs,omitempty"`
	BatchedMs    []float64 `json:"batchedMs,omitempty"`
	// SequentialKubeletStartMs and SequentialCPUMsPerPod are
	// BatchedKubeletStartMs and BatchedCPUMsPerPod over the pods created one
	// after another.
	SequentialKubeletStartMs Number `json:"sequentialKubeletStartMs"`
	SequentialCPUMsPerPod    Number `json:"sequentialCPUMsPerPod"`
	// BatchedPrepareMs is the mean duration of the DRA manager's
	// PrepareResources for the batched pods, from the kubelet's metrics: the
	// part of a pod's start where the fork's work on a healthy pod happens.
	BatchedPrepareMs Number `json:"batchedPrepareMs"`
	// BatchedRequestsPerPod is the kubelet's API requests during the
	// batches per pod: at its client rate limit (50 QPS) a batch of 20
	// pods waits for the limiter once it has spent its burst.
	BatchedRequestsPerPod Number `json:"batchedRequestsPerPod"`
	// BatchedCPUMsPerPod is the kubelet's CPU time (user plus system)
	// during the batches per pod: on two cores a batch waits for CPU, so
	// more work per pod in the kubelet would show here first.
	BatchedCPUMsPerPod Number `json:"batchedCPUMsPerPod"`
	// BatchedKubeletStartMs is the mean of the kubelet's own start duration
	// (kubelet_pod_start_duration_seconds: the pod's first sight by the
	// kubelet -> Running) over the batched pods: a gap in create -> Running
	// that is not here is not the kubelet's.
	BatchedKubeletStartMs Number `json:"batchedKubeletStartMs"`
}

// Transient is scenario 5.
type Transient struct {
	Fork  TransientRun `json:"fork"`
	Stock TransientRun `json:"stock"`
}

// TransientRun is scenario 5 on one kubelet.
type TransientRun struct {
	Pods     int `json:"pods"`
	Failures int `json:"failures"`
	// ToRunning: apply -> Running in milliseconds.
	ToRunning Quantiles `json:"toRunningMs"`
	// RetryIntervalMedian: seconds between the prepare calls of a pod.
	RetryIntervalMedian Number `json:"retryIntervalMedianSeconds"`
	RetryInterval       Spread `json:"retryIntervalSeconds"`
}

// Churn is scenario 6: Fork and Stock unmitigated, then with each
// mitigation.
type Churn struct {
	Fork  ChurnRun `json:"fork"`
	Stock ChurnRun `json:"stock"`
	// Webhook is 6a: the driver's admission webhook registered.
	Webhook WebhookChurn `json:"webhook"`
	// DeviceTaints is 6b: a driver that taints its broken devices.
	DeviceTaints TaintChurn `json:"deviceTaints"`
}

// ChurnRun is scenario 6 on one kubelet.
type ChurnRun struct {
	Replicas       int     `json:"replicas"`
	WindowSeconds  float64 `json:"windowSeconds"`
	PodsCreated    int     `json:"podsCreated"`
	FailedLeft     int     `json:"failedLeft"`
	Pending        int     `json:"pending"`
	PrepareCalls   int     `json:"prepareCalls"`
	UnprepareCalls int     `json:"unprepareCalls"`
}

// WebhookChurn is scenario 6a.
type WebhookChurn struct {
	Fork  WebhookChurnRun `json:"fork"`
	Stock WebhookChurnRun `json:"stock"`
}

// WebhookChurnRun is scenario 6a on one kubelet: the churn Deployment
// (invalid claim config) with the driver's admission webhook registered,
// watched for Sizes.MitigatedChurnWindow. Phases are counted at the end of
// the window.
type WebhookChurnRun struct {
	Replicas      int     `json:"replicas"`
	WindowSeconds float64 `json:"windowSeconds"`
	// TemplateDenied tells whether the webhook refused the claim template
	// at create; DenyMessage is what the API server answered.
	TemplateDenied bool   `json:"templateDenied"`
	DenyMessage    string `json:"denyMessage,omitempty"`
	PodsCreated    int    `json:"podsCreated"`
	Failed         int    `json:"failed"`
	Pending        int    `json:"pending"`
	Running        int    `json:"running"`
	// ClaimCreationFailures counts the resourceclaim controller's Event
	// writes saying it cannot create a pod's claims
	// (FailedResourceClaimCreation): the pods wait for the refused template.
	ClaimCreationFailures int `json:"claimCreationFailures"`
	PrepareCalls          int `json:"prepareCalls"`
	UnprepareCalls        int `json:"unprepareCalls"`
}

// waiting tells whether the run shows what the webhook is for: the template
// denied, every replica created and waiting for it (none Failed or
// Running), no call to the driver.
func (r WebhookChurnRun) waiting() bool {
	return r.Replicas > 0 && r.TemplateDenied && r.PodsCreated == r.Replicas && r.Failed == 0 && r.Running == 0 && r.PrepareCalls == 0
}

// TaintChurn is scenario 6b.
type TaintChurn struct {
	Fork  TaintChurnRun `json:"fork"`
	Stock TaintChurnRun `json:"stock"`
}

// TaintChurnRun is scenario 6b on one kubelet: the churn Deployment with
// valid claims on a driver whose first devices are broken and tainted when
// they fail a claim, watched for Sizes.MitigatedChurnWindow. Phases and
// taints are read at the end of the window.
type TaintChurnRun struct {
	Replicas      int      `json:"replicas"`
	WindowSeconds float64  `json:"windowSeconds"`
	Devices       int      `json:"devices"`
	BrokenDevices []string `json:"brokenDevices"`
	PodsCreated   int      `json:"podsCreated"`
	Failed        int      `json:"failed"`
	Pending       int      `json:"pending"`
	Running       int      `json:"running"`
	// FailedOn counts the Failed pods per device of their claim ("unknown":
	// the driver never saw the claim).
	FailedOn map[string]int `json:"failedOn"`
	// TaintedDevices carry the device fault taint (NoSchedule) in the
	// driver's ResourceSlices.
	TaintedDevices []string `json:"taintedDevices"`
	// AllRunningSeconds: from the Deployment's create until Replicas pods
	// ran, NaN if they did not within the window.
	AllRunningSeconds Number `json:"allRunningSeconds"`
	PrepareCalls      int    `json:"prepareCalls"`
	UnprepareCalls    int    `json:"unprepareCalls"`
}

// MaxFailedPerDevice is the most Failed pods of one device.
func (r TaintChurnRun) MaxFailedPerDevice() int {
	n := 0
	for _, failed := range r.FailedOn {
		n = max(n, failed)
	}
	return n
}

// FailedOnHealthy counts the Failed pods whose device was not broken (or is
// unknown).
func (r TaintChurnRun) FailedOnHealthy() int {
	n := 0
	for device, failed := range r.FailedOn {
		if !slices.Contains(r.BrokenDevices, device) {
			n += failed
		}
	}
	return n
}

// UntaintedFailing lists the devices that failed a pod but carry no taint,
// sorted.
func (r TaintChurnRun) UntaintedFailing() []string {
	var untainted []string
	for device := range r.FailedOn {
		if !slices.Contains(r.TaintedDevices, device) {
			untainted = append(untainted, device)
		}
	}
	slices.Sort(untainted)
	return untainted
}

// Goal is one target of the issue and whether the run met it.
type Goal struct {
	Scenario string `json:"scenario"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// requestsPerPod is NodeRequests per pod: the API requests without Events,
// and the Event writes (the kubelet's Events have a rate limiter of their
// own), NaN without an audit log.
func (r StormRun) requestsPerPod() (api, events Number) {
	if r.NodeRequests == nil || r.Pods == 0 {
		return NaN, NaN
	}
	var a, e int
	for request, n := range r.NodeRequests {
		if strings.HasSuffix(request, " events") {
			e += n
		} else {
			a += n
		}
	}
	return Number(float64(a) / float64(r.Pods)), Number(float64(e) / float64(r.Pods))
}
