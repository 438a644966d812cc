// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package upstreame2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
)

// Config is what every run of the suite shares.
type Config struct {
	// TestBinary is upstream's e2e_node.test built from the pristine tree.
	TestBinary string
	// OwnTestBinary is e2e_node.test built from the patched tree, which holds the series' own
	// spec; used for Kubelet.OwnSpec.
	OwnTestBinary string
	// SeriesTestBinary is e2e_node.test built from the upstream-shaped series' tree, which
	// holds the series' node e2e specs (SeriesSpecs); used for Kubelet.Series.
	SeriesTestBinary string
	// KubeletConfig is upstream's base KubeletConfiguration for the suite
	// (test/e2e_node/jenkins/default-kubelet-config.yaml of the pristine tree).
	KubeletConfig string
	// Images are the image tarballs the specs need (busybox), imported into containerd.
	Images []string
	// BinDir holds containerd, its shim and ctr.
	BinDir string
	// WorkDir holds the state of the run in progress (removed after each run but its logs).
	WorkDir string
	// OutDir receives one directory per run: the suite's output, its report and the kubelet log.
	OutDir string
	// Focus selects the upstream specs (default: Focus).
	Focus string
	// Timeout bounds each run of the test binary.
	Timeout time.Duration
	// Systemd: this runs where systemd is PID 1 (a systemd node, RunInNode). The suite then
	// starts the kubelet as a transient systemd unit, as on upstream's CI nodes, and the
	// kubelet-restart specs run; elsewhere systemd is hidden from the suite and they are skipped.
	Systemd bool
	// Log receives progress lines.
	Log io.Writer
}

// Run is the result of one kubelet.
type Run struct {
	Kubelet  string        `json:"kubelet"`
	Version  string        `json:"version"`
	Gates    string        `json:"gates,omitempty"`
	WallTime time.Duration `json:"wallTime"`
	Specs    []SpecResult  `json:"specs"`
	// OwnSpecs are the patch series' own specs: for Kubelet.OwnSpec those of the fork's
	// series, run with the patched binary; for Kubelet.Series those of the upstream-shaped
	// series (SeriesSpecs), run with its binary together with upstream's.
	OwnSpecs []SpecResult `json:"ownSpecs,omitempty"`
	// CDISpecsLeft counts the CDI specs left in /var/run/cdi after the upstream specs (removed
	// by the runtime): upstream's test driver leaves the specs of claims it prepared when a spec
	// stops it before the kubelet unprepared them. Compared with stock's.
	CDISpecsLeft int `json:"cdiSpecsLeft"`
	// OwnCDISpecsLeft counts those left after the own specs: they must leave none.
	OwnCDISpecsLeft int `json:"ownCdiSpecsLeft,omitempty"`
	// SuiteFailures are failures outside specs (BeforeSuite: system validation, services).
	SuiteFailures []string `json:"suiteFailures,omitempty"`
	// Error: the run could not be completed (no report, runtime did not start or stop clean).
	Error string `json:"error,omitempty"`
}

// RunKubelet runs the DRA specs of the upstream binary (the series' binary for k.Series)
// against k, then, for k.OwnSpec, the patch series' own spec with the patched binary: each in a
// fresh container runtime.
func RunKubelet(ctx context.Context, cfg Config, k Kubelet) Run {
	start := time.Now()
	run := Run{Kubelet: k.Name, Gates: gatesFlag(k.FeatureGates)}
	if out, err := exec.CommandContext(ctx, k.Path, "--version").Output(); err == nil {
		run.Version = strings.TrimSpace(string(out))
	}
	var errs []error
	focus := cfg.Focus
	if focus == "" {
		focus = Focus
	}
	binary := cfg.TestBinary
	if k.Series {
		binary = cfg.SeriesTestBinary
	}
	specs, suite, left, err := runSuite(ctx, cfg, k, binary, focus, filepath.Join(cfg.OutDir, k.Name))
	run.Specs, run.SuiteFailures, run.CDISpecsLeft = specs, suite, left
	errs = append(errs, err)
	if k.Series && err == nil {
		run.Specs, run.OwnSpecs = splitSeriesSpecs(specs)
		if missing := missingSeriesSpecs(run.OwnSpecs); len(missing) > 0 && focus == Focus {
			errs = append(errs, fmt.Errorf("the series' test binary %s has no spec %q", binary, missing))
		}
	}
	if k.OwnSpec && err == nil {
		own, suite, left, err := runSuite(ctx, cfg, k, cfg.OwnTestBinary, OwnSpecFocus, filepath.Join(cfg.OutDir, k.Name+"-own-spec"))
		run.OwnSpecs, run.OwnCDISpecsLeft = own, left
		run.SuiteFailures = append(run.SuiteFailures, suite...)
		errs = append(errs, err)
		if err == nil && len(own) == 0 {
			errs = append(errs, fmt.Errorf("the patched test binary %s has no spec matching %s", cfg.OwnTestBinary, OwnSpecFocus))
		}
	}
	if err := errors.Join(errs...); err != nil {
		run.Error = err.Error()
	}
	run.WallTime = time.Since(start).Round(time.Second)
	return run
}

