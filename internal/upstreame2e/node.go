// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package upstreame2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// A systemd node: upstream's kubelet-restart specs stop and restart the kubelet with
// `sudo systemctl`, so the suite must run where systemd is PID 1, as on upstream's CI nodes.
// Node runs each kubelet's suite in a fresh container of the kind base image (a Debian 12 root
// file system with systemd 252, kind's entrypoint, runc and the CNI plugins; make kind-image),
// started the way kind starts its nodes, with the repository and the output directory mounted
// at their own paths so that every path the runner names resolves inside too. The runner inside
// (upstream-e2e -in-node) is the same code with Config.Systemd set.
type Node struct {
	// Image is the node image (dra-failfast/kind-base:bookworm).
	Image string
	// Mounts are host directories mounted at the same path in the node.
	Mounts []string
	// Log receives progress lines and the inside runner's output.
	Log io.Writer
}

const (
	// nodeContainer and nodeNetwork name the node's container and its network in the engine.
	nodeContainer = "dra-failfast-e2e-node"
	nodeNetwork   = "dra-failfast-e2e"
	// NodeWorkDir is the runner's state directory in the node: on the node's /var volume, gone
	// with the node.
	NodeWorkDir = "/var/lib/upstream-e2e"
)

// CheckPaths fails unless every path is absolute and under one of the node's mounts: the node
// sees nothing else of the host.
func (n Node) CheckPaths(paths ...string) error {
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s: the systemd node needs absolute paths", p)
		}
		inside := false
		for _, m := range n.Mounts {
			if rel, err := filepath.Rel(m, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				inside = true
			}
		}
		if !inside {
			return fmt.Errorf("%s is outside the directories mounted into the systemd node (%s)", p, strings.Join(n.Mounts, ", "))
		}
	}
	return nil
}

// Run runs `runner -in-node -runs k.Name -out outDir args...` in dir, for kubelet k, in a fresh
// systemd node, and returns the Run that the runner wrote to outDir/results.json. args are the
// host runner's flags (binaries, configuration, images, focus), with absolute paths under
// n.Mounts (CheckPaths). The node's journal is kept in outDir/journal.log. The node and its
// network are removed afterwards.
func (n Node) Run(ctx context.Context, k Kubelet, runner, dir, outDir string, args []string) Run {
	start := time.Now()
	fail := func(err error) Run {
		return Run{Kubelet: k.Name, Gates: gatesFlag(k.FeatureGates), Error: err.Error(), WallTime: time.Since(start).Round(time.Second)}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fail(err)
	}
	defer n.remove(context.WithoutCancel(ctx), outDir)
	if err := n.start(ctx); err != nil {
		return fail(fmt.Errorf("%s: starting the systemd node: %w", k.Name, err))
	}
	logf(n.Log, "%s: systemd node %s (%s) running; the suite runs inside", k.Name, nodeContainer, n.Image)
	args = append([]string{"exec", "-w", dir, nodeContainer, runner, "-in-node", "-runs", k.Name, "-out", outDir}, args...)
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = n.Log, n.Log
	runErr := cmd.Run()
	res, err := ReadResults(outDir)
	switch {
	case err != nil:
		return fail(fmt.Errorf("%s: no results from the systemd node (its runner: %s): %w", k.Name, exitText(runErr), err))
	case len(res.Runs) != 1:
		return fail(fmt.Errorf("%s: the systemd node's results hold %d runs, want 1", k.Name, len(res.Runs)))
	}
	return res.Runs[0]
}

