// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// The daemons of a cluster, in start order.
const (
	roleEtcd              = "etcd"
	roleAPIServer         = "kube-apiserver"
	roleContainerd        = "containerd"
	roleControllerManager = "kube-controller-manager"
	roleScheduler         = "kube-scheduler"
	roleKubelet           = "kubelet"
	// roleShim is not started by us but by containerd, one per pod sandbox.
	roleShim = "containerd-shim-runc-v2"
	// roleUpstreamSuite is upstream's node e2e test binary (e2e_node.test and the services
	// process it forks) run against a Runtime: it starts and restarts the kubelet.
	roleUpstreamSuite = "e2e_node.test"
)

// daemon is a process started by this process.
type daemon struct {
	role string
	cmd  *exec.Cmd
	// exited is closed once the process has exited and was reaped; err is then its exit status.
	exited chan struct{}
	err    error
}

// startDaemon starts binary in its own session (so that nothing that kills our process
// group reaches it), stdin from /dev/null, stdout and stderr appended to logs/<role>.log,
// and records its PID in pids/<role>.pid.
func startDaemon(p paths, role, binary string, args []string, env []string) (*daemon, error) {
	if err := os.MkdirAll(p.logs(), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(p.log(role), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))

	cmd := exec.Command(binary, args...)
	cmd.Dir = p.state
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", role, err)
	}
	d := &daemon{role: role, cmd: cmd, exited: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	if err := writeFile(p.pidFile(role), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return d, err
	}
	return d, nil
}

// daemonEnv is the environment of the daemons: ours, with BinDir first on PATH so that
// containerd finds its own shim, and the sbin directories present for runc, iptables, mount.
func daemonEnv(binDir string) []string {
	path := binDir + ":" + os.Getenv("PATH")
	for _, dir := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if !strings.Contains(":"+path+":", ":"+dir+":") {
			path += ":" + dir
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		// Nothing of the caller's Kubernetes or Go test setup should leak into the daemons.
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, failfastdra.DriverPolicyEnv+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+path)
}

// proc is a process of the machine as seen in /proc.
type proc struct {
	pid     int
	role    string
	cmdline []string
}

// readCmdline returns the argv of pid; nil for a zombie, a kernel thread or a gone process.
func readCmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// alive tells whether pid is a running (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the ")" that ends the command name.
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && i+2 < len(data) && data[i+2] != 'Z' && data[i+2] != 'X'
}

// roleOf returns the role of a process with argv, "" when it is none of ours.
func roleOf(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	base := filepath.Base(argv[0])
	switch {
	case base == roleEtcd, base == roleAPIServer, base == roleContainerd, base == roleControllerManager,
		base == roleScheduler, base == roleShim:
		return base
	case strings.HasPrefix(base, "kubelet"):
		return roleKubelet
	case strings.HasPrefix(base, "e2e_node"):
		return roleUpstreamSuite
	}
	return ""
}

// clusterProcs returns the processes of the cluster with the given state directory: the
// daemons and the shims, recognized by their binary's name and by the state directory in their
// command line (the shims name containerd's socket). With roles, only those roles.
func clusterProcs(stateDir string, roles ...string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		argv := readCmdline(pid)
		role := roleOf(argv)
		if role == "" || (len(roles) > 0 && !contains(roles, role)) {
			continue
		}
		if !mentions(argv[1:], stateDir) {
			continue
		}
		out = append(out, proc{pid: pid, role: role, cmdline: argv})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// withoutForkedChildren leaves out the processes whose parent is among
// procs: a child the kubelet forked to run a command (mount, for a pod's
// volumes) has the kubelet's command line until it calls exec, and a scrape
// in that moment would find two kubelets (seen once in a bench storm).
func withoutForkedChildren(procs []proc) []proc {
	pids := map[int]bool{}
	for _, pr := range procs {
		pids[pr.pid] = true
	}
	return slices.DeleteFunc(slices.Clone(procs), func(pr proc) bool { return pids[parentPID(pr.pid)] })
}

// parentPID returns the parent of pid from /proc/<pid>/stat, 0 when unknown.
func parentPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After the ")" that ends the command name: " <state> <ppid> ...".
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0
	}
	return ppid
}

// mentions tells whether any argument names dir or a path below it.
func mentions(args []string, dir string) bool {
	for _, a := range args {
		if i := strings.Index(a, dir); i >= 0 {
			rest := a[i+len(dir):]
			if rest == "" || rest[0] == '/' {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stopProcs sends SIGTERM to procs, waits up to grace for them to exit, then SIGKILLs the
// rest and waits up to 5 s more. It returns an error naming the processes still alive.
func stopProcs(ctx context.Context, procs []proc, grace time.Duration) error {
	if len(procs) == 0 {
		return nil
	}
	signalAll := func(sig syscall.Signal) {
		for _, pr := range procs {
			if alive(pr.pid) {
				_ = syscall.Kill(pr.pid, sig)
			}
		}
	}
	waitGone := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			left := false
			for _, pr := range procs {
				if alive(pr.pid) {
					left = true
					break
				}
			}
			if !left {
				return true
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if grace > 0 {
		signalAll(syscall.SIGTERM)
		if waitGone(grace) {
			return nil
		}
	}
	signalAll(syscall.SIGKILL)
	if waitGone(5 * time.Second) {
		return nil
	}
	var left []string
	for _, pr := range procs {
		if alive(pr.pid) {
			left = append(left, fmt.Sprintf("%s (pid %d)", pr.role, pr.pid))
		}
	}
	return fmt.Errorf("processes survived SIGKILL: %s", strings.Join(left, ", "))
}

// rssBytes returns the resident set size of pid, 0 when unknown.
func rssBytes(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// errExited reports that a daemon died, with the end of its log and, before that, its last
// panic or fatal/error lines (which a stack trace would push out of the tail).
func errExited(p paths, d *daemon) error {
	data, _ := os.ReadFile(p.log(d.role))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	// Only this run's lines: from the last "=== " header that startDaemon writes.
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "=== ") {
			lines = lines[i+1:]
			break
		}
	}
	var notable []string
	for _, line := range lines {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "F1") || strings.HasPrefix(line, "E1") ||
			strings.Contains(line, "level=fatal") || strings.Contains(line, `"level":"fatal"`) {
			notable = append(notable, line)
		}
	}
	if len(notable) > 3 {
		notable = notable[len(notable)-3:]
	}
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	msg := strings.Join(lines, "\n")
	if len(notable) > 0 {
		msg = strings.Join(notable, "\n") + "\n...\n" + msg
	}
	return fmt.Errorf("%s exited (%v); from %s:\n%s", d.role, d.err, p.log(d.role), msg)
}

var errNotRoot = errors.New("a local cluster needs root (mounts, cgroups, network namespaces)")
