// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package decisiontest builds the requests and answers that tests of the
// kubelet side (package decision and the kubelet's DRA manager) classify.
package decisiontest

import (
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// SentClaims are the claims of a NodePrepareResources request, one per UID,
// in namespace "ns" and named "claim-<uid>".
func SentClaims(uids ...string) []*drapbv1.Claim {
	claims := make([]*drapbv1.Claim, 0, len(uids))
	for _, uid := range uids {
		claims = append(claims, &drapbv1.Claim{Namespace: "ns", Name: "claim-" + uid, Uid: uid})
	}
	return claims
}

// ClaimResponse is a driver's answer for one claim: errText (empty: success)
// with errorType on the wire.
func ClaimResponse(errText string, errorType v1alpha.NodePrepareResourceResponseErrorType) *drapbv1.NodePrepareResourceResponse {
	resp := &drapbv1.NodePrepareResourceResponse{Error: errText}
	v1alpha.SetErrorType(resp, errorType)
	return resp
}

// WithUnknown replaces resp's unknown fields with raw wire bytes: what a
// driver built against another version of the API may send.
func WithUnknown(resp *drapbv1.NodePrepareResourceResponse, raw []byte) *drapbv1.NodePrepareResourceResponse {
	resp.ProtoReflect().SetUnknown(raw)
	return resp
}
