// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command upstream-e2e runs upstream Kubernetes' DRA node e2e specs (test/e2e_node of the
// pristine KUBE_VERSION tree) against the stock kubelet, the dra-failfast kubelet and the kubelet of
// the upstream-shaped series (upstream/patches/, with its own test binary and specs), each with
// DRAHandlePermanentDriverFailures off and on, and compares them spec by spec
// (make test-upstream-e2e, which builds what it needs first). Needs root.
//
//	upstream-e2e -e2e-binary BIN -own-e2e-binary BIN -series-e2e-binary BIN -kubelet-config FILE -image TAR [-runs ...]
//	             [-systemd-node-image IMAGE]   # each run in a systemd node: the kubelet-restart specs run too
//	upstream-e2e -busybox-image-name   # the image name the specs use, for hack/imagepack
//	upstream-e2e -render DIR           # report.md, table and verdict again from DIR/results.json
//
// It writes <out>/results.json, report.md and one directory per run, prints the three-way
// table, and exits 1 unless every kubelet agrees with stock on every spec (without a stock run:
// unless every spec passes) and the series' own specs pass (or skip themselves for the other
// value of the gate).
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
	"strconv"
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
	series := flag.String("series-kubelet", filepath.Join(bin, "kubelet-series"), "the kubelet of the upstream-shaped series")
	seriesBinary := flag.String("series-e2e-binary", "", "e2e_node.test built from the series' tree (required for the series' runs)")
	runs := flag.String("runs", "stock,fork-gate-off,fork-gate-on,series-gate-off,series-gate-on", "comma-separated runs, in order; the others are compared with the stock one")
	dir := flag.String("out", "", "results directory (default <output>/upstream-e2e/<UTC timestamp>)")
	focus := flag.String("focus", upstreame2e.Focus, "the specs to run (a narrower focus for a quick check; the comparison needs the default)")
	prepareOnly := flag.Bool("prepare-specs-only", false, "run only the specs that prepare and unprepare claims (make test)")
	ownSpecs := flag.Bool("own-specs", true, "with the gate on, also run the patch series' own KEP-5322 specs (-own-e2e-binary); make test leaves them to make test-upstream-e2e")
	render := flag.String("render", "", "only write report.md again from the results.json in this directory, print the table and the verdict")
	timeout := flag.Duration("timeout", 45*time.Minute, "limit for each run of the suite")
	nodeImage := flag.String("systemd-node-image", "", "run each kubelet's suite in a fresh container of this image with systemd as PID 1 "+
		"(make kind-image's base image; the engine of DOCKER_HOST), so that the kubelet-restart specs run too")
	inNode := flag.Bool("in-node", false, "set by -systemd-node-image for the runner inside the systemd node")
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
	all := upstreame2e.Kubelets(*stock, *fork, *series)
	for _, name := range strings.Split(*runs, ",") {
		i := slices.IndexFunc(all, func(k upstreame2e.Kubelet) bool { return k.Name == name })
		if i < 0 {
			return fmt.Errorf("unknown run %q (known: stock, fork-gate-off, fork-gate-on, series-gate-off, series-gate-on)", name)
		}
		all[i].OwnSpec = all[i].OwnSpec && *ownSpecs
		if all[i].OwnSpec && *ownBinary == "" {
			return fmt.Errorf("run %s needs -own-e2e-binary (or -own-specs=false)", name)
		}
		if all[i].Series && *seriesBinary == "" {
			return fmt.Errorf("run %s needs -series-e2e-binary", name)
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
	if *nodeImage != "" {
		return runInNodes(ctx, *nodeImage, kubelets, *dir, started, nodeArgs{
			testBinary: *testBinary, ownBinary: *ownBinary, seriesBinary: *seriesBinary, kubeletConfig: *kubeletConfig, images: images,
			stock: *stock, fork: *fork, series: *series, focus: *focus, timeout: *timeout, ownSpecs: *ownSpecs,
		})
	}
	workDir := filepath.Join(out, "upstream-e2e", "state")
	if *inNode {
		if err := upstreame2e.PrepareInNode(); err != nil {
			return err
		}
		workDir = upstreame2e.NodeWorkDir
	}
	cfg := upstreame2e.Config{
		TestBinary:       *testBinary,
		OwnTestBinary:    *ownBinary,
		SeriesTestBinary: *seriesBinary,
		KubeletConfig:    *kubeletConfig,
		Images:           images,
		BinDir:           bin,
		WorkDir:          workDir,
		OutDir:           *dir,
		Focus:            *focus,
		Timeout:          *timeout,
		Systemd:          *inNode,
		Log:              os.Stderr,
	}
	res := newResults(started, *focus, *inNode)
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

func newResults(started time.Time, focus string, systemd bool) upstreame2e.Results {
	skips := upstreame2e.SkipsFor(systemd)
	return upstreame2e.Results{
		Started: started,
		Focus:   focus,
		Skip:    upstreame2e.SkipRegexp(skips),
		Skips:   skips,
		Images:  []string{withoutRegistry(imageutils.GetE2EImage(imageutils.BusyBox))},
	}
}

// nodeArgs are the runner's flags that the runner inside a systemd node gets again.
type nodeArgs struct {
	testBinary, ownBinary, seriesBinary, kubeletConfig, stock, fork, series, focus string
	images                                                                         []string
	timeout                                                                        time.Duration
	ownSpecs                                                                       bool
}

// runInNodes runs each kubelet's suite in a fresh systemd node (upstreame2e.Node), the runner
// inside writing its results below dir, and joins them into one comparison.
func runInNodes(ctx context.Context, image string, kubelets []upstreame2e.Kubelet, dir string, started time.Time, a nodeArgs) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	out, err := localcluster.OutputDir()
	if err != nil {
		return err
	}
	node := upstreame2e.Node{Image: image, Mounts: []string{root}, Log: os.Stderr}
	if err := node.CheckPaths(out); err != nil {
		node.Mounts = append(node.Mounts, out)
	}
	runner, err := os.Executable()
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	abs := func(paths ...*string) error {
		for _, p := range paths {
			if *p == "" {
				continue
			}
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
			if err := node.CheckPaths(*p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := abs(&a.testBinary, &a.ownBinary, &a.seriesBinary, &a.kubeletConfig, &a.stock, &a.fork, &a.series, &runner, &cwd, &dir); err != nil {
		return err
	}
	args := []string{"-e2e-binary", a.testBinary, "-kubelet-config", a.kubeletConfig, "-stock-kubelet", a.stock,
		"-fork-kubelet", a.fork, "-series-kubelet", a.series, "-focus", a.focus, "-timeout", a.timeout.String(), "-own-specs=" + strconv.FormatBool(a.ownSpecs)}
	if a.ownBinary != "" {
		args = append(args, "-own-e2e-binary", a.ownBinary)
	}
	if a.seriesBinary != "" {
		args = append(args, "-series-e2e-binary", a.seriesBinary)
	}
	for i := range a.images {
		if err := abs(&a.images[i]); err != nil {
			return err
		}
		args = append(args, "-image", a.images[i])
	}
	res := newResults(started, a.focus, true)
	res.Node = "a systemd node per kubelet (" + image + "), the kubelet a transient systemd unit"
	for _, k := range kubelets {
		res.Runs = append(res.Runs, node.Run(ctx, k, runner, cwd, filepath.Join(dir, "node-"+k.Name), args))
		res.WallTime = time.Since(started).Round(time.Second).String()
		if err := res.Write(dir); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return summarize(res, dir)
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
