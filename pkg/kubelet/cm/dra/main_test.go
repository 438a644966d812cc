// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"os"
	"testing"
)

// TestMain registers the metrics as the kubelet does on its first prepare
// (Manager.NewPrepareFailures), so that every test can read the counters whatever
// order the tests run in (the e2e suite reads them from the kubelet's
// /metrics).
func TestMain(m *testing.M) {
	registerMetrics()

	os.Exit(m.Run())
}
