// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// PodFailedReason is the pod status Reason, the Event reason and the
// condition reason of a pod failed by a permanent DRA driver failure.
// kubectl get pod shows it as the pod's STATUS.
const PodFailedReason = "DRAPermanentDriverFailure"

// ClaimRef names a ResourceClaim that was sent to a driver.
type ClaimRef struct {
	Namespace string
	Name      string
	UID       types.UID
}

func (c ClaimRef) String() string { return c.Namespace + "/" + c.Name }

// Outcome is what one driver's NodePrepareResources said about one claim.
type Outcome int

const (
	// Prepared: the driver prepared the claim.
	Prepared Outcome = iota
	// FailedTransient: preparing failed and may succeed when retried.
	FailedTransient
	// FailedPermanent: the driver marked the failure permanent and no safety
	// rule objected.
	FailedPermanent
)

func (o Outcome) String() string {
	switch o {
	case Prepared:
		return "Prepared"
	case FailedTransient:
		return "FailedTransient"
	case FailedPermanent:
		return "FailedPermanent"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Reasons why a response that asked for a permanent failure, or may have
// meant to, was not taken as one. They are the values of the reason label of
// the downgrade metric, in snake_case like every reason label value of this
// project (the driver library's included).
const (
	// DowngradeFeatureDisabled: DRAHandlePermanentDriverFailures is off.
	DowngradeFeatureDisabled = "feature_disabled"
	// DowngradeUnknownClaim: the response has a result for a claim UID that
	// was not sent, so none of its results is trusted to be permanent.
	DowngradeUnknownClaim = "unknown_claim_uid"
	// DowngradeEmptyError: error_type is Permanent but the error is empty,
	// which means success.
	DowngradeEmptyError = "empty_error"
	// DowngradeUnknownErrorType: error_type holds a value this kubelet does not know.
	DowngradeUnknownErrorType = "unknown_error_type"
	// DowngradeMalformedErrorType: error_type cannot be decoded or occurs twice.
	DowngradeMalformedErrorType = "malformed_error_type"
	// DowngradePodStarted: the runtime knows a sandbox or containers of the
	// pod, or its status shows a started container (see DowngradeIfStarted).
	// The value predates sandboxes counting; it stays for dashboards.
	DowngradePodStarted = "pod_started_containers"
	// DowngradePreparedBefore: the pod's claims were all prepared for it
	// before (see PrepareFailures.Err), so it may have had a sandbox that
	// the runtime has forgotten since (a reboot, crictl rmp).
	DowngradePreparedBefore = "pod_prepared_before"
	// DowngradePolicyIgnore: the node's driver failure policy says Ignore
	// for the driver (see DriverFailurePolicy).
	DowngradePolicyIgnore = "policy_ignore"
)

// ClaimResult is the classified result of one claim.
type ClaimResult struct {
	Claim  ClaimRef
	Driver string
	// Outcome of the claim.
	Outcome Outcome
	// Message is the driver's error text as received (FailedTransient,
	// FailedPermanent) or, when the driver gave none, a description of what
	// went wrong. Empty for Prepared.
	Message string
	// Downgraded is set to one of the Downgrade* reasons when the driver's
	// response could have been a permanent failure but is not taken as one.
	Downgraded string
	// Budget is set when the claim is FailedPermanent because the node's
	// retry budget for the driver ran out: what was spent, and the budget.
	Budget string
}

// DriverResult is the classified NodePrepareResources call of one driver.
type DriverResult struct {
	Driver string
	// Claims has one entry per claim sent, in the order they were sent.
	Claims []ClaimResult
	// Err is set when the call as a whole failed: a gRPC error, or a response
	// that does not match the request. Every claim is then FailedTransient.
	Err error
}

// Failed reports whether any claim was not prepared.
func (r DriverResult) Failed() bool {
	return r.Err != nil || slices.ContainsFunc(r.Claims, func(c ClaimResult) bool { return c.Outcome != Prepared })
}

// Classify sorts one driver's NodePrepareResources response into per-claim
// outcomes. A claim is FailedPermanent only when the feature gate is on
// (gateEnabled: DRAHandlePermanentDriverFailures), the
// call succeeded, every result belongs to a claim that was sent, and the
// claim's result has a non-empty error with error_type exactly Permanent.
// Everything else that is not a success is FailedTransient, as in a stock
// kubelet.
func Classify(driver string, sent []*drapbv1.Claim, resp *drapbv1.NodePrepareResourcesResponse, callErr error, gateEnabled bool) DriverResult {
	result := DriverResult{Driver: driver, Claims: make([]ClaimResult, 0, len(sent))}
	for _, claim := range sent {
		result.Claims = append(result.Claims, ClaimResult{
			Claim:  ClaimRef{Namespace: claim.GetNamespace(), Name: claim.GetName(), UID: types.UID(claim.GetUid())},
			Driver: driver,
		})
	}
	if callErr == nil && resp == nil {
		callErr = errors.New("empty response")
	}
	if callErr != nil {
		result.Err = fmt.Errorf("NodePrepareResources: %w", boundedError{callErr})
		result.failAll(result.Err.Error(), "")
		return result
	}

	var unknown []string
	for uid := range resp.GetClaims() {
		if !slices.ContainsFunc(sent, func(c *drapbv1.Claim) bool { return c.GetUid() == uid }) {
			unknown = append(unknown, uid)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		noun := "UIDs"
		if len(unknown) == 1 {
			noun = "UID"
		}
		result.Err = fmt.Errorf("NodePrepareResources returned results for %d unknown claim %s, first %q",
			len(unknown), noun, Sanitize(unknown[0], MaxNameLen))
		downgraded := ""
		for _, claimResp := range resp.GetClaims() {
			if v1alpha.GetErrorType(claimResp) == v1alpha.NodePrepareResourceResponseErrorType_Permanent {
				downgraded = DowngradeUnknownClaim
			}
		}
		result.failAll(result.Err.Error(), downgraded)
		return result
	}

	for i := range result.Claims {
		claim := &result.Claims[i]
		claimResp, found := resp.GetClaims()[string(claim.Claim.UID)]
		if !found {
			claim.Outcome = FailedTransient
			claim.Message = "NodePrepareResources returned no result for the claim"
			continue
		}
		errorType, decodeErr := v1alpha.DecodeErrorType(claimResp)
		if claimResp.GetError() == "" {
			claim.Outcome = Prepared
			if errorType == v1alpha.NodePrepareResourceResponseErrorType_Permanent {
				claim.Downgraded = DowngradeEmptyError
			}
			continue
		}
		claim.Outcome = FailedTransient
		claim.Message = claimResp.GetError()
		switch {
		case errors.Is(decodeErr, v1alpha.ErrUnknownValue):
			claim.Downgraded = DowngradeUnknownErrorType
		case decodeErr != nil:
			claim.Downgraded = DowngradeMalformedErrorType
		case errorType != v1alpha.NodePrepareResourceResponseErrorType_Permanent:
		case !gateEnabled:
			claim.Downgraded = DowngradeFeatureDisabled
		default:
			claim.Outcome = FailedPermanent
		}
	}
	return result
}

func (r *DriverResult) failAll(message, downgraded string) {
	for i := range r.Claims {
		r.Claims[i].Outcome = FailedTransient
		r.Claims[i].Message = message
		r.Claims[i].Downgraded = downgraded
	}
}
