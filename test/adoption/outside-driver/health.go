// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// WatchHealthStatus: this driver reports no device health.
//
// kubeletplugin's DRAPlugin has this method from k8s.io v0.37 on; on v0.36
// the driver has no such method, and make verify-adoption leaves this file out.
func (plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return nil
}
