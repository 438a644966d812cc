// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// generatedClaim is an invalid claim that the resourceclaim controller made
// for pod ns/app (UID pod-uid).
func generatedClaim() *resourceapi.ResourceClaim {
	claim := testClaim(claimEntry(testDriver, invalidParams, "gpu"))
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "app", UID: "pod-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	claim.Annotations = map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"}
	return claim
}

func podOwnedBy(kind, apiVersion string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "pod-uid"}}
	if kind != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: types.UID("owner-uid"), Controller: ptr.To(true)}}
	}
	return pod
}

func TestGeneratedClaims(t *testing.T) {
	notGenerated := testClaim(claimEntry(testDriver, invalidParams, "gpu"))
	notGenerated.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "y", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name      string
		policy    GeneratedClaims
		pod       *v1.Pod // nil: no such pod
		claim     *resourceapi.ResourceClaim
		operation admissionv1.Operation
		wantAllow bool
		noClient  bool
	}{
		{name: "deny (default)", pod: podOwnedBy("", ""), claim: generatedClaim()},
		{name: "allow", policy: GeneratedClaimsAllow, claim: generatedClaim(), wantAllow: true, noClient: true},
		{name: "allow: not generated, still denied", policy: GeneratedClaimsAllow, claim: notGenerated, noClient: true},
		{name: "by owner: bare pod", policy: GeneratedClaimsByOwner, pod: podOwnedBy("", ""), claim: generatedClaim(), wantAllow: true},
		{name: "by owner: Job", policy: GeneratedClaimsByOwner, pod: podOwnedBy("Job", "batch/v1"), claim: generatedClaim(), wantAllow: true},
		{name: "by owner: ReplicaSet", policy: GeneratedClaimsByOwner, pod: podOwnedBy("ReplicaSet", "apps/v1"), claim: generatedClaim()},
		{name: "by owner: StatefulSet", policy: GeneratedClaimsByOwner, pod: podOwnedBy("StatefulSet", "apps/v1"), claim: generatedClaim()},
		{name: "by owner: a CRD named Job", policy: GeneratedClaimsByOwner, pod: podOwnedBy("Job", "example.com/v1"), claim: generatedClaim()},
		{name: "by owner: pod not found", policy: GeneratedClaimsByOwner, claim: generatedClaim()},
		{name: "by owner: another pod of that name", policy: GeneratedClaimsByOwner, pod: func() *v1.Pod { p := podOwnedBy("", ""); p.UID = "other"; return p }(), claim: generatedClaim()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.pod != nil {
				client = fake.NewClientset(tc.pod)
			}
			h := &Handler{DriverName: testDriver, Validate: testValidate, GeneratedClaims: tc.policy, KubeClient: client}
			if tc.noClient {
				h.KubeClient = nil
			}
			req := &admissionv1.AdmissionRequest{
				UID:       "uid",
				Kind:      metav1.GroupVersionKind{Group: GroupName, Version: Version, Kind: string(KindResourceClaim)},
				Resource:  metav1.GroupVersionResource{Group: GroupName, Version: Version, Resource: ResourceClaims},
				Namespace: "ns", Name: "gpu", Operation: admissionv1.Create,
			}
			req.Object.Raw = []byte(mustJSON(tc.claim))
			if tc.operation != "" {
				req.Operation = tc.operation
				old := tc.claim.DeepCopy()
				old.Spec.Devices.Config = nil
				req.OldObject.Raw = []byte(mustJSON(old))
			}
			response, result, err := h.review(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if response.Allowed != tc.wantAllow {
				t.Errorf("allowed = %v (%s), want %v", response.Allowed, result, tc.wantAllow)
			}
			if !tc.wantAllow && (response.Result == nil || response.Result.Message == "") {
				t.Errorf("denied without the validator's message: %+v", response)
			}
			if tc.wantAllow && result != ResultAllowedInvalidGenerated {
				t.Errorf("result %q, want %q", result, ResultAllowedInvalidGenerated)
			}
		})
	}
}

func TestStartRejectsGeneratedClaimsConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ServerConfig
	}{
		{"by owner without a client", ServerConfig{GeneratedClaims: GeneratedClaimsByOwner}},
		{"unknown policy", ServerConfig{GeneratedClaims: "Sometimes"}},
	} {
		tc.cfg.DriverName, tc.cfg.Validate, tc.cfg.CertFile, tc.cfg.KeyFile = testDriver, testValidate, "x", "y"
		if _, err := Start(t.Context(), tc.cfg); err == nil {
			t.Errorf("%s: Start succeeded", tc.name)
		}
	}
}
