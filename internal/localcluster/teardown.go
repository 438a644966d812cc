// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Paths outside the state directory that the stack writes to although every configurable path
// points into the state directory. A cluster records which of them it created (to remove them
// whole); of those that existed before, only the cluster's own entries are removed.
var outsidePaths = []string{
	"/var/lib/kubelet",    // device-plugins/ (hard-coded in the kubelet)
	"/var/lib/cni",        // results/ (libcni's cache, hard-coded in containerd's CNI library)
	"/var/log/containers", // legacy container log symlinks (hard-coded in the kubelet)
	"/run/containerd",     // s/ (shim sockets, hard-coded in the shim)
	"/var/run/netns",      // only if netns_mounts_under_state_dir were not honored
}

// cniCacheGlobs match libcni's cache entries of our pods (containerd sets up the loopback
// interface as network "cni-loopback").
var cniCacheGlobs = []string{
	"/var/lib/cni/results/" + CNINetworkName + "-*",
	"/var/lib/cni/results/cni-loopback-*",
}

// cgroupGlob matches the kubelet's pod cgroups in every v1 hierarchy and in the unified one.
const cgroupGlob = "/sys/fs/cgroup/*/kubepods"

// missingOutsidePaths returns the outside paths that do not exist (yet).
func missingOutsidePaths() []string {
	var out []string
	for _, path := range outsidePaths {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			out = append(out, path)
		}
	}
	return out
}

// teardown stops everything a cluster with state directory p left behind and removes its traces,
// keeping only its logs. created lists the outside paths the
// cluster created, sysctls the values of touchedSysctls before it started. It works on a live cluster, on a crashed one and on nothing at all, and returns
// an error listing whatever it could not remove.
func teardown(ctx context.Context, p paths, created []string, sysctls map[string]string, pr *progress) error {
	var errs []error
	// stop stops the processes of roles, logging how long it took when there were any.
	stop := func(grace time.Duration, roles ...string) {
		procs := clusterProcs(p.state, roles...)
		if len(procs) == 0 {
			return
		}
		start := time.Now()
		if err := stopProcs(ctx, procs, grace); err != nil {
			errs = append(errs, err)
		}
		if len(roles) == 0 {
			roles = []string{fmt.Sprintf("%d leftover processes", len(procs))}
		}
		pr.step("stopped %s in %.1fs", strings.Join(roles, ", "), time.Since(start).Seconds())
	}
	// 1. Whatever would start a kubelet again (upstream's suite, run against a Runtime), then the
	// kubelet, so that it does not restart what is stopped next.
	stop(5*time.Second, roleUpstreamSuite)
	stop(5*time.Second, roleKubelet)
	// 2. The containers: everything in the pod cgroups, then the shims and containerd.
	if n, err := killCgroupProcs(ctx); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		pr.step("killed %d container processes", n)
	}
	stop(2*time.Second, roleShim, roleContainerd)
	// 3. The control plane, from the top (an apiserver whose etcd is gone shuts down slowly).
	stop(2*time.Second, roleControllerManager, roleScheduler)
	stop(3*time.Second, roleAPIServer)
	stop(2*time.Second, roleEtcd)
	stop(0) // whatever else of ours is still running: SIGKILL
	// 4. Mounts (overlay root filesystems, network namespaces, volumes), deepest first.
	roots := append([]string{p.state}, outsidePaths...)
	if err := unmountUnder(roots); err != nil {
		errs = append(errs, err)
	}
	// 5. Network: the bridge (veth pairs went with their namespaces), the CNI cache.
	if err := deleteLinks(); err != nil {
		errs = append(errs, err)
	}
	for _, glob := range cniCacheGlobs {
		if err := removeGlob(glob); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeGlob("/var/lib/cni/networks/" + CNINetworkName); err != nil {
		errs = append(errs, err)
	}
	if err := removeGlob("/var/run/netns/cni-*"); err != nil {
		errs = append(errs, err)
	}
	// 6. Pod cgroups.
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	// 7. Files, iptables chains and sysctls outside the state directory.
	errs = append(errs, cleanOutside(p, created)...)
	if err := removeKubeletChains(); err != nil {
		errs = append(errs, err)
	}
	if err := restoreSysctls(sysctls); err != nil {
		errs = append(errs, err)
	}
	// 8. The state directory, but only once nothing is mounted below it.
	if mounts := mountsUnder([]string{p.state}); len(mounts) > 0 {
		errs = append(errs, fmt.Errorf("not removing %s: still mounted: %s", p.state, strings.Join(mounts, ", ")))
	} else if err := clearStateDir(p); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return leftovers(p, created, sysctls)
}

