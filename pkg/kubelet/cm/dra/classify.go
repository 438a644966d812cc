// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"github.com/dra-failfast/dra-failfast/api/decision"
)

// The classification of driver answers and the node's driver failure policy
// file live in the light module github.com/dra-failfast/dra-failfast/api
// (package decision), so that dra-failfast-check, which a node operator
// installs with go install, decides with the kubelet's own code. The names
// below are the same types and constants, for the kubelet's code and the
// patch series.
type (
	ClaimRef            = decision.ClaimRef
	Outcome             = decision.Outcome
	ClaimResult         = decision.ClaimResult
	DriverResult        = decision.DriverResult
	PermanentAction     = decision.PermanentAction
	RetryBudget         = decision.RetryBudget
	DriverRule          = decision.DriverRule
	DriverPolicyEntry   = decision.DriverPolicyEntry
	DriverFailurePolicy = decision.DriverFailurePolicy
)

const (
	Prepared        = decision.Prepared
	FailedTransient = decision.FailedTransient
	FailedPermanent = decision.FailedPermanent

	DowngradeFeatureDisabled    = decision.DowngradeFeatureDisabled
	DowngradeUnknownClaim       = decision.DowngradeUnknownClaim
	DowngradeEmptyError         = decision.DowngradeEmptyError
	DowngradeUnknownErrorType   = decision.DowngradeUnknownErrorType
	DowngradeMalformedErrorType = decision.DowngradeMalformedErrorType
	DowngradePreparedBefore     = decision.DowngradePreparedBefore
	DowngradePolicyIgnore       = decision.DowngradePolicyIgnore

	DriverPolicyEnv         = decision.DriverPolicyEnv
	DefaultDriverPolicyPath = decision.DefaultDriverPolicyPath
	DriverPolicyAPIVersion  = decision.DriverPolicyAPIVersion
	DriverPolicyKind        = decision.DriverPolicyKind
	PermanentHonor          = decision.PermanentHonor
	PermanentIgnore         = decision.PermanentIgnore
	MaxDriverPolicySize     = decision.MaxDriverPolicySize
)
