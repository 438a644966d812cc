// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// RuntimeConfig describes a container runtime alone: the cluster's containerd, CNI network and
// CDI, for a kubelet and control plane that something else starts (upstream's node e2e suite,
// which runs its own API server and its own kubelet with root /var/lib/kubelet).
type RuntimeConfig struct {
	// StateDir holds containerd's config, root and state, the CNI config and logs/. A kubelet or
	// an upstream e2e_node.test that names it in its command line counts as the runtime's and
	// is stopped with it. Stop removes everything in it but logs/.
	// Required.
	StateDir string
	// BinDir holds containerd, containerd-shim-runc-v2 and ctr. Default: <repo>/_output/bin.
	BinDir string
	// CDISpecDir is containerd's CDI spec directory. Default: <StateDir>/cdi. Outside StateDir
	// it must be empty or missing at the start (created then, and removed at Stop); CDI specs
	// left in it at Stop are removed and listed by LeftCDISpecs.
	CDISpecDir string
	// Images are OCI image tarballs imported into containerd's CRI namespace; the sandbox
	// image, <ImageDir>/pause.tar as PauseImage, is always imported.
	Images []string
	// ImageDir holds pause.tar. Default: <repo>/_output/images.
	ImageDir string
	// Progress receives one line per step. Default: os.Stderr.
	Progress io.Writer
}

// Runtime is a running containerd started by StartRuntime.
type Runtime struct {
	cfg     RuntimeConfig
	p       paths
	created []string
	// cdiCreated: CDISpecDir lies outside StateDir and did not exist before.
	cdiCreated bool
	sysctls    map[string]string
	pr         *progress
	containerd *daemon
	// leftCDISpecs are the CDI specs Stop found and removed.
	leftCDISpecs []string
}

// StartRuntime starts containerd as cfg describes and imports the images. Whatever a previous
// runtime or cluster with the same state directory left behind is torn down first. It refuses
// to start while another cluster holds the kubelet's or API server's ports, while
// /var/lib/kubelet holds anything (another kubelet's state there would change what the next
// kubelet does, its DRA checkpoint for one, and it is not ours to remove), and while a CDI
// spec directory outside StateDir holds specs.
func StartRuntime(ctx context.Context, cfg RuntimeConfig) (*Runtime, error) {
	if os.Geteuid() != 0 {
		return nil, errNotRoot
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, p: paths{cfg.StateDir}, pr: newProgress(cfg.Progress)}
	for _, name := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, name)); err != nil {
			return nil, fmt.Errorf("container runtime: %w (run hack/build-cluster-binaries.sh)", err)
		}
	}
	for _, image := range append([]string{r.pauseImage()}, cfg.Images...) {
		if _, err := os.Stat(image); err != nil {
			return nil, fmt.Errorf("container runtime: image %w", err)
		}
	}

	var prev savedState
	_ = readState(r.p, &prev)
	if err := teardown(ctx, r.p, prev.CreatedOutside, prev.Sysctls, r.pr); err != nil {
		return nil, fmt.Errorf("cleaning up the previous runtime in %s: %w", cfg.StateDir, err)
	}
	if err := checkPortsFree(); err != nil {
		return nil, err
	}
	// An empty one goes, so that the one the kubelet makes is recorded as ours and removed whole.
	if err := syscall.Rmdir(kubeletRootDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is not empty: a kubelet ran here outside a local cluster; "+
			"move it away, the next kubelet would start from its state (%w)", kubeletRootDir, err)
	}
	if r.cdiOutside() {
		if specs := dirEntries(cfg.CDISpecDir); len(specs) > 0 {
			return nil, fmt.Errorf("%s holds CDI specs (%s): the runtime's CDI directory must start empty, "+
				"so that a spec left at the end is known to be the run's; move them away", cfg.CDISpecDir, strings.Join(specs, ", "))
		}
	}
	r.created = missingOutsidePaths()
	r.sysctls = readSysctls()
	if r.cdiOutside() {
		if _, err := os.Lstat(cfg.CDISpecDir); errors.Is(err, os.ErrNotExist) {
			r.cdiCreated = true
		}
	}

	if err := r.start(ctx); err != nil {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := r.Stop(tctx); derr != nil {
			err = fmt.Errorf("%w (and teardown: %v)", err, derr)
		}
		return nil, err
	}
	return r, nil
}

// kubeletRootDir is the kubelet's default root directory, which upstream's node e2e suite uses.
const kubeletRootDir = "/var/lib/kubelet"

