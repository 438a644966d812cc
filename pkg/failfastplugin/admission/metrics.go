// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	// DecisionsMetric is the name of the counter of admission requests
	// answered by the webhook, by driver_name, resource and result.
	DecisionsMetric = "dra_failfast_plugin_admission_decisions_total"
	// DurationMetric is the name of the histogram of the time the webhook
	// took to answer an admission request, by driver_name and resource.
	DurationMetric = "dra_failfast_plugin_admission_duration_seconds"
)

// Values of the resource label: the resources the webhook validates, and
// ResourceOther for everything else (also for requests that could not be
// read), so that the label cannot grow with what clients send.
const (
	ResourceClaims         = "resourceclaims"
	ResourceClaimTemplates = "resourceclaimtemplates"
	DeviceClasses          = "deviceclasses"
	ResourceOther          = "other"
)

// Values of the result label.
const (
	// ResultAllowed: validated, no invalid entry of the driver.
	ResultAllowed = "allowed"
	// ResultDenied: validated, an entry of the driver is invalid.
	ResultDenied = "denied"
	// ResultAllowedInvalidGenerated: a claim generated for a pod has an
	// invalid entry, and the GeneratedClaims policy lets it through: its pod
	// fails at prepare.
	ResultAllowedInvalidGenerated = "allowed_invalid_generated"
	// ResultIgnored: allowed without looking, not the webhook's business
	// (another resource or version, a subresource, DELETE, CONNECT, UPDATE
	// of a claim or template, whose spec is immutable).
	ResultIgnored = "ignored"
	// ResultBusy: no verdict: too many requests in flight until the
	// request's timeout (HTTP 429; the API server applies the failure
	// policy).
	ResultBusy = "busy"
	// ResultError: no verdict: the request could not be read, the object
	// could not be decoded, the validator panicked or ran out of time.
	ResultError = "error"
)

var (
	decisions = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Name:           DecisionsMetric,
			Help:           "Number of admission requests answered by the DRA driver's config validation webhook, by driver, resource and result (allowed, denied, allowed_invalid_generated, ignored, busy, error).",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "resource", "result"},
	)
	duration = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Name: DurationMetric,
			Help: "Time the DRA driver's config validation webhook took to answer an admission request, from reading the request to writing the answer, by driver and resource.",
			// 0.25ms ... 8.2s: validation is usually sub-millisecond,
			// and the API server waits at most 30s.
			Buckets:        metrics.ExponentialBuckets(0.00025, 2, 16),
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "resource"},
	)
)

var registerMetrics sync.Once

// RegisterMetrics registers the webhook's metrics (DecisionsMetric,
// DurationMetric) in the global k8s.io/component-base/metrics/legacyregistry,
// once, like failfastplugin.RegisterMetrics. Start and Handler call it;
// importing the package registers nothing.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(decisions, duration)
	})
}
