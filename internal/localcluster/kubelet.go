// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// startKubelet writes the kubelet's configuration and starts it.
func (c *Cluster) startKubelet() error {
	conf, err := kubeletConfig(c.p, c.cfg)
	if err != nil {
		return err
	}
	if err := writeFile(c.p.kubeletConfig(), conf, 0o644); err != nil {
		return err
	}
	gates := featureGatesFlag(c.cfg.KubeletFeatureGates)
	if gates == "" {
		gates = "none"
	}
	c.pr.step("starting kubelet %s (feature gates: %s)", c.cfg.KubeletPath, gates)
	env := daemonEnv(c.cfg.BinDir)
	if c.cfg.KubeletDriverPolicy != "" {
		env = append(env, failfastdra.DriverPolicyEnv+"="+c.cfg.KubeletDriverPolicy)
	}
	d, err := startDaemon(c.p, roleKubelet, c.cfg.KubeletPath, c.kubeletArgs(), env)
	if err != nil {
		return err
	}
	c.daemons[roleKubelet] = d
	return nil
}

// RestartKubelet stops the kubelet, starts it again with featureGates (only gates the kubelet
// binary knows) and waits until the node is Ready again. Pods keep running meanwhile.
func (c *Cluster) RestartKubelet(ctx context.Context, featureGates map[string]bool) error {
	return c.ReplaceKubelet(ctx, c.cfg.KubeletPath, featureGates)
}

// SetKubeletAPIQPS changes Config.KubeletAPIQPS (0: the kubelet's default); it takes effect
// when the kubelet next starts (RestartKubelet, ReplaceKubelet).
func (c *Cluster) SetKubeletAPIQPS(qps int) { c.cfg.KubeletAPIQPS = qps }

// ReplaceKubelet is RestartKubelet with another kubelet binary (e.g. the stock one instead of
// the fork) on the same node.
func (c *Cluster) ReplaceKubelet(ctx context.Context, kubeletPath string, featureGates map[string]bool) error {
	return c.ReplaceKubeletAfter(ctx, kubeletPath, featureGates, nil)
}

// ReplaceKubeletAfter is ReplaceKubelet that runs whileStopped (when not nil) after the kubelet
// stopped and before the new one starts: to change what the container runtime knows behind the
// kubelet's back, as a node reboot or an operator's crictl would.
func (c *Cluster) ReplaceKubeletAfter(ctx context.Context, kubeletPath string, featureGates map[string]bool, whileStopped func(context.Context) error) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	kubeletPath, err := filepath.Abs(kubeletPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(kubeletPath); err != nil {
		return fmt.Errorf("kubelet binary: %w", err)
	}
	start := time.Now()
	if err := stopProcs(ctx, clusterProcs(c.p.state, roleKubelet), 10*time.Second); err != nil {
		return fmt.Errorf("stopping the kubelet: %w", err)
	}
	if d := c.daemons[roleKubelet]; d != nil {
		<-d.exited
		delete(c.daemons, roleKubelet)
	}
	c.pr.step("kubelet stopped")
	if whileStopped != nil {
		if err := whileStopped(ctx); err != nil {
			return fmt.Errorf("while the kubelet was stopped: %w", err)
		}
	}
	c.cfg.KubeletPath = kubeletPath
	c.cfg.KubeletFeatureGates = maps.Clone(featureGates)
	if err := c.saveState(); err != nil {
		return err
	}
	since := time.Now()
	if err := c.startKubelet(); err != nil {
		return err
	}
	if err := c.waitKubeletReady(ctx, since); err != nil {
		return err
	}
	c.pr.step("kubelet restarted, node %s Ready in %.1fs", c.cfg.NodeName, time.Since(start).Seconds())
	return nil
}
