// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build failfastplugin_upstream_errpermanent

package failfastplugin

import "k8s.io/dynamic-resource-allocation/kubeletplugin"

// Built with the tag failfastplugin_upstream_errpermanent, against a
// kubeletplugin that has ErrPermanent (KEP-5322's): Permanent errors are
// kubeletplugin's too, and kubeletplugin's count here.
func init() { upstreamErrPermanent = kubeletplugin.ErrPermanent }
