// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

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
	// FailedPermanent: the driver marked the failure permanent and the
	// kubelet takes it as such.
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
// meant to, was not taken as one. They are label values, in snake_case.
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
)

// ClaimResult is the classified result of one claim.
type ClaimResult struct {
	Claim  ClaimRef
	Driver string
	// What the driver's answer means for the claim.
	Outcome Outcome
	// Message is the driver's error text as received (FailedTransient,
	// FailedPermanent) or, when the driver gave none, a description of what
	// went wrong. Empty for Prepared.
	Message string
	// Downgraded is set to one of the reasons above when the driver's
	// response could have been a permanent failure but is not taken as one.
	Downgraded string
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

// Classify sorts one driver's NodePrepareResources response into
// per-claim outcomes. A claim is FailedPermanent only when the feature gate
// DRAHandlePermanentDriverFailures is on (gateEnabled), the call succeeded,
// every result belongs to a claim that was sent, and the claim's result has
// a non-empty error with error_type exactly Permanent. Everything else that
// is not a success is FailedTransient, retried as without this feature.
func Classify(driver string, sent []*drapb.Claim, resp *drapb.NodePrepareResourcesResponse, callErr error, gateEnabled bool) DriverResult {
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
		if !slices.ContainsFunc(sent, func(c *drapb.Claim) bool { return c.GetUid() == uid }) {
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
			if permanent, _ := permanentMark(claimResp); permanent {
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
		permanent, notPermanent := permanentMark(claimResp)
		if claimResp.GetError() == "" {
			claim.Outcome = Prepared
			if permanent {
				claim.Downgraded = DowngradeEmptyError
			}
			continue
		}
		claim.Outcome = FailedTransient
		claim.Message = claimResp.GetError()
		switch {
		case notPermanent != "":
			claim.Downgraded = notPermanent
		case !permanent:
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
