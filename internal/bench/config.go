// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package bench measures the fork against the stock kubelet on the
// local cluster (internal/localcluster) with the test driver
// (internal/testdriver): the same node, driver and workload, only the
// kubelet binary changes between runs (e2eframework.ReplaceKubelet).
//
// Run executes six scenarios (see runScenarios), the sixth
// (controller churn) also with each of its two mitigations: the driver's
// admission webhook registered, and device taints. It writes results.json,
// report.md and SVG plots into Config.OutDir, and returns the results.
// cmd/dra-failfast-bench is its command line (make bench).
package bench

import (
	"fmt"
	"io"
	"time"
)

// Mode chooses the sizes of a run.
type Mode string

const (
	// Full is the benchmark of the issue: 30 sequential failing pods,
	// 5-minute windows, a 200-pod storm, 100 healthy pods; the noisy
	// scenarios repeated, interleaved fork/stock/stock/fork: four rounds of
	// the healthy path (4; a round's fork/stock ratio spreads about 3 %, so
	// two rounds cannot tell a 2 % goal from noise, and four halve the
	// standard error of one), three of the failing path on the fork (1, 3b;
	// the median of three is the middle run, not the slower of two). About
	// 70 minutes.
	Full Mode = "full"
	// Smoke runs every scenario with tiny counts and short windows (a few
	// minutes), so that the harness cannot rot; make test runs it.
	Smoke Mode = "smoke"
	// Latency runs only the scenarios whose goals are ratios or seconds that
	// one run cannot settle on a 2-core machine (4 healthy path, 3b storm at
	// a raised client rate), at full size, with four repetitions per kubelet
	// instead of two. About 25 minutes.
	Latency Mode = "latency"
	// FailingPath runs only the scenarios of the failing path on the fork
	// kubelet (-fork-kubelet, which may be the upstream-shaped series'
	// kubelet: make test-series compares the two): 1 time to Failed and 3b
	// storm, at full size, three repetitions, no stock kubelet. About 10
	// minutes.
	FailingPath Mode = "failing"
	// HealthyPath runs only scenario 4 (the healthy path), at full size, with
	// ten repetitions per kubelet: its goal is a ratio of 1.02 whose noise
	// between repetitions (a p50 spreads about 5 %) four repetitions cannot
	// separate from it. Each round measures fork and stock back to back, so
	// the report's paired ratio (mean over rounds and its standard error)
	// drops the drift between rounds. About 50 minutes.
	HealthyPath Mode = "healthy"
)

// Kubelet names the kubelet under test.
type Kubelet string

const (
	// Stock is upstream's kubelet of the same release (_output/bin/kubelet-stock).
	Stock Kubelet = "stock"
	// Fork is the dra-failfast kubelet with DRAHandlePermanentDriverFailures on.
	Fork Kubelet = "fork"
)

// Sizes are the counts and windows of a run.
type Sizes struct {
	// Repetitions of the failing path's scenarios whose noise matters (1
	// time to Failed and 3b storm, on the fork), one per round of the
	// interleaved fork/stock rounds.
	Repetitions int `json:"repetitions"`
	// HealthyRounds of scenario 4 (the healthy path), each a turn of fork
	// and stock back to back, before the failing path's rounds.
	HealthyRounds int `json:"healthyRounds"`
	// FailingPods: permanently failing pods created one after another
	// (time to Failed).
	FailingPods int `json:"failingPods"`
	// CallsPods and CallsWindow: permanently failing pods whose driver
	// calls are counted over the window.
	CallsPods   int           `json:"callsPods"`
	CallsWindow time.Duration `json:"callsWindow"`
	// StormPods permanently failing pods created at once; kubelet CPU, API
	// requests, driver calls and Events are counted over StormWindow.
	StormPods   int           `json:"stormPods"`
	StormWindow time.Duration `json:"stormWindow"`
	// RaisedQPSStormWindow is how long scenario 3b (the storm on the fork
	// with the kubelet's client rate raised to raisedKubeletQPS) is watched:
	// only its time to all Failed is measured.
	RaisedQPSStormWindow time.Duration `json:"raisedQPSStormWindow"`
	// HealthyPods are created one after another, then again in batches of
	// HealthyBatch.
	HealthyPods  int `json:"healthyPods"`
	HealthyBatch int `json:"healthyBatch"`
	// TransientPods fail TransientFailures times, then prepare.
	TransientPods     int `json:"transientPods"`
	TransientFailures int `json:"transientFailures"`
	// ChurnReplicas of a Deployment whose claims have invalid config, watched
	// for ChurnWindow.
	ChurnReplicas int           `json:"churnReplicas"`
	ChurnWindow   time.Duration `json:"churnWindow"`
	// MitigatedChurnWindow is how long the churn Deployment is watched with
	// a mitigation in place (the driver's admission webhook registered, or
	// device taints): their outcome settles within seconds.
	MitigatedChurnWindow time.Duration `json:"mitigatedChurnWindow"`
	// SyncFrequency is both kubelets' syncFrequency, 0 for the default
	// (1m): a failed prepare is retried at the pod's next resync.
	SyncFrequency time.Duration `json:"syncFrequency"`
	// AwaitCleanup waits until a scenario's namespace is gone before the
	// next scenario starts, so that each measures an idle node.
	AwaitCleanup bool `json:"awaitCleanup"`
	// LatencyOnly: run scenarios 4 and 3b only (mode Latency).
	LatencyOnly bool `json:"latencyOnly,omitempty"`
	// FailingOnly: run scenarios 1 and 3b only, on the fork alone (mode
	// FailingPath).
	FailingOnly bool `json:"failingOnly,omitempty"`
	// HealthyOnly: run scenario 4 only (mode HealthyPath).
	HealthyOnly bool `json:"healthyOnly,omitempty"`
}

