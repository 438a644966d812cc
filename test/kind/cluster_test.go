// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

// The kind cluster tests (make test-kind) on the fleet mid-rollout of deploy/kind/mixed-cluster.yaml
// (the fork on the first worker, the stock kubelet on the second) with the test driver and the
// example driver deployed from deploy/. Every test checks the suite's invariant on its own
// namespace: no pod wrongly failed, and once its pods are deleted no claim is prepared in any
// driver, no CDI spec is left on any node, no claim is reserved. hack/test-kind.sh brings the
// cluster up, runs this with KUBECONFIG and DOCKER_HOST set, and takes the cluster down.
package kind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/kindnode"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

type worker struct {
	name string
	// driver is the test driver's control endpoint on the node, reached through the node.
	driver *testdriver.Client
	// address is the node's InternalIP.
	address string
	// fork: the node's kubelet is the fork's (its version carries the fork's suffix).
	fork bool
}

func (w worker) String() string {
	if w.fork {
		return w.name + " (fork)"
	}
	return w.name + " (stock)"
}

func connect(t *testing.T) (kubernetes.Interface, []worker) {
	t.Helper()
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		t.Fatal("KUBECONFIG is not set: run this through make test-kind")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var workers []worker
	for _, node := range nodes.Items {
		if _, controlPlane := node.Labels["node-role.kubernetes.io/control-plane"]; controlPlane {
			continue
		}
		for _, address := range node.Status.Addresses {
			if address.Type == v1.NodeInternalIP {
				workers = append(workers, worker{
					name:    node.Name,
					driver:  kindnode.TestDriverClient(node.Name),
					address: address.Address,
					fork:    isForkKubelet(node.Status.NodeInfo.KubeletVersion),
				})
			}
		}
	}
	slices.SortFunc(workers, func(a, b worker) int { return strings.Compare(a.name, b.name) })
	if len(workers) != 2 || !workers[0].fork || workers[1].fork {
		t.Fatalf("want the two workers of deploy/kind/mixed-cluster.yaml, the first on the fork, the second on stock; got %v", workers)
	}
	return client, workers
}

// isForkKubelet tells the fork's kubelet by its version, v1.37.2-dra-failfast.N.
func isForkKubelet(version string) bool { return strings.Contains(version, "-dra-failfast.") }

// newNamespace creates a namespace for one test, deleted when it ends, with the test driver's
// claim templates of templates (name -> opaque parameters, nil for a healthy claim).
func newNamespace(t *testing.T, client kubernetes.Interface, prefix string, templates map[string][]byte) string {
	t.Helper()
	ctx := t.Context()
	namespace := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	if err := e2eframework.CreateNamespace(ctx, client, namespace); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), namespace, metav1.DeleteOptions{})
	})
	for name, parameters := range templates {
		if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, e2eframework.ClaimTemplate(namespace, name, parameters), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return namespace
}

// podOn returns a pod using a claim from template, on node by a node selector (not nodeName: the
// scheduler allocates the claim).
func podOn(namespace, name, template, node string) *v1.Pod {
	pod := e2eframework.Pod(namespace, name, template)
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return pod
}

func createPod(t *testing.T, client kubernetes.Interface, pod *v1.Pod) {
	t.Helper()
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// claimOf returns the test driver's stats of the claim of pod namespace/name on w.
func claimOf(ctx context.Context, t *testing.T, w worker, namespace, pod string) testdriver.ClaimStats {
	t.Helper()
	stats, err := w.driver.Stats(ctx)
	if err != nil {
		t.Fatalf("test driver on %s: %v", w, err)
	}
	claim, _ := e2eframework.PodClaim(stats, namespace, pod)
	return claim
}

// waitForClaim polls the test driver on w until the claim of pod namespace/name satisfies done.
func waitForClaim(ctx context.Context, t *testing.T, w worker, namespace, pod string, timeout time.Duration, done func(testdriver.ClaimStats) bool) (testdriver.ClaimStats, error) {
	t.Helper()
	var claim testdriver.ClaimStats
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		stats, err := w.driver.Stats(ctx)
		if err != nil {
			return false, err
		}
		claim, _ = e2eframework.PodClaim(stats, namespace, pod)
		return done(claim), nil
	})
	return claim, err
}

