// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dra-failfast-demo shows what dra-failfast changes, on a real local
// single-node cluster running the patched kubelet with
// DRAHandlePermanentDriverFailures on and the test DRA driver: a healthy DRA
// pod runs, a pod with invalid device config fails within seconds with a
// clear Reason, Message and Event, a pod that fails transiently is retried
// and runs, and once the driver's admission webhook is registered the same
// invalid config is refused at kubectl apply. It prints real kubectl output, a summary, and tears the
// cluster down (--keep leaves it up).
//
// Run it as root from the repository after `make build` (`make demo` does both).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

func main() {
	keep := flag.Bool("keep", false, "leave the cluster and the driver running and print how to use them")
	kubelet := flag.String("kubelet", "", "kubelet binary (default: the fork, _output/bin/kubelet)")
	kind := flag.String("kind-kubeconfig", "", "run the demo on the kind cluster of this kubeconfig, with the test driver deployed (make kind-demo)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	demo := func() error { return run(ctx, *kubelet, *keep) }
	if *kind != "" {
		demo = func() error { return runKind(ctx, *kind) }
	}
	if err := demo(); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

// cluster is what the demo's steps need of a cluster: the local one or kind's.
type cluster interface {
	Client() kubernetes.Interface
	Kubectl(ctx context.Context, args ...string) *exec.Cmd
}

type outcome struct {
	name, want, got string
	elapsed         time.Duration
	ok              bool
	// ns is the pod's namespace when not "default".
	ns string
	// within bounds elapsed when set; calls, when set, are the driver's prepare and unprepare
	// calls the pod's claim must have had: summarize checks both.
	within time.Duration
	calls  *[2]int
}

// failsFast is what a permanently failing pod must show: Failed within seconds, its claim
// prepared once and unprepared once.
func failsFast(o outcome) outcome {
	o.within, o.calls = 30*time.Second, &[2]int{1, 1}
	return o
}

func (o outcome) namespace() string {
	if o.ns == "" {
		return "default"
	}
	return o.ns
}

func run(ctx context.Context, kubelet string, keep bool) (err error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	gates := map[string]bool{string(failfastdra.DRAHandlePermanentDriverFailures): true}
	if kubelet != "" {
		kubelet, _ = filepath.Abs(kubelet)
	}
	section("Starting a local single-node cluster with the dra-failfast kubelet (" + string(failfastdra.DRAHandlePermanentDriverFailures) + "=true)")
	c, err := localcluster.Up(ctx, localcluster.Config{KubeletPath: kubelet, KubeletFeatureGates: gates})
	if err != nil {
		return fmt.Errorf("cluster up: %w", err)
	}
	var driver *e2eframework.Driver
	defer func() {
		if keep && err == nil {
			fmt.Printf("\nThe cluster is still up. Use it with:\n  export KUBECONFIG=%s PATH=%s:$PATH\n"+
				"The test driver runs as pid %d (log: %s).\nTear down with: go run ./cmd/local-cluster down\n",
				c.Kubeconfig(), c.BinDir(), driver.PID(), driver.LogFile)
			return
		}
		_ = driver.Stop()
		section("Tearing down")
		if downErr := c.Down(context.Background()); downErr != nil && err == nil {
			err = fmt.Errorf("cluster down: %w", downErr)
		}
	}()
	kubectl(ctx, c, "version")
	kubectl(ctx, c, "get", "nodes", "-o", "wide")

	section("Starting the test DRA driver (driver.dra-failfast.test, 8 devices)")
	if driver, err = e2eframework.StartDriver(ctx, c, e2eframework.DriverOptions{Webhook: true}); err != nil {
		return err
	}
	manifests := filepath.Join(root, "demo")
	kubectl(ctx, c, "apply", "-f", filepath.Join(manifests, "deviceclass.yaml"))
	kubectl(ctx, c, "get", "resourceslices", "-o", "wide")

	var results []outcome
	section("1. A healthy DRA pod")
	results = append(results, demoPod(ctx, c, manifests, "healthy", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }))
	kubectl(ctx, c, "logs", "healthy")

	section("2. A pod whose claim has invalid device config: the driver answers Permanent")
	results = append(results, failsFast(demoPod(ctx, c, manifests, "permanent", "Failed within seconds", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })))
	kubectl(ctx, c, "describe", "pod", "permanent")
	kubectl(ctx, c, "get", "pod", "permanent", "-o", "jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}{\"\\n\"}{end}")

	section("3. A pod whose driver fails transiently once: retried at the next pod resync (~1 min), then Running")
	results = append(results, demoPod(ctx, c, manifests, "transient", "Running after retries", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }))
	kubectl(ctx, c, "get", "events", "--field-selector", "involvedObject.name=transient", "--sort-by=.lastTimestamp")

	section("4. With the driver's admission webhook registered, invalid device config is refused at kubectl apply")
	if err := driver.RegisterWebhook(ctx, c); err != nil {
		return err
	}
	results = append(results, demoDenied(ctx, c, manifests))

	stats, err := driver.Client.Stats(ctx)
	if err != nil {
		return err
	}
	section("Summary")
	return summarize(os.Stdout, results, stats)
}