func (cfg RuntimeConfig) withDefaults() (RuntimeConfig, error) {
	if cfg.StateDir == "" {
		return cfg, errors.New("container runtime: no state directory")
	}
	var err error
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return cfg, err
	}
	if cfg.BinDir == "" || cfg.ImageDir == "" {
		out, err := OutputDir()
		if err != nil {
			return cfg, fmt.Errorf("finding default paths: %w", err)
		}
		setDefault(&cfg.BinDir, filepath.Join(out, "bin"))
		setDefault(&cfg.ImageDir, filepath.Join(out, "images"))
	}
	setDefault(&cfg.CDISpecDir, paths{cfg.StateDir}.cdiDir())
	// Absolute: the daemons run in the state directory.
	for _, dir := range []*string{&cfg.BinDir, &cfg.ImageDir, &cfg.CDISpecDir} {
		if *dir, err = filepath.Abs(*dir); err != nil {
			return cfg, err
		}
	}
	if cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	return cfg, nil
}

func (r *Runtime) pauseImage() string { return filepath.Join(r.cfg.ImageDir, "pause.tar") }

func (r *Runtime) cdiOutside() bool {
	return !strings.HasPrefix(r.cfg.CDISpecDir+"/", r.cfg.StateDir+"/")
}

func (r *Runtime) start(ctx context.Context) error {
	p := r.p
	for _, dir := range []string{p.logs(), p.cniConfDir(), p.cniIPAMDir(), p.file("pids"), r.cfg.CDISpecDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	st := savedState{StartedAt: time.Now(), BinDir: r.cfg.BinDir, ImageDir: r.cfg.ImageDir,
		CreatedOutside: r.created, Sysctls: r.sysctls}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(p.stateFile(), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeRuntimeConfigs(p, r.cfg.CDISpecDir); err != nil {
		return err
	}

	c := &Cluster{cfg: Config{BinDir: r.cfg.BinDir}, p: p, pr: r.pr}
	r.containerd, err = startDaemon(p, roleContainerd, c.bin("containerd"), c.containerdArgs(), daemonEnv(r.cfg.BinDir))
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, r.containerd, 30*time.Second, c.containerdReady); err != nil {
		return err
	}
	if err := c.importImages(ctx, append([]string{r.pauseImage()}, r.cfg.Images...)); err != nil {
		return err
	}
	r.pr.step("containerd ready on %s, CDI specs in %s, %d images imported", r.Endpoint(), r.cfg.CDISpecDir,
		1+len(r.cfg.Images))
	return nil
}

// Endpoint is the CRI endpoint for a kubelet's --container-runtime-endpoint.
func (r *Runtime) Endpoint() string { return "unix://" + r.p.containerdSocket() }

// LogDir holds containerd's log.
func (r *Runtime) LogDir() string { return r.p.logs() }

// Stop stops every process that names the state directory (containerd, its shims, a kubelet
// or upstream suite run from below it) and every container, then removes what the runtime and
// the kubelet left on the host, as Cluster.Down does, and the state directory but its logs/.
// It returns an error naming whatever is left. CDI specs left in a CDISpecDir outside StateDir
// are removed and listed by LeftCDISpecs, for the caller to judge.
func (r *Runtime) Stop(ctx context.Context) error {
	start := time.Now()
	var errs []error
	if err := teardown(ctx, r.p, r.created, r.sysctls, r.pr); err != nil {
		errs = append(errs, err)
	}
	if r.cdiOutside() {
		// The directory was empty at the start: what is in it now, drivers left behind (claims
		// never unprepared, or a driver stopped before it cleaned up).
		r.leftCDISpecs = dirEntries(r.cfg.CDISpecDir)
		for _, spec := range r.leftCDISpecs {
			if err := os.RemoveAll(filepath.Join(r.cfg.CDISpecDir, spec)); err != nil {
				errs = append(errs, err)
			}
		}
		if r.cdiCreated {
			if err := syscall.Rmdir(r.cfg.CDISpecDir); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s: %w", r.cfg.CDISpecDir, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.pr.step("container runtime stopped in %.1fs, nothing left (%d CDI specs left by drivers, removed)",
		time.Since(start).Seconds(), len(r.leftCDISpecs))
	return nil
}

// LeftCDISpecs are the CDI specs that Stop found in a CDISpecDir outside StateDir and removed:
// specs of claims that were never unprepared, or of a driver stopped before it cleaned up.
func (r *Runtime) LeftCDISpecs() []string { return r.leftCDISpecs }

// dirEntries returns the names in dir; none when it does not exist.
func dirEntries(dir string) []string {
	entries, _ := os.ReadDir(dir)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}
