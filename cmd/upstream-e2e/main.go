// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command upstream-e2e runs upstream Kubernetes' DRA node e2e specs (test/e2e_node of the
// pristine v1.37.1 tree) against the stock kubelet and the dra-failfast kubelet with
// DRAHandlePermanentDriverFailures off and on, and compares them spec by spec
// (make test-upstream-e2e, which builds what it needs first). Needs root.
//
//	upstream-e2e -e2e-binary BIN -own-e2e-binary BIN -kubelet-config FILE -image TAR [-runs ...]
//	upstream-e2e -busybox-image-name   # the image name the specs use, for hack/imagepack
//	upstream-e2e -render DIR           # report.md, table and verdict again from DIR/results.json
//
// It writes <out>/results.json, report.md and one directory per run, prints the three-way
// table, and exits 1 unless the fork agrees with stock on every spec (without a stock run:
// unless every spec passes) and the patch series' own spec passes with the gate on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	imageutils "k8s.io/kubernetes/test/utils/image"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/upstreame2e"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "upstream-e2e:", err)
		os.Exit(1)
	}
}

func run() error {
	out, err := localcluster.OutputDir()
	if err != nil {
		return err
	}
	bin := filepath.Join(out, "bin")
	printImage := flag.Bool("busybox-image-name", false, "print the busybox image name upstream's specs use and exit")
	testBinary := flag.String("e2e-binary", "", "upstream's e2e_node.test, built from the pristine tree (required)")
	ownBinary := flag.String("own-e2e-binary", "", "e2e_node.test built from the patched tree (required for fork-gate-on)")
	kubeletConfig := flag.String("kubelet-config", "", "upstream's test/e2e_node/jenkins/default-kubelet-config.yaml (required)")
	var images []string
	flag.Func("image", "image tarball to import (repeatable)", func(s string) error { images = append(images, s); return nil })
	stock := flag.String("stock-kubelet", filepath.Join(bin, "kubelet-stock"), "the stock kubelet")
	fork := flag.String("fork-kubelet", filepath.Join(bin, "kubelet"), "the dra-failfast kubelet")
	runs := flag.String("runs", "stock,fork-gate-off,fork-gate-on", "comma-separated runs, in order; the fork's runs are compared with the stock one")
	dir := flag.String("out", "", "results directory (default <output>/upstream-e2e/<UTC timestamp>)")
	focus := flag.String("focus", upstreame2e.Focus, "the specs to run (a narrower focus for a quick check; the comparison needs the default)")
	prepareOnly := flag.Bool("prepare-specs-only", false, "run only the specs that prepare and unprepare claims (make test)")
	render := flag.String("render", "", "only write report.md again from the results.json in this directory, print the table and the verdict")
	timeout := flag.Duration("timeout", 45*time.Minute, "limit for each run of the suite")
	flag.Parse()
	if *printImage {
		fmt.Println(imageutils.GetE2EImage(imageutils.BusyBox))
		return nil
	}
	if *render != "" {
		res, err := upstreame2e.ReadResults(*render)
		if err != nil {
			return err
		}
		if err := res.Write(*render); err != nil {
			return err
		}
		return summarize(res, *render)
	}
	if *prepareOnly {
		*focus = upstreame2e.PrepareFocus
	}
	if os.Geteuid() != 0 {
		return errors.New("run as root: the suite runs a real kubelet and containerd (like make demo)")
	}
	if flag.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *testBinary == "" || *kubeletConfig == "" || len(images) == 0 {
		flag.Usage()
		return errors.New("-e2e-binary, -kubelet-config and -image are required")
	}

	var kubelets []upstreame2e.Kubelet
	all := upstreame2e.Kubelets(*stock, *fork)
	for _, name := range strings.Split(*runs, ",") {
		i := slices.IndexFunc(all, func(k upstreame2e.Kubelet) bool { return k.Name == name })
		if i < 0 {
			return fmt.Errorf("unknown run %q (known: stock, fork-gate-off, fork-gate-on)", name)
		}
		if all[i].OwnSpec && *ownBinary == "" {
			return fmt.Errorf("run %s needs -own-e2e-binary", name)
		}
		kubelets = append(kubelets, all[i])
	}

	started := time.Now()
	if *dir == "" {
		*dir = filepath.Join(out, "upstream-e2e", started.UTC().Format("20060102-150405"))
	}
	// Absolute: the suite runs in its own working directory and writes its report to -out.
	if *dir, err = filepath.Abs(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := upstreame2e.Config{
		TestBinary:    *testBinary,
		OwnTestBinary: *ownBinary,
		KubeletConfig: *kubeletConfig,
		Images:        images,
		BinDir:        bin,
		WorkDir:       filepath.Join(out, "upstream-e2e", "state"),
		OutDir:        *dir,
		Focus:         *focus,
		Timeout:       *timeout,
		Log:           os.Stderr,
	}
	res := upstreame2e.Results{
		Started: started,
		Focus:   *focus,
		Skip:    upstreame2e.SkipRegexp(),
		Skips:   upstreame2e.Skips,
		Images:  []string{withoutRegistry(imageutils.GetE2EImage(imageutils.BusyBox))},
	}
	for _, k := range kubelets {
		r := upstreame2e.RunKubelet(ctx, cfg, k)
		res.Runs = append(res.Runs, r)
		res.WallTime = time.Since(started).Round(time.Second).String()
		if err := res.Write(*dir); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return summarize(res, *dir)
}

// summarize prints the table, the totals and the verdict.
func summarize(res upstreame2e.Results, dir string) error {
	fmt.Printf("\n%s\n", res.Table())
	fmt.Printf("report: %s\n", filepath.Join(dir, "report.md"))
	passed, failed := upstreame2e.Totals(res.Runs)
	fmt.Printf("tests: %d passed, %d failed\n", passed, failed)
	if err := upstreame2e.Verdict(res.Runs); err != nil {
		return err
	}
	fmt.Println("verdict: pass")
	return nil
}

// withoutRegistry drops the registry host from an image name: reports name the image by its
// path and tag only, since they may be copied into documentation.
func withoutRegistry(image string) string {
	if host, rest, ok := strings.Cut(image, "/"); ok && strings.ContainsAny(host, ".:") {
		return rest
	}
	return image
}
