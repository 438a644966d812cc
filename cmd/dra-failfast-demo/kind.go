// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-failfast/dra-failfast/internal/kindnode"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

// kindCluster is a kind cluster reached through its kubeconfig, with kubectl from PATH.
type kindCluster struct {
	kubeconfig string
	client     kubernetes.Interface
	// drivers are the test driver's control endpoints, by node name.
	drivers map[string]*testdriver.Client
	workers []string
}

func (k *kindCluster) Client() kubernetes.Interface { return k.client }

func (k *kindCluster) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

func newKindCluster(ctx context.Context, kubeconfig string) (*kindCluster, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the kind cluster's nodes: %w", err)
	}
	k := &kindCluster{kubeconfig: kubeconfig, client: client, drivers: map[string]*testdriver.Client{}}
	for _, node := range nodes.Items {
		for _, address := range node.Status.Addresses {
			if address.Type == v1.NodeInternalIP {
				k.drivers[node.Name] = kindnode.TestDriverClient(node.Name)
			}
		}
		if _, controlPlane := node.Labels["node-role.kubernetes.io/control-plane"]; !controlPlane {
			k.workers = append(k.workers, node.Name)
		}
	}
	slices.Sort(k.workers)
	if len(k.workers) < 2 {
		return nil, fmt.Errorf("the demo needs two worker nodes, the cluster has %v", k.workers)
	}
	for _, worker := range k.workers {
		if k.drivers[worker] == nil {
			return nil, fmt.Errorf("node %s has no InternalIP", worker)
		}
		if err := k.drivers[worker].Healthz(ctx); err != nil {
			return nil, fmt.Errorf("the test driver on %s does not answer (deploy it with hack/kind-deploy-driver.sh): %w", worker, err)
		}
	}
	return k, nil
}

// stats merges the counters of every node's driver.
func (k *kindCluster) stats(ctx context.Context) (*testdriver.Stats, error) {
	merged := &testdriver.Stats{Claims: map[string]testdriver.ClaimStats{}}
	for node, driver := range k.drivers {
		stats, err := driver.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("stats of the driver on %s: %w", node, err)
		}
		maps.Copy(merged.Claims, stats.Claims)
	}
	return merged, nil
}

var demoManifests = []string{"healthy", "permanent-injected", "transient", "permanent"}

// runKind is the demo on a kind cluster with the test driver deployed (make kind-demo): the
// local demo's steps, the webhook deployed from the start, and a device fault across nodes.
func runKind(ctx context.Context, kubeconfig string) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	c, err := newKindCluster(ctx, kubeconfig)
	if err != nil {
		return err
	}
	manifests := filepath.Join(root, "demo")
	cleanup := func() {
		for _, name := range demoManifests {
			_ = c.Kubectl(ctx, "delete", "--ignore-not-found", "--wait", "-f", filepath.Join(manifests, name+".yaml")).Run()
		}
		_ = c.Kubectl(ctx, "delete", "--ignore-not-found", "--wait", "deployment/fault", "resourceclaimtemplate/fault").Run()
		for _, driver := range c.drivers {
			_ = driver.SetBroken(ctx, "dev-0", false)
			_ = driver.Reset(ctx)
		}
	}
	cleanup()
	section("The kind cluster: one control plane, two workers, the dra-failfast kubelet on every node")
	kubectl(ctx, c, "get", "nodes", "-o", "wide")
	kubectl(ctx, c, "-n", "dra-test-driver", "get", "daemonset,deployment,pods", "-o", "wide")
	kubectl(ctx, c, "get", "resourceslices")

	var results []outcome
	section("1. A healthy DRA pod")
	results = append(results, demoPod(ctx, c, manifests, "healthy", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }))

	section("2. A pod whose driver answers Permanent (valid config: the webhook admits it)")
	results = append(results, failsFast(demoPod(ctx, c, manifests, "permanent-injected", "Failed within seconds", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })))
	kubectl(ctx, c, "get", "pod", "permanent-injected", "-o", "jsonpath={.status.reason}: {.status.message}{\"\\n\"}")

	section("3. A pod whose driver fails transiently once: retried at the next pod resync (~1 min), then Running")
	results = append(results, demoPod(ctx, c, manifests, "transient", "Running after retries", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }))

	section("4. Invalid device config is refused at kubectl apply by the driver's webhook (a Deployment behind a Service)")
	results = append(results, demoDenied(ctx, c, manifests))

	// The counters of steps 1-4, before their pods go: step 5 needs the devices they hold.
	stats, err := c.stats(ctx)
	if err != nil {
		return err
	}
	for _, name := range demoManifests {
		_ = c.Kubectl(ctx, "delete", "--ignore-not-found", "--wait", "-f", filepath.Join(manifests, name+".yaml")).Run()
	}

	section(fmt.Sprintf("5. A broken device on %s: the Deployment's pod fails once, the device is tainted, the replacement runs on a healthy one", c.workers[0]))
	results = append(results, demoDeviceFault(ctx, c))

	section("Summary")
	err = summarize(os.Stdout, results, stats)
	cleanup()
	return err
}

