// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsSubsystem is the kubelet's DRA metrics' (upstream's dra_operation_duration_seconds,
// dra_resource_claims_in_use...): dra_permanent_failures_total has the name, label and meaning
// the upstream-shaped series gives it in pkg/kubelet/metrics (upstream/patches 0004); the
// downgrade counter is the fork's own.
const metricsSubsystem = "dra"

var (
	permanentFailures = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "permanent_failures_total",
			Help:           "Cumulative number of NodePrepareResources failures that a DRA driver marked as permanent and that failed the pod.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name"},
	)
	permanentDowngrades = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "permanent_failure_downgrades_total",
			Help:           "Cumulative number of NodePrepareResources claim results that were or may have been marked permanent but were retried, by driver and reason.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "reason"},
	)
	policyOutcomes = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "driver_policy_outcomes_total",
			Help:           "What the node's DRA driver failure policy did with failed NodePrepareResources claim results, by driver and outcome (honored, ignored, budget_retry, budget_exhausted).",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "outcome"},
	)
	policyReloadFailures = metrics.NewCounter(
		&metrics.CounterOpts{
			Subsystem:      metricsSubsystem,
			Name:           "driver_policy_reload_failures_total",
			Help:           "Number of times the DRA driver failure policy file changed but could not be used (the policy in effect was kept).",
			StabilityLevel: metrics.ALPHA,
		},
	)
)

var registerMetricsOnce sync.Once

// registerMetrics registers the metrics above with the kubelet's registry,
// once, when the DRA manager first prepares a pod's claims with the feature
// gate on (Manager.NewPrepareFailures), before any of them can count; with the gate
// off the kubelet's /metrics stays stock. Not in init: the
// patched pkg/kubelet/types imports this package (IsPodConditionType), and
// every binary that imports that package must not get kubelet metrics.
func registerMetrics() {
	registerMetricsOnce.Do(func() {
		legacyregistry.MustRegister(permanentFailures, permanentDowngrades, policyOutcomes, policyReloadFailures)
	})
}
