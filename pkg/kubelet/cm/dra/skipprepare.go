// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !dra_failfast_before_1_37

package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
)

// skipsPrepare tells whether the driver does not prepare the claim at all
// (Kubernetes 1.37's SkipNodeOperations), so that no devices recorded for
// it still means prepared. Built for 1.37 and later; skipprepare_before_1_37.go
// is the same for older trees (hack/lib.sh, KUBE_GO_TAGS).
func skipsPrepare(driver state.DriverState) bool {
	return driver.Skips(resourceapi.SkipNodeOperationNodePrepareResources)
}