// faultManifest is a one-replica Deployment whose claim asks for a device with index 0, with a
// preference for the first worker: its first pod lands on the first worker's dev-0, broken there.
const faultManifest = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: fault
spec:
  spec:
    devices:
      requests:
      - name: dev
        exactly:
          deviceClassName: dra-failfast.test
          selectors:
          - cel:
              expression: device.attributes["driver.dra-failfast.test"].index == 0
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: fault
spec:
  replicas: 1
  selector:
    matchLabels: {app: fault}
  template:
    metadata:
      labels: {app: fault}
    spec:
      terminationGracePeriodSeconds: 5
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            preference:
              matchExpressions:
              - {key: kubernetes.io/hostname, operator: In, values: [WORKER]}
      resourceClaims:
      - name: dev
        resourceClaimTemplateName: fault
      containers:
      - name: workload
        image: dra-failfast.local/workload:v1
        imagePullPolicy: Never
        resources:
          claims:
          - name: dev
`

func demoDeviceFault(ctx context.Context, c *kindCluster) outcome {
	start := time.Now()
	result := outcome{name: "fault", want: "1 Failed, then Running"}
	broken := c.workers[0]
	if err := c.drivers[broken].SetBroken(ctx, "dev-0", true); err != nil {
		result.got = err.Error()
		return result
	}
	fmt.Printf("\n(dev-0 of %s marked broken: its next prepare is a DeviceFault)\n", broken)
	manifest := strings.Replace(faultManifest, "WORKER", broken, 1)
	fmt.Printf("\n$ kubectl apply -f - <<EOF\n%sEOF\n", manifest)
	cmd := c.Kubectl(ctx, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		result.got = "apply failed"
		return result
	}
	var pods []v1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fault"})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		return slices.ContainsFunc(pods, func(p v1.Pod) bool { return p.Status.Phase == v1.PodRunning }), nil
	})
	result.elapsed = time.Since(start)
	kubectl(ctx, c, "get", "pods", "-l", "app=fault", "-o", "wide")
	stats, statsErr := c.drivers[broken].Stats(ctx)
	if statsErr == nil {
		fmt.Printf("\nTainted devices on %s: %v\n", broken, stats.TaintedDevices)
	}
	failed, running := 0, ""
	for _, p := range pods {
		switch p.Status.Phase {
		case v1.PodFailed:
			failed++
		case v1.PodRunning:
			running = p.Spec.NodeName
		}
	}
	tainted := statsErr == nil && slices.Contains(stats.TaintedDevices, "dev-0")
	result.got = fmt.Sprintf("%d Failed, Running on %s, %s dev-0 tainted: %v", failed, running, broken, tainted)
	result.ok = err == nil && failed == 1 && running != "" && tainted
	return result
}