// splitSeriesSpecs separates the series' own specs (SeriesSpecs) from upstream's.
func splitSeriesSpecs(specs []SpecResult) (upstream, own []SpecResult) {
	for _, s := range specs {
		if _, ok := seriesSpec(s.Name); ok {
			own = append(own, s)
		} else {
			upstream = append(upstream, s)
		}
	}
	return upstream, own
}

// missingSeriesSpecs returns the texts of SeriesSpecs that no spec of own has.
func missingSeriesSpecs(own []SpecResult) []string {
	var missing []string
	for _, want := range SeriesSpecs {
		if !slices.ContainsFunc(own, func(s SpecResult) bool {
			found, _ := seriesSpec(s.Name)
			return found.Text == want.Text
		}) {
			missing = append(missing, want.Text)
		}
	}
	return missing
}

// runSuite runs binary once with focus against k and returns the focused specs' results and
// the number of CDI specs left behind.
// outDir receives suite.log (the binary's output), the suite's report directory (report.json,
// kubelet.log, the in-process services' log) and containerd's log.
func runSuite(ctx context.Context, cfg Config, k Kubelet, binary, focus, outDir string) ([]SpecResult, []string, int, error) {
	focusRE, err := regexp.Compile(focus)
	if err != nil {
		return nil, nil, 0, err
	}
	if err := os.RemoveAll(outDir); err != nil {
		return nil, nil, 0, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, nil, 0, err
	}
	logf(cfg.Log, "%s: starting containerd", k.Name)
	rt, err := localcluster.StartRuntime(ctx, localcluster.RuntimeConfig{
		StateDir: cfg.WorkDir,
		BinDir:   cfg.BinDir,
		// Hard-coded in upstream's DRA specs (cdiDir in test/e2e_node/dra_test.go).
		CDISpecDir: "/var/run/cdi",
		Images:     cfg.Images,
		Progress:   cfg.Log,
	})
	if err != nil {
		return nil, nil, 0, err
	}
	exitErr, runErr := runBinary(ctx, cfg, k, binary, focus, rt.Endpoint(), outDir)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	stopErr := rt.Stop(stopCtx)
	if stopErr != nil {
		stopErr = fmt.Errorf("after the %s run: %w", k.Name, stopErr)
	}
	if err := copyFile(filepath.Join(rt.LogDir(), "containerd.log"), filepath.Join(outDir, "containerd.log")); err != nil {
		logf(cfg.Log, "%s: keeping containerd's log: %v", k.Name, err)
	}
	left := rt.LeftCDISpecs()
	if len(left) > 0 {
		logf(cfg.Log, "%s: %d CDI specs left in /var/run/cdi (removed): %s", k.Name, len(left), strings.Join(left, ", "))
	}
	if runErr != nil {
		return nil, nil, len(left), errors.Join(runErr, stopErr)
	}

	specs, suiteFailures, err := parseReport(filepath.Join(outDir, "report", "ginkgo", "report.json"), focusRE, SkipsFor(cfg.Systemd))
	if err != nil {
		return nil, nil, len(left), errors.Join(fmt.Errorf("%s: %w (%s exited: %v; its output: %s)", k.Name, err,
			filepath.Base(binary), exitText(exitErr), filepath.Join(outDir, "suite.log")), stopErr)
	}
	// With a report, a non-zero exit means failing specs: a result, not an error of the run.
	return specs, suiteFailures, len(left), stopErr
}

