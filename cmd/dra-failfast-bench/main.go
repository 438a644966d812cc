// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dra-failfast-bench measures the dra-failfast kubelet against the
// stock kubelet on a local single-node cluster (make bench): six
// scenarios (the sixth, controller churn, also with the admission webhook
// registered and with device taints), both kubelets on the same node with the same driver and
// workload, results in <output>/bench/<timestamp>/ (results.json, report.md,
// SVG plots). Needs root, like make demo, and the binaries of make build.
//
//	dra-failfast-bench [-mode full|smoke|latency|healthy|failing] [-out DIR]
//	dra-failfast-bench -render DIR   # report.md and plots again from DIR/results.json
//
// In smoke mode it also checks what must hold on any machine (fork pods
// Failed, one prepare and one unprepare per failing pod, the webhook keeps
// the churn's pods waiting, at most one Failed pod per tainted broken
// device, the files parse) and exits 1 otherwise; make test runs it so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dra-failfast/dra-failfast/internal/bench"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dra-failfast-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	out, err := localcluster.OutputDir()
	if err != nil {
		return err
	}
	mode := flag.String("mode", string(bench.Full), "full (about 70 minutes), smoke (a few minutes), latency (scenarios 4 and 3b only, four repetitions, about 25 minutes), healthy (scenario 4 only, ten repetitions, about 50 minutes) or failing (scenarios 1 and 3b on -fork-kubelet alone, three repetitions, about 10 minutes)")
	dir := flag.String("out", "", "results directory (default <output>/bench/<UTC timestamp>)")
	defaultFork := filepath.Join(out, "bin", "kubelet")
	fork := flag.String("fork-kubelet", defaultFork, "the dra-failfast kubelet (or another that knows its gate: the series' kubelet-series)")
	stock := flag.String("stock-kubelet", filepath.Join(out, "bin", "kubelet-stock"), "the stock kubelet")
	render := flag.String("render", "", "only write report.md and the plots again from the results.json in this directory")
	flag.Parse()
	if *render != "" {
		res, err := bench.ReadResults(*render)
		if err != nil {
			return err
		}
		return res.Write(*render)
	}
	forkArg := ""
	if *fork != defaultFork {
		forkArg = relativeToRepo(*fork)
	}
	if os.Geteuid() != 0 {
		return errors.New("run as root: the benchmark runs a real kubelet and containerd (like make demo)")
	}
	if *dir == "" {
		*dir = filepath.Join(out, "bench", time.Now().UTC().Format("20060102-150405"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.Run(ctx, bench.Config{
		Mode: bench.Mode(*mode), OutDir: *dir, ForkKubelet: *fork, StockKubelet: *stock,
		Command: commandLine(*mode, forkArg), Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\nReport: %s\n", res.Markdown(), filepath.Join(*dir, bench.ReportFile))
	if res.Mode == bench.Smoke {
		if err := bench.CheckRun(*dir); err != nil {
			return fmt.Errorf("smoke check: %w", err)
		}
		fmt.Println("smoke check: ok")
	}
	return nil
}

// commandLine is how to reproduce the run; forkArg is the -fork-kubelet
// given, relative to the repository, or "" for the default.
func commandLine(mode, forkArg string) string {
	switch {
	case forkArg != "":
		return "BENCH_MODE=" + mode + " hack/bench.sh -fork-kubelet " + forkArg
	case mode == string(bench.Full):
		return "make bench"
	}
	return "make bench BENCH_MODE=" + mode
}

// relativeToRepo returns path relative to the repository when it is inside it.
func relativeToRepo(path string) string {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
