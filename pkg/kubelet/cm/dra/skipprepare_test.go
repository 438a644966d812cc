// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !dra_failfast_before_1_37

package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
)

// skippingDriverState is the checkpointed state of a driver that skips
// every node operation, and true: Kubernetes 1.37 and later have them.
func skippingDriverState() (state.DriverState, bool) {
	return state.DriverState{SkipNodeOperations: []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}}, true
}
