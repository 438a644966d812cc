// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"errors"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// What only the fork has beyond the KEP: error_type read from the v1
// message's unknown fields (the fork's kubelet API has no such field), the
// node's driver failure policy and the record of prepared pods.
const (
	// DowngradeMalformedErrorType: the unknown fields that would hold
	// error_type do not parse.
	DowngradeMalformedErrorType = "malformed_error_type"
	// DowngradePreparedBefore: the pod's claims were all prepared for it
	// before, so it may have had a sandbox that the runtime has forgotten
	// since (a reboot, crictl rmp).
	DowngradePreparedBefore = "pod_prepared_before"
	// DowngradePolicyIgnore: the node's driver failure policy says Ignore
	// for the driver (see DriverFailurePolicy).
	DowngradePolicyIgnore = "policy_ignore"
)

// permanentMark reads a claim result's error_type: whether it says
// Permanent, and when it cannot be trusted, the Downgrade* reason why.
func permanentMark(resp *drapbv1.NodePrepareResourceResponse) (permanent bool, notPermanent string) {
	errorType, err := v1alpha.DecodeErrorType(resp)
	switch {
	case errors.Is(err, v1alpha.ErrUnknownValue):
		return false, DowngradeUnknownErrorType
	case err != nil:
		return false, DowngradeMalformedErrorType
	}
	return errorType == v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT, ""
}