// summarize writes one line per outcome to w, with the driver's calls for its pod's claim, and
// fails unless every outcome was as expected.
func summarize(w io.Writer, results []outcome, stats *testdriver.Stats) error {
	failed := 0
	for _, r := range results {
		calls := ""
		claim, found := e2eframework.PodClaim(stats, r.namespace(), r.name)
		if found {
			calls = fmt.Sprintf(", driver calls: %d prepare / %d unprepare", claim.PrepareCalls, claim.UnprepareCalls)
		}
		if r.ok && r.within > 0 && r.elapsed > r.within {
			r.ok, r.got = false, fmt.Sprintf("%s, later than %s", r.got, r.within)
		}
		if r.ok && r.calls != nil && (!found || claim.PrepareCalls != r.calls[0] || claim.UnprepareCalls != r.calls[1]) {
			r.ok, r.got = false, fmt.Sprintf("%s, not %d prepare / %d unprepare", r.got, r.calls[0], r.calls[1])
		}
		mark := "OK  "
		if !r.ok {
			mark, failed = "FAIL", failed+1
		}
		fmt.Fprintf(w, "%s %-10s want %-22s got %s after %.1fs%s\n", mark, r.name, r.want, r.got, r.elapsed.Seconds(), calls)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d outcomes were not as expected", failed, len(results))
	}
	return nil
}

// demoPod applies the manifest <name>.yaml, waits until done, and shows the pod.
func demoPod(ctx context.Context, c cluster, dir, name, want string, done func(*v1.Pod) bool) outcome {
	start := time.Now()
	kubectl(ctx, c, "apply", "-f", filepath.Join(dir, name+".yaml"))
	pod, err := e2eframework.WaitForPod(ctx, c.Client(), "default", name, 3*time.Minute, done)
	result := outcome{name: name, want: want, elapsed: time.Since(start), ok: err == nil}
	if pod != nil {
		result.got = string(pod.Status.Phase)
		if pod.Status.Reason != "" {
			result.got += " (" + pod.Status.Reason + ")"
		}
	}
	kubectl(ctx, c, "get", "pod", name, "-o", "wide")
	return result
}

// demoDenied applies the claim template of permanent.yaml (invalid device
// config) under another name and shows that the driver's webhook refuses it
// with the driver's validation message.
func demoDenied(ctx context.Context, c cluster, dir string) outcome {
	start := time.Now()
	data, err := os.ReadFile(filepath.Join(dir, "permanent.yaml"))
	result := outcome{name: "webhook", want: "apply denied", got: "apply admitted"}
	if err != nil {
		result.got = err.Error()
		return result
	}
	// Only the ResourceClaimTemplate document, renamed.
	var template string
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.Contains(doc, "kind: ResourceClaimTemplate") {
			template = strings.Replace(doc, "name: permanent", "name: refused", 1)
		}
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(template), "\n") {
		if !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	template = strings.Join(lines, "\n") + "\n"
	fmt.Printf("\n$ kubectl apply -f - <<EOF\n%sEOF\n", template)
	cmd := c.Kubectl(ctx, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(template)
	out, err := cmd.CombinedOutput()
	fmt.Print(string(out))
	if err != nil && strings.Contains(string(out), "denied the request") {
		result.got, result.ok = "apply denied", true
	}
	result.elapsed = time.Since(start)
	return result
}

func section(title string) {
	fmt.Printf("\n=== %s\n", title)
}

// kubectl runs kubectl against the cluster and prints the command and its output.
func kubectl(ctx context.Context, c cluster, args ...string) {
	fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
	cmd := c.Kubectl(ctx, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		fmt.Printf("(kubectl: %v)\n", err)
	}
}
