// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package localcluster

// Run as root, after hack/build-cluster-binaries.sh (and hack/build-kubelet.sh):
//
//	go test -tags e2e_node -v -timeout 10m ./internal/localcluster/
//
// LOCAL_CLUSTER_KUBELET picks the kubelet, relative to the repository root (default:
// _output/bin/kubelet, else _output/bin/kubelet-stock).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testKubelet(t *testing.T) string {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("LOCAL_CLUSTER_KUBELET"); path != "" {
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path) // relative to the repository, not to this package
		}
		return path
	}
	for _, name := range []string{"kubelet", "kubelet-stock"} {
		path, err := OutputPath("bin", name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	t.Fatal("no kubelet in _output/bin: run hack/build-kubelet.sh")
	return ""
}

func TestLocalCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	start := time.Now()
	c, err := Up(ctx, Config{KubeletPath: testKubelet(t), Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Logf("up in %.1fs", time.Since(start).Seconds())
	down := func() {
		start := time.Now()
		if err := c.Down(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("Down: %v", err)
		}
		t.Logf("down in %.1fs", time.Since(start).Seconds())
	}
	defer func() {
		if c != nil {
			down()
		}
	}()
	st := c.Status(ctx)
	t.Logf("RSS of the cluster's processes: %.0f MiB", float64(st.RSSBytes)/(1<<20))
	for _, p := range st.Processes {
		t.Logf("  %-24s pid %-7d %4.0f MiB", p.Role, p.PID, float64(p.RSSBytes)/(1<<20))
	}

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload", Namespace: "default"},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []v1.Container{{
				Name:            "workload",
				Image:           WorkloadImage,
				ImagePullPolicy: v1.PullNever,
				Env:             []v1.EnvVar{{Name: "DRA_TEST", Value: "hello"}, {Name: "OTHER", Value: "x"}},
			}},
		},
	}
	createTime := time.Now()
	if _, err := c.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	waitRunning(ctx, t, c, "workload")
	t.Logf("pod Running %.2fs after create", time.Since(createTime).Seconds())
	checkLogs(ctx, t, c, "workload")

	// The kubelet restart the e2e tests use to flip feature gates: the pod must survive it.
	if err := c.RestartKubelet(ctx, c.KubeletFeatureGates()); err != nil {
		t.Fatalf("RestartKubelet: %v", err)
	}
	waitRunning(ctx, t, c, "workload")
	checkLogs(ctx, t, c, "workload")

	p, created, sysctls := c.p, c.created, c.sysctls
	down()
	c = nil
	// Down checks this already; check again from the outside of Down.
	if err := leftovers(p, created, sysctls); err != nil {
		t.Error(err)
	}
}

// TestUpAfterCrash kills every daemon of a cluster with a running pod, as a crash of the test
// process would leave it (shims and containers still running, mounts and cgroups in place),
// and checks that the next Up cleans up and works.
func TestUpAfterCrash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cfg := Config{KubeletPath: testKubelet(t), Progress: testWriter{t}}
	c, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "workload", Image: WorkloadImage, ImagePullPolicy: v1.PullNever,
		}}},
	}
	if _, err := c.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	waitRunning(ctx, t, c, "survivor")
	for role, d := range c.daemons {
		if err := d.cmd.Process.Kill(); err != nil {
			t.Fatalf("killing %s: %v", role, err)
		}
		<-d.exited
	}
	if len(cgroupProcs()) == 0 {
		t.Fatal("no container process survived the daemons: the crash is not realistic")
	}

	c, err = Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up after a crash: %v", err)
	}
	pods, err := c.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("the new cluster has %d pods from the old one", len(pods.Items))
	}
	if err := c.Down(ctx); err != nil {
		t.Errorf("Down: %v", err)
	}
}

func waitRunning(ctx context.Context, t *testing.T, c *Cluster, name string) {
	t.Helper()
	var last v1.PodStatus
	for ctx.Err() == nil {
		pod, err := c.Client().CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = pod.Status
			if pod.Status.Phase == v1.PodRunning {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s not Running: %+v", name, last)
}

func checkLogs(ctx context.Context, t *testing.T, c *Cluster, name string) {
	t.Helper()
	var out []byte
	var err error
	for i := 0; i < 50; i++ {
		out, err = c.Kubectl(ctx, "logs", "-n", "default", name).CombinedOutput()
		if err == nil && strings.Contains(string(out), "DRA_TEST=hello") {
			if strings.Contains(string(out), "OTHER=") {
				t.Errorf("kubectl logs shows a variable without DRA_ prefix:\n%s", out)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("kubectl logs %s: %v\n%s", name, err, out)
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