// only returns the goals' scenarios a partial mode runs, nil for all.
func (s Sizes) only() map[string]bool {
	switch {
	case s.LatencyOnly:
		return map[string]bool{"3b storm": true, "4 healthy path": true}
	case s.FailingOnly:
		return map[string]bool{"1 time to Failed": true, "3b storm": true}
	case s.HealthyOnly:
		return map[string]bool{"4 healthy path": true}
	}
	return nil
}

// runs tells whether a run of these sizes runs scenario (a goal's name).
func (s Sizes) runs(scenario string) bool {
	only := s.only()
	return only == nil || only[scenario]
}

// SizesFor returns the sizes of mode.
func SizesFor(mode Mode) (Sizes, error) {
	switch mode {
	case Full:
		return Sizes{
			Repetitions: 3, HealthyRounds: 4,
			FailingPods: 30,
			CallsPods:   3, CallsWindow: 5 * time.Minute,
			StormPods: 200, StormWindow: 5 * time.Minute, RaisedQPSStormWindow: time.Minute,
			HealthyPods: 100, HealthyBatch: 20,
			TransientPods: 5, TransientFailures: 2,
			ChurnReplicas: 2, ChurnWindow: 5 * time.Minute,
			MitigatedChurnWindow: 2 * time.Minute,
			AwaitCleanup:         true,
		}, nil
	case Latency:
		return Sizes{
			Repetitions: 4, HealthyRounds: 4,
			StormPods: 200, RaisedQPSStormWindow: time.Minute,
			HealthyPods: 100, HealthyBatch: 20,
			AwaitCleanup: true,
			LatencyOnly:  true,
		}, nil
	case FailingPath:
		return Sizes{
			Repetitions: 3,
			FailingPods: 30,
			StormPods:   200, RaisedQPSStormWindow: time.Minute,
			AwaitCleanup: true,
			FailingOnly:  true,
		}, nil
	case HealthyPath:
		return Sizes{
			HealthyRounds: 10,
			HealthyPods:   100, HealthyBatch: 20,
			AwaitCleanup: true,
			HealthyOnly:  true,
		}, nil
	case Smoke:
		return Sizes{
			Repetitions: 1, HealthyRounds: 1,
			FailingPods: 3,
			CallsPods:   2, CallsWindow: 15 * time.Second,
			StormPods: 10, StormWindow: 10 * time.Second, RaisedQPSStormWindow: 10 * time.Second,
			HealthyPods: 4, HealthyBatch: 4,
			TransientPods: 2, TransientFailures: 1,
			ChurnReplicas: 2, ChurnWindow: 10 * time.Second,
			// Long enough for a replica to fail on a broken device and its
			// replacement to run on an idle node; smoke checks only what
			// holds however far it got.
			MitigatedChurnWindow: 10 * time.Second,
			// Retries within seconds, so that "retried?" shows in a short window.
			SyncFrequency: 10 * time.Second,
		}, nil
	}
	return Sizes{}, fmt.Errorf("unknown mode %q: want %q, %q, %q, %q or %q", mode, Full, Smoke, Latency, FailingPath, HealthyPath)
}

// Config configures Run.
type Config struct {
	Mode Mode
	// Sizes default to SizesFor(Mode).
	Sizes *Sizes
	// OutDir receives results.json, report.md and the plots. It is created.
	OutDir string
	// ForkKubelet and StockKubelet are the two kubelet binaries.
	ForkKubelet, StockKubelet string
	// Command is how the run was started, for the report.
	Command string
	// Progress receives a line per step. Default: io.Discard.
	Progress io.Writer
}