// start starts the node as kind starts its nodes (privileged, its own cgroup namespace,
// tmpfs /run and /tmp, a /var volume, kind's entrypoint before systemd), waits for systemd, and
// stops what the base image starts for kind (containerd, the image preload, the kubelet): the
// runner starts its own containerd and the suite its own kubelet.
func (n Node) start(ctx context.Context) error {
	_, _ = docker(ctx, "rm", "-f", "-v", nodeContainer) // one left by an interrupted run
	if _, err := docker(ctx, "network", "inspect", nodeNetwork); err != nil {
		if out, err := docker(ctx, "network", "create", nodeNetwork); err != nil {
			return fmt.Errorf("creating network %s: %w: %s", nodeNetwork, err, out)
		}
	}
	args := []string{"run", "--detach", "--name", nodeContainer, "--hostname", "e2e-node", "--network", nodeNetwork,
		"--privileged", "--cgroupns=private", "--init=false",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var",
		"--env", "container=docker", "--stop-signal", "SIGRTMIN+3"}
	for _, m := range n.Mounts {
		args = append(args, "--volume", m+":"+m)
	}
	args = append(args, "--entrypoint", "/usr/local/bin/entrypoint", n.Image, "/sbin/init")
	if out, err := docker(ctx, args...); err != nil {
		return fmt.Errorf("docker run %s: %w: %s", n.Image, err, out)
	}
	// is-system-running --wait blocks until start-up is done; it fails while systemd's bus is
	// not up yet, so poll it.
	var state string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		out, _ := docker(ctx, "exec", nodeContainer, "systemctl", "is-system-running", "--wait")
		state = strings.TrimSpace(out)
		return state == "running" || state == "degraded", nil
	}); err != nil {
		return fmt.Errorf("systemd did not finish starting (state %q): %w", state, err)
	}
	// Disabled, not masked: their unit files are in /etc/systemd/system, which mask cannot replace.
	if out, err := docker(ctx, "exec", nodeContainer, "systemctl", "disable", "--now",
		"kubelet.service", "containerd.service", "preload-images.service"); err != nil {
		return fmt.Errorf("stopping the base image's kind units: %w: %s", err, out)
	}
	_, _ = docker(ctx, "exec", nodeContainer, "systemctl", "reset-failed")
	if out, _ := docker(ctx, "exec", nodeContainer, "systemctl", "is-system-running"); strings.TrimSpace(out) != "running" {
		failed, _ := docker(ctx, "exec", nodeContainer, "systemctl", "--failed", "--no-legend", "--plain")
		return fmt.Errorf("systemd is %q, not running; failed units: %s", strings.TrimSpace(out), strings.TrimSpace(failed))
	}
	return nil
}

// remove keeps the node's journal in outDir and removes the node, its volume and its network.
func (n Node) remove(ctx context.Context, outDir string) {
	if out, err := docker(ctx, "exec", nodeContainer, "journalctl", "--no-pager", "-o", "short-precise"); err == nil {
		if err := os.WriteFile(filepath.Join(outDir, "journal.log"), []byte(out), 0o644); err != nil {
			logf(n.Log, "keeping the node's journal: %v", err)
		}
	}
	if out, err := docker(ctx, "rm", "-f", "-v", nodeContainer); err != nil && !strings.Contains(out, "No such container") {
		logf(n.Log, "removing the systemd node: %v: %s", err, out)
	}
	if out, err := docker(ctx, "network", "rm", nodeNetwork); err != nil && !strings.Contains(out, "not found") {
		logf(n.Log, "removing network %s: %v: %s", nodeNetwork, err, out)
	}
}

// docker runs the docker CLI (the engine of hack/kind/engine.sh, through DOCKER_HOST) and
// returns its combined output.
func docker(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// PrepareInNode checks that this runs where systemd is PID 1 and gives the suite the `sudo` it
// calls systemctl through (the base image has none; we are root already).
func PrepareInNode() error {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return errors.New("-in-node: systemd is not PID 1 here (no /run/systemd/system); the runner starts the systemd node itself with -systemd-node-image")
	}
	for _, tool := range []string{"systemd-run", "systemctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("-in-node: %w", err)
		}
	}
	if _, err := exec.LookPath("sudo"); err == nil {
		return nil
	}
	return os.WriteFile("/usr/local/bin/sudo", []byte("#!/bin/sh\n# dra-failfast systemd node: root already, as upstream's CI nodes run the suite.\nexec \"$@\"\n"), 0o755)
}

// stopKubeletUnits stops and forgets the kubelet units of earlier suites in this node: the
// suite restarts the first kubelet unit `systemctl list-units` names.
func stopKubeletUnits(ctx context.Context, log io.Writer) {
	for _, args := range [][]string{{"stop", "kubelet-*.service"}, {"reset-failed", "kubelet-*.service"}} {
		if out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput(); err != nil {
			logf(log, "systemctl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
}
