// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// GeneratedClaims says what the webhook does with a ResourceClaim that the
// resourceclaim controller generates for a pod from a ResourceClaimTemplate
// (its controller owner is the Pod). The template is where invalid config is
// normally refused; a generated claim with invalid config comes from a
// template the webhook never saw (created while the webhook was down, or
// before it was installed). Denying the claim leaves the pod Pending for good,
// with the webhook's message in its FailedResourceClaimCreation events: a Job
// never fails. Allowing it lets the pod fail at prepare, permanently, which a
// Job's podFailurePolicy can act on, but which a ReplicaSet answers with a
// replacement at once, over and over.
type GeneratedClaims string

const (
	// GeneratedClaimsDeny validates generated claims like any other: the
	// pods of a template with invalid config stay Pending. The zero value.
	GeneratedClaimsDeny GeneratedClaims = ""
	// GeneratedClaimsAllow never denies a generated claim: every pod of
	// such a template fails at prepare.
	GeneratedClaimsAllow GeneratedClaims = "Allow"
	// GeneratedClaimsByOwner decides by what owns the pod: a pod without a
	// controller or owned by a Job gets its claim and fails at prepare (the
	// bare pod shows why, the Job can stop on the failure); any other
	// controller's pod (ReplicaSet, StatefulSet, DaemonSet, ...) is denied
	// its claim and stays Pending, because its controller would replace a
	// Failed pod at once. It looks the pod up: the webhook needs a client
	// allowed to get pods. When the lookup fails the claim is denied.
	GeneratedClaimsByOwner GeneratedClaims = "ByOwner"
)

// generatedFor returns the pod a claim was generated for: its controller
// owner, when that is a Pod.
func generatedFor(meta *metav1.ObjectMeta) (*metav1.OwnerReference, bool) {
	owner := metav1.GetControllerOfNoCopy(meta)
	if owner == nil || owner.APIVersion != "v1" || owner.Kind != "Pod" {
		return nil, false
	}
	return owner, true
}

// allowGenerated tells whether a generated claim of the pod namespace/owner
// is let through without validation under policy, and why.
func allowGenerated(ctx context.Context, policy GeneratedClaims, client kubernetes.Interface, namespace string, owner *metav1.OwnerReference) (bool, string) {
	switch policy {
	case GeneratedClaimsAllow:
		return true, "generated claims are allowed"
	case GeneratedClaimsByOwner:
	default:
		return false, ""
	}
	if client == nil {
		return false, "no client to look the pod up"
	}
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	if err != nil || pod.UID != owner.UID {
		klog.FromContext(ctx).Info("Cannot look up the pod of a generated ResourceClaim: validating it", "pod", klog.KRef(namespace, owner.Name), "err", err)
		return false, fmt.Sprintf("pod %s/%s not found", namespace, owner.Name)
	}
	controller := metav1.GetControllerOfNoCopy(&pod.ObjectMeta)
	switch {
	case controller == nil:
		return true, "its pod has no controller"
	case controller.Kind == "Job" && controller.APIVersion == "batch/v1":
		return true, "its pod belongs to a Job"
	}
	return false, ""
}