// checkNoLeaks is the suite's invariant for namespace: every pod Failed by the DRA failure is one
// of wantFailed; then, the pods deleted, no claim of the namespace is prepared in the test driver
// on any worker, no node has a CDI spec of it, and no claim is reserved.
func checkNoLeaks(t *testing.T, client kubernetes.Interface, workers []worker, namespace string, wantFailed ...string) {
	t.Helper()
	ctx := t.Context()
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wronglyFailed := 0
	for _, pod := range pods.Items {
		if pod.Status.Phase == v1.PodFailed && !slices.Contains(wantFailed, pod.Name) {
			wronglyFailed++
			t.Errorf("pod %s Failed wrongly: %s: %s", pod.Name, pod.Status.Reason, pod.Status.Message)
		}
	}
	// The claims' UIDs, read before the pods (and their generated claims) go: the example
	// driver names its CDI specs by claim UID, the test driver's name the claim.
	claims, err := client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var claimUIDs []string
	for _, claim := range claims.Items {
		claimUIDs = append(claimUIDs, string(claim.UID))
	}
	if err := client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.BatchV1().Jobs(namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods of %s not gone: %v", namespace, err)
	}
	var leaks []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		leaks = leaksIn(ctx, client, workers, namespace, claimUIDs)
		return len(leaks) == 0, nil
	})
	for _, leak := range leaks {
		t.Errorf("leak after deleting the pods of %s: %s", namespace, leak)
	}
	t.Logf("namespace %s: %d pods, %d wrongly failed, %d leaks (prepared claims, CDI specs, reservations)", namespace, len(pods.Items), wronglyFailed, len(leaks))
}

func leaksIn(ctx context.Context, client kubernetes.Interface, workers []worker, namespace string, claimUIDs []string) []string {
	var leaks []string
	for _, w := range workers {
		stats, err := w.driver.Stats(ctx)
		if err != nil {
			return []string{fmt.Sprintf("test driver on %s: %v", w, err)}
		}
		for uid, claim := range stats.Claims {
			if claim.Namespace == namespace && claim.Prepared {
				leaks = append(leaks, fmt.Sprintf("claim %s/%s (%s) prepared on %s", claim.Namespace, claim.Name, uid, w))
			}
		}
		out, err := exec.CommandContext(ctx, "docker", "exec", w.name, "sh", "-c", "cat /var/run/cdi/* 2>/dev/null || true").CombinedOutput()
		if err != nil {
			return []string{fmt.Sprintf("reading %s's CDI specs: %v: %s", w, err, out)}
		}
		if strings.Contains(string(out), namespace+"/") || slices.ContainsFunc(claimUIDs, func(uid string) bool { return strings.Contains(string(out), uid) }) {
			leaks = append(leaks, fmt.Sprintf("a CDI spec of the namespace's claims on %s", w))
		}
	}
	claims, err := client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(leaks, fmt.Sprintf("listing claims: %v", err))
	}
	for _, claim := range claims.Items {
		if len(claim.Status.ReservedFor) > 0 {
			leaks = append(leaks, fmt.Sprintf("claim %s reserved for %v", claim.Name, claim.Status.ReservedFor))
		}
	}
	return leaks
}

