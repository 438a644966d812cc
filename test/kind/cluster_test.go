// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

// The kind smoke test (make test-kind): on the kind cluster of deploy/kind with the test driver
// deployed from deploy/test-driver, on each worker, a healthy DRA pod runs and a pod whose driver
// answers Permanent is Failed within seconds after one prepare and one unprepare; after the pods
// are deleted no claim is prepared, no CDI spec is left on any node. hack/test-kind.sh brings the
// cluster up, runs this with KUBECONFIG and DOCKER_HOST set, and takes the cluster down.
package kind

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// statsPort: deploy/test-driver/kubelet-plugin.yaml.
const statsPort = "8081"

type worker struct {
	name   string
	driver *testdriver.Client
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
				workers = append(workers, worker{node.Name, &testdriver.Client{BaseURL: "http://" + net.JoinHostPort(address.Address, statsPort)}})
			}
		}
	}
	slices.SortFunc(workers, func(a, b worker) int { return strings.Compare(a.name, b.name) })
	if len(workers) != 2 {
		t.Fatalf("want the two workers of deploy/kind/cluster.yaml, got %v", workers)
	}
	return client, workers
}

func TestWorkerPods(t *testing.T) {
	client, workers := connect(t)
	ctx := t.Context()
	namespace := fmt.Sprintf("kind-smoke-%d", time.Now().Unix())
	if err := e2eframework.CreateNamespace(ctx, client, namespace); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), namespace, metav1.DeleteOptions{})
	})
	permanent := testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "kind smoke: never works"}.Parameters()
	for _, tmpl := range []struct {
		name       string
		parameters []byte
	}{{"healthy", nil}, {"permanent", permanent}} {
		if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, e2eframework.ClaimTemplate(namespace, tmpl.name, tmpl.parameters), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var pods []string
	for _, w := range workers {
		t.Run(w.name, func(t *testing.T) {
			healthy := e2eframework.Pod(namespace, "healthy-"+w.name, "healthy")
			// A node selector, not nodeName: the scheduler allocates the claim.
			healthy.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": w.name}
			failing := e2eframework.Pod(namespace, "permanent-"+w.name, "permanent")
			failing.Spec.NodeSelector = healthy.Spec.NodeSelector
			for _, pod := range []*v1.Pod{healthy, failing} {
				if _, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				pods = append(pods, pod.Name)
			}
			start := time.Now()
			pod, err := e2eframework.WaitForPod(ctx, client, namespace, failing.Name, 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if err != nil {
				t.Fatalf("pod %s: not Failed in 30 s: %v", failing.Name, err)
			}
			if pod.Status.Reason != failfastdra.PodFailedReason {
				t.Errorf("pod %s: reason %q, want %q", failing.Name, pod.Status.Reason, failfastdra.PodFailedReason)
			}
			t.Logf("%s: Failed after %v: %s", failing.Name, time.Since(start).Round(100*time.Millisecond), pod.Status.Message)
			if _, err := e2eframework.WaitForPod(ctx, client, namespace, healthy.Name, 2*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }); err != nil {
				t.Fatalf("pod %s: not Running: %v", healthy.Name, err)
			}
			// The unprepare of the failed pod's claim comes from the kubelet's pod cleanup.
			err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				stats, err := w.driver.Stats(ctx)
				if err != nil {
					return false, err
				}
				claim, ok := e2eframework.PodClaim(stats, namespace, failing.Name)
				return ok && claim.UnprepareCalls == 1, nil
			})
			stats, statsErr := w.driver.Stats(ctx)
			if statsErr != nil {
				t.Fatal(statsErr)
			}
			failed, _ := e2eframework.PodClaim(stats, namespace, failing.Name)
			if err != nil || failed.PrepareCalls != 1 || failed.UnprepareCalls != 1 || !failed.Permanent {
				t.Errorf("%s's claim on %s: %d prepare, %d unprepare, permanent %v; want 1, 1, true (%v)", failing.Name, w.name, failed.PrepareCalls, failed.UnprepareCalls, failed.Permanent, err)
			}
			running, _ := e2eframework.PodClaim(stats, namespace, healthy.Name)
			if running.PrepareCalls != 1 || !running.Prepared {
				t.Errorf("%s's claim on %s: %d prepare, prepared %v; want 1, true", healthy.Name, w.name, running.PrepareCalls, running.Prepared)
			}
		})
	}

	// The invariant: nothing stays prepared once the pods are gone.
	for _, name := range pods {
		if err := client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range pods {
			if _, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods not gone: %v", err)
	}
	for _, w := range workers {
		stats, err := w.driver.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for uid, claim := range stats.Claims {
			if claim.Namespace == namespace && claim.Prepared {
				t.Errorf("claim %s/%s (%s) is still prepared on %s after its pod was deleted", claim.Namespace, claim.Name, uid, w.name)
			}
		}
		out, err := exec.CommandContext(ctx, "docker", "exec", w.name, "sh", "-c", "cat /var/run/cdi/* 2>/dev/null || true").CombinedOutput()
		if err != nil {
			t.Fatalf("reading %s's CDI specs: %v: %s", w.name, err, out)
		}
		if strings.Contains(string(out), namespace+"/") {
			t.Errorf("%s still has a CDI spec of the test's claims:\n%s", w.name, out)
		}
	}
}

// Every worker's kubelet read the DRA driver failure policy that deploy/kind/cluster.yaml
// mounts, and logged it once at start.
func TestDriverPolicyInEffect(t *testing.T) {
	_, workers := connect(t)
	for _, w := range workers {
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
