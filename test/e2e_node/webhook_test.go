// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

// invalidConfig is opaque config for the default driver that its
// validation rejects.
const invalidConfig = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`

// kubectlApply applies a claim template "name" of driver with the given
// opaque config in ns with kubectl, and returns kubectl's output.
func kubectlApply(t *testing.T, ns, name, driverName, config string) (string, error) {
	t.Helper()
	tmpl := e2eframework.ClaimTemplateFor(ns, name, e2eframework.DeviceClassFor(driverName), driverName, []byte(config))
	tmpl.APIVersion, tmpl.Kind = "resource.k8s.io/v1", "ResourceClaimTemplate"
	manifest, err := yaml.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	cmd := cluster.Kubectl(t.Context(), "apply", "-f", "-")
	cmd.Stdin = bytes.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Issue 12 (a): invalid config for the driver is refused at kubectl apply
// with the message of the driver's own validation; valid config and other
// drivers' config are admitted. Also: the latency the webhook adds.
func TestWebhookRejectsInvalidConfigAtApply(t *testing.T) {
	t.Parallel()
	ns := namespaceFor(t)

	out, err := kubectlApply(t, ns, "invalid", testdriver.DefaultDriverName, invalidConfig)
	t.Logf("$ kubectl apply -f invalid.yaml\n%s", out)
	if err == nil {
		t.Fatal("kubectl apply of invalid config succeeded")
	}
	for _, want := range []string{"denied the request", ns + "/invalid", `prepare "Sometimes" is not one of`, "#0"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl output does not contain %q", want)
		}
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Get(t.Context(), "invalid", metav1.GetOptions{}); err == nil {
		t.Error("the invalid template was created")
	}

	valid := `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1}`
	if out, err := kubectlApply(t, ns, "valid", testdriver.DefaultDriverName, valid); err != nil {
		t.Errorf("valid config refused: %v\n%s", err, out)
	}
	// Another driver's config is none of this webhook's business, even if
	// this driver could not parse it.
	if out, err := kubectlApply(t, ns, "other", "other.example.com", `{"anything": ["goes"]}`); err != nil {
		t.Errorf("another driver's config refused: %v\n%s", err, out)
	}

	// Admission latency over 100 creates, with the webhook and without
	// (a namespace the webhook skips).
	off := namespaceWithLabels(t, map[string]string{e2eframework.WebhookNamespaceLabel: e2eframework.WebhookOff})
	with, without := createLatencies(t, ns, 100), createLatencies(t, off, 100)
	t.Logf("create latency of a ResourceClaimTemplate over 100 creates: with the webhook p50 %v p99 %v; without p50 %v p99 %v; added p50 %v",
		with.p50, with.p99, without.p50, without.p99, with.p50-without.p50)
}

type latencies struct{ p50, p99 time.Duration }

// createLatencies creates n valid claim templates of the default driver one
// after the other and returns the quantiles of the create latency.
func createLatencies(t *testing.T, ns string, n int) latencies {
	t.Helper()
	durations := make([]time.Duration, 0, n)
	for i := range n {
		tmpl := e2eframework.ClaimTemplate(ns, fmt.Sprintf("latency-%03d", i), behavior(testdriver.BehaviorSpec{Prepare: testdriver.PrepareSucceed}))
		start := time.Now()
		if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", tmpl.Name, err)
		}
		durations = append(durations, time.Since(start))
	}
	slices.Sort(durations)
	return latencies{p50: durations[n/2], p99: durations[(n*99)/100-1]}
}

// webhookChurnWindow is how long the Deployments with invalid config are
// watched: long enough for several of the resourceclaim controller's
// retries and, with the webhook down, for the ReplicaSet to replace failed
// pods many times (about 70 pods a minute); short enough not to load the
// node for the whole run (at 5 minutes, 360 churned pods slowed the other
// parallel tests' pods past their deadlines on a loaded 2-core machine).
const webhookChurnWindow = 2 * time.Minute

// Issue 12 (c): a 2-replica Deployment whose claim template has invalid
// config. With the webhook up the template is refused: the pods wait for
// it, nothing fails. With the webhook down (failurePolicy Ignore) the
// template is admitted, prepare-time validation fails every pod
// permanently, and the ReplicaSet replaces them at once: the churn is
// reported.
func TestWebhookDownDeploymentChurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"webhook-up", nil},
		{"webhook-down", map[string]string{e2eframework.WebhookNamespaceLabel: e2eframework.WebhookDown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := namespaceWithLabels(t, tc.labels)
			out, err := kubectlApply(t, ns, "claim", testdriver.DefaultDriverName, invalidConfig)
			if admitted := err == nil; admitted != (tc.labels != nil) {
				t.Fatalf("template admitted: %v, want %v: %s", admitted, tc.labels != nil, out)
			}
			createDeployment(t, ns, 2)
			time.Sleep(webhookChurnWindow)
			st, err := deploymentPods(t.Context(), ns)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v after the Deployment was created: %d pods created, %d failed permanently, %d running",
				tc.name, webhookChurnWindow, st.created, st.failed, st.running)
			if tc.labels == nil && (st.failed > 0 || st.created != 2 || st.running > 0) {
				t.Errorf("with the webhook up: %d pods created, %d failed, %d running; want 2 waiting pods and none failed", st.created, st.failed, st.running)
			}
			if tc.labels == nil {
				// They must wait because the template was refused, not
				// for some other reason: the resourceclaim controller says
				// it cannot create their claims.
				if n := claimCreationFailures(t, ns); n == 0 {
					t.Error("with the webhook up: no FailedResourceClaimCreation event, the pods are not waiting for the refused template")
				}
			}
			if tc.labels != nil && st.failed == 0 {
				t.Error("with the webhook down no pod failed: prepare-time validation did not catch the invalid config")
			}
			if err := client.AppsV1().Deployments(ns).Delete(context.Background(), "workload", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deleteAndCheckNoLeaks(t, ns, driver)
		})
	}
}

// claimCreationFailures counts the events of the resourceclaim controller
// saying that it could not create a pod's claims (reason
// FailedResourceClaimCreation) in ns, waiting up to 10s for the first.
func claimCreationFailures(t *testing.T, ns string) int {
	t.Helper()
	n := 0
	_ = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedResourceClaimCreation"})
		if err != nil {
			return false, nil
		}
		n = len(list.Items)
		return n > 0, nil
	})
	return n
}