// Mixed fleet, pods: on each worker a healthy pod runs; the same permanently failing pod is Failed
// within seconds after one prepare and one unprepare on the fork's worker, and stays Pending and
// is retried on the stock worker.
func TestWorkerPods(t *testing.T) {
	t.Parallel()
	client, workers := connect(t)
	namespace := newNamespace(t, client, "kind-pods", map[string][]byte{
		"healthy":   nil,
		"permanent": testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind smoke: never works"}.Parameters(),
	})
	var wantFailed []string
	for _, w := range workers {
		healthy, failing := "healthy-"+w.name, "permanent-"+w.name
		createPod(t, client, podOn(namespace, healthy, "healthy", w.name))
		createPod(t, client, podOn(namespace, failing, "permanent", w.name))
		if w.fork {
			wantFailed = append(wantFailed, failing)
		}
	}
	for _, w := range workers {
		t.Run(w.name, func(t *testing.T) {
			ctx := t.Context()
			healthy, failing := "healthy-"+w.name, "permanent-"+w.name
			if w.fork {
				start := time.Now()
				pod, err := e2eframework.WaitForPod(ctx, client, namespace, failing, 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
				if err != nil {
					t.Fatalf("pod %s on %s: not Failed in 30 s: %v", failing, w, err)
				}
				if pod.Status.Reason != failfastdra.PodFailedReason {
					t.Errorf("pod %s: reason %q, want %q", failing, pod.Status.Reason, failfastdra.PodFailedReason)
				}
				t.Logf("%s on %s: Failed after %v: %s", failing, w, time.Since(start).Round(100*time.Millisecond), pod.Status.Message)
				// The unprepare of the failed pod's claim comes from the kubelet's pod cleanup.
				claim, err := waitForClaim(ctx, t, w, namespace, failing, 30*time.Second, func(c testdriver.ClaimStats) bool { return c.UnprepareCalls == 1 })
				if err != nil || claim.PrepareCalls != 1 || claim.UnprepareCalls != 1 || !claim.Permanent {
					t.Errorf("%s's claim on %s: %d prepare, %d unprepare, permanent %v; want 1, 1, true (%v)", failing, w, claim.PrepareCalls, claim.UnprepareCalls, claim.Permanent, err)
				}
			} else {
				// Stock retries at every pod resync (61-90 s apart): wait for the second prepare.
				claim, err := waitForClaim(ctx, t, w, namespace, failing, 2*time.Minute, func(c testdriver.ClaimStats) bool { return c.PrepareCalls >= 2 })
				if err != nil {
					t.Errorf("%s's claim on %s: %d prepare calls in 2 min, want a retry: %v", failing, w, claim.PrepareCalls, err)
				}
				pod, err := client.CoreV1().Pods(namespace).Get(ctx, failing, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if pod.Status.Phase != v1.PodPending {
					t.Errorf("pod %s on %s: phase %s, want Pending: the stock kubelet retries", failing, w, pod.Status.Phase)
				}
				t.Logf("%s on %s: %s after %d prepare calls, each answered Permanent", failing, w, pod.Status.Phase, claim.PrepareCalls)
			}
			if _, err := e2eframework.WaitForPod(ctx, client, namespace, healthy, 2*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }); err != nil {
				t.Fatalf("pod %s: not Running: %v", healthy, err)
			}
			if claim := claimOf(ctx, t, w, namespace, healthy); claim.PrepareCalls != 1 || !claim.Prepared {
				t.Errorf("%s's claim on %s: %d prepare, prepared %v; want 1, true", healthy, w, claim.PrepareCalls, claim.Prepared)
			}
		})
	}
	checkNoLeaks(t, client, workers, namespace, wantFailed...)
}

// The fork worker's kubelet read the DRA driver failure policy that deploy/kind mounts on every
// node, and logged it once at start.
func TestDriverPolicyInEffect(t *testing.T) {
	_, workers := connect(t)
	for _, w := range workers {
		if !w.fork {
			continue
		}
		out, err := exec.CommandContext(t.Context(), "docker", "exec", w.name, "journalctl", "-u", "kubelet", "--no-pager", "-o", "cat").Output()
		if err != nil {
			t.Fatalf("kubelet log of %s: %v", w.name, err)
		}
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "DRA driver failure policy in effect") {
				line = l
			}
		}
		if !strings.Contains(line, `path="`+failfastdra.DefaultDriverPolicyPath+`"`) || !strings.Contains(line, "fromFile=true") {
			t.Errorf("%s's kubelet did not log the mounted policy at start: %q", w.name, line)
		}
		t.Logf("%s: %s", w.name, line)
	}
}
