// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build dra_failfast_before_1_37

package dra

import "k8s.io/kubernetes/pkg/kubelet/cm/dra/state"

// skippingDriverState: false, before Kubernetes 1.37 no driver skips node
// operations.
func skippingDriverState() (state.DriverState, bool) {
	return state.DriverState{}, false
}