// runBinary runs one e2e_node.test with the kubelet k next to it, in a directory below the
// runtime's state directory (the suite writes its kubeconfig and kubelet config to its working
// directory; the kubelet's command line names them, so the runtime's teardown finds a kubelet
// the suite left running). It returns the binary's exit status, and an error when the binary
// could not be run or did not finish.
func runBinary(ctx context.Context, cfg Config, k Kubelet, binary, focus, endpoint, outDir string) (exitErr, err error) {
	dir := filepath.Join(cfg.WorkDir, "suite")
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	// The suite finds the kubelet next to its own binary (test/e2e_node/builder: getK8sBin).
	for name, target := range map[string]string{"e2e_node.test": binary, "kubelet": k.Path} {
		abs, err := filepath.Abs(target)
		if err != nil {
			return nil, err
		}
		if err := os.Symlink(abs, filepath.Join(binDir, name)); err != nil {
			return nil, err
		}
	}
	kubeletConfig, err := suiteKubeletConfig(cfg.KubeletConfig, dir)
	if err != nil {
		return nil, err
	}
	path := os.Getenv("PATH")
	if cfg.Systemd {
		// The unit of an earlier suite in this node (fork-gate-on runs two): the suite restarts
		// the first kubelet unit systemctl lists.
		stopKubeletUnits(ctx, cfg.Log)
		defer stopKubeletUnits(context.WithoutCancel(ctx), cfg.Log)
	} else if path, err = pathWithout(filepath.Join(dir, "path"), path, "systemd-run", "systemctl"); err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--ginkgo.focus=" + focus,
		"--ginkgo.skip=" + SkipRegexp(SkipsFor(cfg.Systemd)),
		"--ginkgo.no-color",
		"--ginkgo.v",
		"--ginkgo.timeout=" + cfg.Timeout.String(),
		"--report-dir=" + filepath.Join(outDir, "report"),
		"--report-complete-ginkgo",
		"--node-name=" + strings.ToLower(host),
		"--container-runtime-endpoint=" + endpoint,
		"--prepull-images=false",
		"--kubelet-config-file=" + kubeletConfig,
	}
	for _, flag := range kubeletFlags(k) {
		args = append(args, "--kubelet-flags="+flag)
	}
	if k.Series || (k.OwnSpec && binary == cfg.OwnTestBinary) {
		// These binaries know the gate: their specs skip themselves as it says.
		args = append(args, "--feature-gates="+gatesFlag(k.FeatureGates))
	}
	logf(cfg.Log, "%s: %s %s", k.Name, filepath.Base(binary), strings.Join(args, " "))

	limit := cfg.Timeout + 5*time.Minute
	runCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	logFile, err := os.Create(filepath.Join(outDir, "suite.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(runCtx, filepath.Join(binDir, "e2e_node.test"), args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(environWithout("KUBECONFIG", "PATH"), "PATH="+path)
	// Its own process group, so that a timeout stops the services process it forks too; and
	// killed with us (the runtime's teardown also finds it by its command line).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	exitErr = cmd.Run()
	logf(cfg.Log, "%s: %s exited after %s: %v", k.Name, filepath.Base(binary), time.Since(start).Round(time.Second), exitText(exitErr))
	switch {
	case ctx.Err() != nil:
		return exitErr, fmt.Errorf("%s: interrupted: %w", k.Name, ctx.Err())
	case runCtx.Err() != nil:
		return exitErr, fmt.Errorf("%s: the suite did not finish within %s (its output: %s)", k.Name, limit, logFile.Name())
	}
	var exit *exec.ExitError
	if exitErr != nil && !errors.As(exitErr, &exit) {
		return exitErr, fmt.Errorf("%s: running %s: %w", k.Name, binary, exitErr)
	}
	return exitErr, nil
}

// kubeletFlags are the kubelet flags of every run: the feature gates, and no moving of this
// machine's processes into the cgroups the suite names (/kubelet, /system, /docker-daemon are
// its VM images' layout; here they would take every process of the root cgroup).
func kubeletFlags(k Kubelet) []string {
	flags := []string{"--kubelet-cgroups=", "--system-cgroups=", "--runtime-cgroups="}
	if len(k.FeatureGates) > 0 {
		flags = append(flags, "--feature-gates="+gatesFlag(k.FeatureGates))
	}
	return flags
}

// suiteKubeletAdditions is what this machine needs on top of upstream's base configuration.
// The image GC thresholds: the specs' images are imported, nothing can pull them again, and
// upstream's default (collect unused images above 85% disk use) deleted busybox between two
// specs of a cold CI run on a disk that Go's caches had filled to 87% (the next spec's pod then
// sat in ImagePullBackOff).
const suiteKubeletAdditions = `
# dra-failfast: this machine is a cgroup v1 host.
failCgroupV1: false
failSwapOn: false
# dra-failfast: imported images cannot be pulled again; never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

// suiteKubeletConfig writes upstream's base KubeletConfiguration plus suiteKubeletAdditions
// into dir and returns its path.
func suiteKubeletConfig(base, dir string) (string, error) {
	data, err := os.ReadFile(base)
	if err != nil {
		return "", fmt.Errorf("upstream's kubelet configuration: %w", err)
	}
	data = append(data, []byte(suiteKubeletAdditions)...)
	path := filepath.Join(dir, "kubelet-config.yaml")
	return path, os.WriteFile(path, data, 0o644)
}

// pathWithout returns a PATH that finds none of hidden: the suite runs the kubelet as a
// systemd unit whenever it finds systemd-run, and this machine has the tools but no systemd.
// Directories holding one of them are mirrored into farm without them.
func pathWithout(farm, path string, hidden ...string) (string, error) {
	var out []string
	for i, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return slices.Contains(hidden, e.Name()) }) {
			out = append(out, dir)
			continue
		}
		mirror := filepath.Join(farm, fmt.Sprint(i))
		if err := os.MkdirAll(mirror, 0o755); err != nil {
			return "", err
		}
		for _, e := range entries {
			if slices.Contains(hidden, e.Name()) {
				continue
			}
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(mirror, e.Name())); err != nil {
				return "", err
			}
		}
		out = append(out, mirror)
	}
	return strings.Join(out, string(filepath.ListSeparator)), nil
}

func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			env = append(env, kv)
		}
	}
	return env
}

func gatesFlag(gates map[string]bool) string {
	var parts []string
	for name, on := range gates {
		parts = append(parts, fmt.Sprintf("%s=%t", name, on))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "upstream-e2e [%s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
