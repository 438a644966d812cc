// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command local-cluster runs the local single-node Kubernetes cluster of internal/localcluster.
//
//	local-cluster up [--kubelet=PATH] [--feature-gates=A=true,...] [flags]
//	local-cluster status
//	local-cluster env                  # eval "$(local-cluster env)" for KUBECONFIG, PATH, ...
//	local-cluster restart-kubelet [--kubelet=PATH] --feature-gates=...
//	local-cluster down
//
// Run it as root from the repository (paths default to _output/ of the checkout holding the
// working directory). Build first: hack/build-cluster-binaries.sh and hack/build-kubelet.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
)

const usage = `usage: local-cluster COMMAND [flags]

commands:
  up               start a cluster (tearing down any previous one in the same state directory)
  down             tear the cluster down and check that nothing is left
  status           show the cluster's processes, their RSS and the node's readiness
  env              print shell exports: eval "$(local-cluster env)"
  restart-kubelet  restart the kubelet with other feature gates (and/or another binary)

Run "local-cluster COMMAND -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "local-cluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// options are the flags common to every command.
type options struct {
	cfg                 localcluster.Config
	kubeletGates        string
	controlPlaneGates   string
	timeout             time.Duration
	kubeletGatesSet     bool
	controlPlaneGateSet bool
}

func (o *options) register(fs *flag.FlagSet, cmd string) {
	fs.StringVar(&o.cfg.StateDir, "state-dir", "", "state directory (default <repo>/_output/local-cluster)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	if cmd == "up" || cmd == "restart-kubelet" {
		fs.StringVar(&o.cfg.KubeletPath, "kubelet", "", "kubelet binary (default <repo>/_output/bin/kubelet, the fork; _output/bin/kubelet-stock for stock)")
		fs.StringVar(&o.kubeletGates, "feature-gates", "", "kubelet feature gates, A=true,B=false (only gates the kubelet binary knows)")
		fs.IntVar(&o.cfg.Verbosity, "v", 0, "kubelet log verbosity (default 2)")
	}
	if cmd == "up" {
		fs.StringVar(&o.cfg.BinDir, "bin-dir", "", "directory of etcd, kube-*, containerd*, ctr, kubectl (default <repo>/_output/bin)")
		fs.StringVar(&o.cfg.ImageDir, "image-dir", "", "directory of pause.tar and workload.tar (default <repo>/_output/images)")
		fs.StringVar(&o.controlPlaneGates, "control-plane-feature-gates", "", "feature gates of kube-apiserver, kube-controller-manager and kube-scheduler")
		fs.IntVar(&o.cfg.ControlPlaneVerbosity, "control-plane-v", 0, "log verbosity of the other Kubernetes daemons (default 1)")
		fs.StringVar(&o.cfg.NodeName, "node-name", "", "node name (default the host name)")
		fs.StringVar(&o.cfg.NodeIP, "node-ip", "", "node IP (default eth0's IPv4 address)")
	}
}

// parse applies the gate flags; a flag that is not given leaves the gates nil.
func (o *options) parse(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "feature-gates":
			o.kubeletGatesSet = true
		case "control-plane-feature-gates":
			o.controlPlaneGateSet = true
		}
	})
	var err error
	if o.kubeletGatesSet {
		if o.cfg.KubeletFeatureGates, err = localcluster.ParseFeatureGates(o.kubeletGates); err != nil {
			return err
		}
	}
	if o.controlPlaneGateSet {
		if o.cfg.ControlPlaneFeatureGates, err = localcluster.ParseFeatureGates(o.controlPlaneGates); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, cmd string, args []string, stdout io.Writer) error {
	switch cmd {
	case "up", "down", "status", "env", "restart-kubelet":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	var o options
	fs := flag.NewFlagSet("local-cluster "+cmd, flag.ContinueOnError)
	o.register(fs, cmd)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := o.parse(fs); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	switch cmd {
	case "up":
		c, err := localcluster.Up(ctx, o.cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "local-cluster: up; kubeconfig %s. Use it with:\n  eval \"$(%s env)\"\n",
			c.Kubeconfig(), os.Args[0])
		return nil
	case "down":
		return localcluster.Cleanup(ctx, o.cfg)
	case "status":
		c, err := localcluster.Attach(o.cfg)
		if err != nil {
			return err
		}
		return printStatus(stdout, c.Status(ctx))
	case "env":
		c, err := localcluster.Attach(o.cfg)
		if err != nil {
			return err
		}
		for _, kv := range c.Env() {
			name, value, _ := strings.Cut(kv, "=")
			if name == "PATH" {
				// Prepend the binary directory to the shell's own PATH, once.
				binDir, _, _ := strings.Cut(value, ":")
				if !strings.HasPrefix(os.Getenv("PATH"), binDir+":") {
					fmt.Fprintf(stdout, "export PATH=%s:\"${PATH}\"\n", shellQuote(binDir))
				}
				continue
			}
			fmt.Fprintf(stdout, "export %s=%s\n", name, shellQuote(value))
		}
		return nil
	case "restart-kubelet":
		gates, path := o.cfg.KubeletFeatureGates, o.cfg.KubeletPath
		o.cfg.KubeletFeatureGates, o.cfg.KubeletPath = nil, ""
		c, err := localcluster.Attach(o.cfg)
		if err != nil {
			return err
		}
		if !o.kubeletGatesSet {
			gates = c.KubeletFeatureGates()
		}
		if path == "" {
			path = c.KubeletPath()
		}
		return c.ReplaceKubelet(ctx, path, gates)
	}
	return nil
}

func printStatus(w io.Writer, st localcluster.Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tPID\tRSS")
	procs := st.Processes
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].Role < procs[j].Role })
	for _, p := range procs {
		fmt.Fprintf(tw, "%s\t%d\t%.0f MiB\n", p.Role, p.PID, float64(p.RSSBytes)/(1<<20))
	}
	fmt.Fprintf(tw, "total\t\t%.0f MiB\n", float64(st.RSSBytes)/(1<<20))
	if err := tw.Flush(); err != nil {
		return err
	}
	ready := st.NodeReady
	if ready == "" {
		ready = "Unknown"
	}
	fmt.Fprintf(w, "node Ready=%s (%s)\n", ready, st.NodeReadyMessage)
	if st.NodeReady != "True" {
		return errors.New("the cluster is not ready")
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
