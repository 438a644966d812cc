// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"fmt"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Reasons why a device reported with DeviceFault was not tainted, the values
// of the reason label of DeviceTaintFailuresMetric.
const (
	// TaintFailureNotEnabled: the driver was started with Start or Wrap,
	// not with StartWithDeviceFaults or DeviceFaults.Wrap.
	TaintFailureNotEnabled = "not_enabled"
	// TaintFailurePublish: creating the device's DeviceTaintRule failed
	// or took longer than DeviceFaultConfig.WaitTimeout.
	TaintFailurePublish = "publish_failed"
	// TaintFailureRuleConflict: a DeviceTaintRule with the name of the
	// device's rule exists and selects another device or driver.
	TaintFailureRuleConflict = "rule_conflict"
)

const (
	// DeviceTaintFailuresMetric is the name of the counter of devices
	// reported with DeviceFault whose DeviceTaintRule could not be written,
	// by driver_name and reason.
	DeviceTaintFailuresMetric = "dra_failfast_plugin_device_taint_failures_total"
	// DeviceTaintWaitMetric is the name of the histogram of the time from
	// a prepare call's device faults reaching the library until the API
	// server stored all their DeviceTaintRules, by driver_name.
	DeviceTaintWaitMetric = "dra_failfast_plugin_device_taint_wait_duration_seconds"
	// DeviceTaintRetriesMetric is the name of the counter of background
	// retries of device faults' taints, by driver_name and result
	// (RetryTainted, RetryFailed, RetryConflict, RetryDropped).
	DeviceTaintRetriesMetric = "dra_failfast_plugin_device_taint_retries_total"
	// DeviceTaintPendingMetric is the name of the gauge of devices with a
	// fault whose DeviceTaintRule is not written yet and is being retried,
	// by driver_name: above zero, a faulty device may still be allocated.
	DeviceTaintPendingMetric = "dra_failfast_plugin_device_taint_pending"
)

var (
	deviceTaintFailures = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Name:           DeviceTaintFailuresMetric,
			Help:           "Number of devices reported with DeviceFault whose DeviceTaintRule could not be written; their claims failed permanently anyway. By driver and reason.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "reason"},
	)
	deviceTaintWait = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Name:           DeviceTaintWaitMetric,
			Help:           "Time from the device faults of a NodePrepareResources call reaching the library until the API server stored all their DeviceTaintRules, by driver.",
			Buckets:        metrics.ExponentialBuckets(0.005, 2, 12), // 5ms ... 10.24s, the default wait timeout
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name"},
	)
	deviceTaintRetries = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Name:           DeviceTaintRetriesMetric,
			Help:           "Number of background retries of the DeviceTaintRules of device faults that could not be written at first, by driver and result.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "result"},
	)
	deviceTaintPending = metrics.NewGaugeVec(
		&metrics.GaugeOpts{
			Name:           DeviceTaintPendingMetric,
			Help:           "Number of devices with a fault whose DeviceTaintRule is not written yet and is being retried, by driver.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name"},
	)
)

// allMetrics are the library's metrics.
func allMetrics() []metrics.Registerable {
	return []metrics.Registerable{deviceTaintFailures, deviceTaintWait, deviceTaintRetries, deviceTaintPending}
}

var registerMetrics sync.Once

// RegisterMetrics registers the library's metrics (DeviceTaintFailuresMetric,
// DeviceTaintWaitMetric, DeviceTaintRetriesMetric, DeviceTaintPendingMetric) in the global
// k8s.io/component-base/metrics/legacyregistry, once: what a driver that uses
// component-base most likely serves already, and what the kubelet side of
// this repository uses too. Serve them with legacyregistry.Handler().
// NewDeviceFaults, Start, StartWithDeviceFaults and Wrap call it; importing
// the package registers nothing.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(allMetrics()...)
	})
}

// RegisterMetricsWith registers the library's metrics in registry as well,
// for a driver that serves its own registry instead of (or besides) the
// global one: metrics.NewKubeRegistry(), served with
// metrics.HandlerFor(registry, ...); a driver on plain Prometheus
// client_golang adds registry to its prometheus.Gatherers. The values are
// the same as in the global registry: one of each metric per process.
func RegisterMetricsWith(registry metrics.KubeRegistry) error {
	for _, c := range allMetrics() {
		if err := registry.Register(c); err != nil {
			return fmt.Errorf("register %s: %w", c.FQName(), err)
		}
	}
	return nil
}
