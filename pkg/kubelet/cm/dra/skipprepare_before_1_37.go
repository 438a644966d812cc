// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build dra_failfast_before_1_37

package dra

import "k8s.io/kubernetes/pkg/kubelet/cm/dra/state"

// skipsPrepare: before Kubernetes 1.37 every driver prepares its claims
// (there are no SkipNodeOperations), so no devices recorded means not
// prepared.
func skipsPrepare(state.DriverState) bool {
	return false
}
