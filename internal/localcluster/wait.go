// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitFor polls check every 100 ms until it succeeds, d exits or timeout passes.
func (c *Cluster) waitFor(ctx context.Context, d *daemon, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	lastReport := time.Now()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		if time.Since(lastReport) >= 5*time.Second {
			c.pr.step("still waiting: %v", err)
			lastReport = time.Now()
		}
		var exited <-chan struct{}
		if d != nil {
			exited = d.exited
		}
		select {
		case <-exited:
			return errExited(c.p, d)
		case <-ctx.Done():
			role := "cluster"
			if d != nil {
				role = d.role
			}
			return fmt.Errorf("waiting for %s: %w (last check: %v); see %s", role, ctx.Err(), err, c.p.logs())
		case <-ticker.C:
		}
	}
}

func (c *Cluster) etcdHealthy(ctx context.Context) error {
	body, err := httpGet(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(EtcdClientPort)+"/health")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s", body)
	}
	return nil
}

func (c *Cluster) apiServerReady(ctx context.Context) error {
	_, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

func (c *Cluster) containerdReady(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, c.bin("ctr"), "--address", c.p.containerdSocket(), "version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr version: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// importImages imports image tarballs into containerd's k8s.io namespace (the CRI's).
func (c *Cluster) importImages(ctx context.Context, tarballs []string) error {
	for _, tarball := range tarballs {
		cmd := exec.CommandContext(ctx, c.bin("ctr"), "--address", c.p.containerdSocket(), "--namespace", "k8s.io",
			"images", "import", "--platform", "linux/"+runtime.GOARCH, tarball)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("importing %s into containerd: %v: %s", tarball, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func (c *Cluster) defaultServiceAccount(ctx context.Context) error {
	if _, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("ServiceAccount default/default: %w", err)
	}
	if _, err := c.client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("ConfigMap default/kube-root-ca.crt: %w", err)
	}
	return nil
}

// httpsHealthy checks https://127.0.0.1:port/healthz of a daemon with a self-signed certificate.
func httpsHealthy(port int) func(context.Context) error {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the daemon's own self-signed cert, on loopback
	}}
	return func(ctx context.Context) error {
		_, err := httpGet(ctx, client, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz")
		return err
	}
}

func httpGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// waitKubeletReady waits until the kubelet is healthy and its node is Ready. After a restart
// (since not zero) it also waits for the new kubelet to renew the node lease, so that a Ready
// condition left by the previous kubelet does not count. (A new node's lease only appears after
// a 10 s retry, hence not on the first start.)
func (c *Cluster) waitKubeletReady(ctx context.Context, since time.Time) error {
	healthz := "http://127.0.0.1:" + strconv.Itoa(KubeletHealthzPort) + "/healthz"
	return c.waitFor(ctx, c.daemons[roleKubelet], 90*time.Second, func(ctx context.Context) error {
		if _, err := httpGet(ctx, http.DefaultClient, healthz); err != nil {
			return err
		}
		if !since.IsZero() {
			lease, err := c.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("node lease: %w", err)
			}
			if !renewedSince(lease, since) {
				return errors.New("node lease not renewed by the new kubelet yet")
			}
		}
		node, err := c.client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", c.cfg.NodeName, err)
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == v1.NodeReady {
				if cond.Status != v1.ConditionTrue {
					return fmt.Errorf("node %s not Ready: %s: %s", c.cfg.NodeName, cond.Reason, cond.Message)
				}
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s has no Ready condition yet", c.cfg.NodeName)
		}
		return c.kubeletHasPods(ctx)
	})
}

// kubeletHasPods checks that the kubelet knows every pod bound to its node, so that a restarted
// kubelet serves logs and exec for them.
func (c *Cluster) kubeletHasPods(ctx context.Context) error {
	pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.cfg.NodeName})
	if err != nil {
		return fmt.Errorf("listing the node's pods: %w", err)
	}
	var want []v1.Pod
	for _, pod := range pods.Items {
		if pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
			want = append(want, pod)
		}
	}
	if len(want) == 0 {
		return nil
	}
	var known v1.PodList
	err = c.client.CoreV1().RESTClient().Get().Resource("nodes").Name(c.cfg.NodeName).
		SubResource("proxy").Suffix("pods").Do(ctx).Into(&known)
	if err != nil {
		return fmt.Errorf("the kubelet's pods: %w", err)
	}
	uids := map[string]bool{}
	for _, pod := range known.Items {
		uids[string(pod.UID)] = true
	}
	for _, pod := range want {
		if !uids[string(pod.UID)] {
			return fmt.Errorf("the kubelet does not know pod %s/%s yet", pod.Namespace, pod.Name)
		}
	}
	return nil
}

func renewedSince(lease *coordinationv1.Lease, since time.Time) bool {
	return lease.Spec.RenewTime != nil && !lease.Spec.RenewTime.Time.Before(since)
}
