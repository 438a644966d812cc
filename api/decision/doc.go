// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package decision is what the dra-failfast kubelet decides from a DRA
// driver's NodePrepareResources answer: Classify sorts each claim's result
// into prepared, transient or permanent (with the reason a permanent-looking
// answer was not taken as one), and the node's DriverFailurePolicy file
// (ParseDriverPolicy, ReadDriverPolicy, PolicyDecision) says what happens to
// each driver's failures. The kubelet side (pkg/kubelet/cm/dra) and
// dra-failfast-check both use it, so that the tool decides exactly as the
// kubelet does; it lives in this light module so that the tool installs
// with go install.
package decision