// leftovers returns an error naming everything of a cluster that is still there.
func leftovers(p paths, created []string, sysctls map[string]string) error {
	var left []string
	for _, pr := range clusterProcs(p.state) {
		left = append(left, fmt.Sprintf("process %s (pid %d)", pr.role, pr.pid))
	}
	if pids := cgroupProcs(); len(pids) > 0 {
		left = append(left, fmt.Sprintf("container processes %v", pids))
	}
	cgroups, _ := filepath.Glob(cgroupGlob)
	for _, cg := range cgroups {
		left = append(left, "cgroup "+cg)
	}
	for _, m := range mountsUnder(append([]string{p.state}, outsidePaths...)) {
		left = append(left, "mount "+m)
	}
	if _, err := net.InterfaceByName(BridgeName); err == nil {
		left = append(left, "network interface "+BridgeName)
	}
	for _, glob := range []string{
		cniCacheGlobs[0], cniCacheGlobs[1],
		"/var/lib/cni/networks/" + CNINetworkName,
		"/var/run/netns/cni-*",
		"/var/lib/kubelet/device-plugins/kubelet*",
	} {
		matches, _ := filepath.Glob(glob)
		for _, m := range matches {
			left = append(left, "file "+m)
		}
	}
	for _, sock := range deadShimSockets() {
		left = append(left, "shim socket "+sock)
	}
	for _, path := range created {
		if _, err := os.Lstat(path); err == nil {
			left = append(left, "directory "+path)
		}
	}
	left = append(left, kubeletChainsLeft()...)
	left = append(left, changedSysctls(sysctls)...)
	if len(left) > 0 {
		return fmt.Errorf("teardown left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// cgroupDirs returns every cgroup directory below the kubepods cgroups, deepest first.
func cgroupDirs() []string {
	roots, _ := filepath.Glob(cgroupGlob)
	var dirs []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// cgroupProcs returns the processes in the kubepods cgroups.
func cgroupProcs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, dir := range cgroupDirs() {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] && alive(pid) {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	sort.Ints(pids)
	return pids
}

// killCgroupProcs SIGKILLs every process in the pod cgroups until none is left (10 s at most)
// and returns how many it killed.
func killCgroupProcs(ctx context.Context) (int, error) {
	killed := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := cgroupProcs()
		if len(pids) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return len(killed), fmt.Errorf("container processes survived SIGKILL: %v", pids)
		}
		for _, pid := range pids {
			if pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				killed[pid] = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func removeCgroups() error {
	var errs []error
	for _, dir := range cgroupDirs() {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder returns the mount points at or below any of roots, deepest (last mounted) first.
func mountsUnder(roots []string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		for _, root := range roots {
			if mp == root || strings.HasPrefix(mp, root+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	// Later mounts may sit on top of earlier ones: unmount in reverse order.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything at or below roots; busy mounts are detached.
func unmountUnder(roots []string) error {
	for attempt := 0; attempt < 5; attempt++ {
		mounts := mountsUnder(roots)
		if len(mounts) == 0 {
			return nil
		}
		for _, mp := range mounts {
			if err := syscall.Unmount(mp, 0); err != nil {
				_ = syscall.Unmount(mp, syscall.MNT_DETACH)
			}
		}
	}
	if mounts := mountsUnder(roots); len(mounts) > 0 {
		return fmt.Errorf("could not unmount: %s", strings.Join(mounts, ", "))
	}
	return nil
}

// deleteLinks deletes the pod bridge and any veth still attached to it.
func deleteLinks() error {
	if _, err := net.InterfaceByName(BridgeName); err != nil {
		return nil
	}
	ifaces, _ := net.Interfaces()
	for _, iface := range ifaces {
		if master, err := os.Readlink(filepath.Join("/sys/class/net", iface.Name, "master")); err == nil &&
			filepath.Base(master) == BridgeName {
			_ = exec.Command("ip", "link", "delete", iface.Name).Run()
		}
	}
	if out, err := exec.Command("ip", "link", "delete", BridgeName).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting bridge %s: %v: %s", BridgeName, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func removeGlob(glob string) error {
	matches, err := filepath.Glob(glob)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanOutside removes what the cluster left outside its state directory.
func cleanOutside(p paths, created []string) []error {
	var errs []error
	// Kubelet files in a pre-existing /var/lib/kubelet.
	if err := removeGlob("/var/lib/kubelet/device-plugins/kubelet*"); err != nil {
		errs = append(errs, err)
	}
	// Log symlinks into our state directory.
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, link := range links {
		if target, err := os.Readlink(link); err == nil && (target == p.state || strings.HasPrefix(target, p.state+"/")) {
			if err := os.Remove(link); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Shim sockets: once our shims are gone nobody listens on them any more.
	for _, sock := range deadShimSockets() {
		if err := os.Remove(sock); err != nil {
			errs = append(errs, err)
		}
	}
	// Directories the stack creates, once empty (whoever created them: a crashed cluster may have
	// left no record), deepest first.
	for _, dir := range []string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/var/lib/cni/results",
		"/var/lib/cni/networks", "/var/lib/cni", "/var/log/containers", "/run/containerd/s", "/run/containerd"} {
		_ = syscall.Rmdir(dir) // fails unless empty
	}
	// Whole directories the cluster created, once nothing is mounted below them.
	for _, path := range created {
		if !contains(outsidePaths, path) {
			errs = append(errs, fmt.Errorf("refusing to remove %s: not a known outside path", path))
			continue
		}
		if mounts := mountsUnder([]string{path}); len(mounts) > 0 {
			errs = append(errs, fmt.Errorf("not removing %s: still mounted: %s", path, strings.Join(mounts, ", ")))
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// deadShimSockets returns the shim sockets nobody listens on (a live one is another
// containerd's).
func deadShimSockets() []string {
	socks, _ := filepath.Glob("/run/containerd/s/*")
	var dead []string
	for _, sock := range socks {
		if conn, err := net.DialTimeout("unix", sock, 200*time.Millisecond); err == nil {
			conn.Close()
			continue
		}
		dead = append(dead, sock)
	}
	return dead
}

// clearStateDir removes the state directory except logs/ and logs.previous/.
func clearStateDir(p paths) error {
	entries, err := os.ReadDir(p.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == "logs" || e.Name() == "logs.previous" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(p.state, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
