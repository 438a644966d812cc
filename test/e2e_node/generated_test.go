// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// Issue 25, item 6: a claim template with invalid config admitted while the
// webhook was down, then the webhook up. The pods' claims are generated from
// the template and reach the webhook. Over the churn window, with a bare pod,
// a Job whose podFailurePolicy matches the DRA condition, and a 2-replica
// Deployment:
//   - deny (the library's default): every pod waits, Pending for good, the
//     webhook's words in FailedResourceClaimCreation events; the Job never
//     fails;
//   - by owner (what the example driver uses): the bare pod fails at
//     prepare with the driver's words, the Job fails at its first pod on
//     the condition, the Deployment's pods wait as with deny (no churn).
func TestGeneratedClaimsFromUnvalidatedTemplate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		policy admission.GeneratedClaims
	}{{"deny", admission.GeneratedClaimsDeny}, {"by-owner", admission.GeneratedClaimsByOwner}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := driver
			if tc.policy != admission.GeneratedClaimsDeny {
				d = startDriver(t, e2eframework.DriverOptions{DriverName: tc.name + ".dra-failfast.test", Devices: 8, Webhook: true, GeneratedClaims: tc.policy})
				if err := d.RegisterWebhook(t.Context(), cluster); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = d.UnregisterWebhook(context.Background(), cluster) })
			}
			// The template gets past the webhook while it is down...
			ns := namespaceWithLabels(t, map[string]string{e2eframework.WebhookNamespaceLabel: e2eframework.WebhookDown})
			if out, err := kubectlApply(t, ns, "claim", d.Name(), invalidConfig); err != nil {
				t.Fatalf("template not admitted with the webhook down: %v: %s", err, out)
			}
			// ... which then comes up.
			patch := []byte(`{"metadata":{"labels":{"` + e2eframework.WebhookNamespaceLabel + `":null}}}`)
			if _, err := client.CoreV1().Namespaces().Patch(t.Context(), ns, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the API server's webhook selection sees the label change
			start := time.Now()
			createPodWith(t, ns, "bare", v1.RestartPolicyNever, "claim")
			createConditionJob(t, ns, "job", "claim")
			createDeployment(t, ns, 2)
			time.Sleep(webhookChurnWindow)

			bare := getPod(t, ns, "bare")
			jobReason := jobFailedReason(t, ns, "job", time.Second)
			st, err := deploymentPods(t.Context(), ns)
			if err != nil {
				t.Fatal(err)
			}
			deployment, failedDeploymentPods := 0, 0
			for _, pod := range listPods(t, ns) {
				if strings.HasPrefix(pod.Name, "workload-") {
					deployment++
					if podFailed(&pod) {
						failedDeploymentPods++
					}
				}
			}
			events := claimCreationEvents(t, ns)
			t.Logf("%s, %v: bare pod %s (%s); Job failed: %q with %d pods; Deployment: %d pods created, %d failed; %d FailedResourceClaimCreation events, e.g. %q; all pods: %d created, %d failed",
				tc.name, time.Since(start).Round(time.Second), bare.Status.Phase, bare.Status.Reason, jobReason, jobPods(t, ns, "job"), deployment, failedDeploymentPods, len(events), firstMessage(events), st.created, st.failed)

			if deployment != 2 || failedDeploymentPods != 0 {
				t.Errorf("Deployment: %d pods created, %d failed; want 2 waiting pods, none failed (no churn)", deployment, failedDeploymentPods)
			}
			if !strings.Contains(firstMessage(events), "Sometimes") {
				t.Errorf("no FailedResourceClaimCreation event carries the webhook's words: %q", firstMessage(events))
			}
			switch tc.policy {
			case admission.GeneratedClaimsDeny:
				if bare.Status.Phase != v1.PodPending || jobReason != "" {
					t.Errorf("deny: bare pod %s, Job failed %q; want Pending and not failed", bare.Status.Phase, jobReason)
				}
			default:
				if !failedForDRA(bare) || !strings.Contains(bare.Status.Message, "Sometimes") {
					t.Errorf("by owner: bare pod %s %s %q; want Failed for the DRA failure, in the driver's words", bare.Status.Phase, bare.Status.Reason, bare.Status.Message)
				}
				if jobReason != batchv1.JobReasonPodFailurePolicy || jobPods(t, ns, "job") != 1 {
					t.Errorf("by owner: Job failed %q with %d pods; want %q at its first pod", jobReason, jobPods(t, ns, "job"), batchv1.JobReasonPodFailurePolicy)
				}
			}
			if err := client.AppsV1().Deployments(ns).Delete(context.Background(), "workload", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := client.BatchV1().Jobs(ns).Delete(context.Background(), "job", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
				t.Fatal(err)
			}
			deleteAndCheckNoLeaks(t, ns, d)
		})
	}
}

func listPods(t *testing.T, ns string) []v1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func claimCreationEvents(t *testing.T, ns string) []v1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=FailedResourceClaimCreation"})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func firstMessage(events []v1.Event) string {
	if len(events) == 0 {
		return ""
	}
	return events[0].Message
}
