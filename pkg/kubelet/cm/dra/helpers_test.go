// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/dra-failfast/dra-failfast/api/decision/decisiontest"
)

const testDriver = "driver.dra-failfast.test"

// The requests and answers the tests classify.
var (
	sentClaims  = decisiontest.SentClaims
	claimResp   = decisiontest.ClaimResponse
	withUnknown = decisiontest.WithUnknown
)

func enableFeature(t testing.TB, enabled bool) {
	t.Helper()
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, DRAHandlePermanentDriverFailures, enabled)
}
