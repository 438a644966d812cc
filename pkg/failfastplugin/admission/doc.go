// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package admission validates a DRA driver's opaque device configuration
// twice with one function: in a validating admission webhook, so that
// kubectl apply of a ResourceClaim, ResourceClaimTemplate or DeviceClass with
// invalid config is denied before any pod exists, and at prepare time, as the
// safety net for what admission did not see (the webhook was down, or the
// object is older than it), where the failure is permanent.
//
// Without the webhook, invalid config in a ResourceClaimTemplate of a
// Deployment makes a kubelet with DRAHandlePermanentDriverFailures fail each
// pod within seconds, and the ReplicaSet replaces it at once, with no
// back-off: Failed pods pile up. With the webhook, the template is never
// created. A webhook and a prepare path that validate differently let invalid
// config through (or deny valid config); running the same function in both
// places, with the same message, avoids that.
//
// The driver author writes one ConfigValidator and adds two lines of wiring,
// one in PrepareResourceClaims and one in main:
//
//	package main
//
//	import (
//		"context"
//		"encoding/json"
//		"fmt"
//
//		resourceapi "k8s.io/api/resource/v1"
//		"k8s.io/apimachinery/pkg/types"
//		"k8s.io/dynamic-resource-allocation/kubeletplugin"
//
//		"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
//		"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
//	)
//
//	const driverName = "gpu.example.com"
//
//	type GPUConfig struct {
//		APIVersion string `json:"apiVersion"`
//		Kind       string `json:"kind"`
//		Partitions int    `json:"partitions"`
//	}
//
//	// validateConfig is the one validation: the webhook and prepare both run it.
//	func validateConfig(ctx context.Context, cfg admission.OpaqueConfig) error {
//		var config GPUConfig
//		if err := json.Unmarshal(cfg.Parameters.Raw, &config); err != nil {
//			return fmt.Errorf("not a GPUConfig: %w", err)
//		}
//		if config.Partitions < 1 || config.Partitions > 7 {
//			return fmt.Errorf("partitions must be between 1 and 7, got %d", config.Partitions)
//		}
//		return nil
//	}
//
//	type driver struct{ kubeletplugin.DRAPlugin }
//
//	func (d *driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
//		return kubeletplugin.PrepareResult{} // the driver's own work
//	}
//
//	func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
//		result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
//		for _, claim := range claims {
//			// Wiring 1: invalid config fails the claim permanently, with the webhook's message.
//			if err := admission.ValidateClaim(ctx, driverName, claim, validateConfig); err != nil {
//				result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
//				continue
//			}
//			result[claim.UID] = d.prepare(ctx, claim)
//		}
//		return result, nil
//	}
//
//	func run(ctx context.Context, opts ...kubeletplugin.Option) error {
//		// Wiring 2: serve the webhook (HTTPS, /healthz, /readyz, /metrics) until ctx ends.
//		webhook, err := admission.Start(ctx, admission.ServerConfig{DriverName: driverName, Validate: validateConfig, Address: ":8443", CertFile: "/etc/webhook/tls.crt", KeyFile: "/etc/webhook/tls.key"})
//		if err != nil {
//			return err
//		}
//		helper, err := failfastplugin.Start(ctx, &driver{}, append(opts, kubeletplugin.DriverName(driverName))...)
//		if err != nil {
//			return err
//		}
//		defer helper.Stop()
//		<-webhook.Done()
//		return webhook.Err()
//	}
//
// Register the webhook with a ValidatingWebhookConfiguration whose rules
// select CREATE and UPDATE of resourceclaims, resourceclaimtemplates and
// deviceclasses in resource.k8s.io/v1, whose clientConfig points at
// DefaultPath on the server, and whose caBundle verifies the serving
// certificate. With failurePolicy Fail nothing passes while the webhook is
// down, not even valid config; with Ignore, invalid config passes then, and
// ValidateClaim fails its pods permanently at prepare time.
//
// A ResourceClaimTemplate admitted while the webhook was down makes every
// pod's generated claim reach the webhook later. ServerConfig.GeneratedClaims
// decides what happens to those claims when their config is invalid: denied
// (the default: the pods stay Pending), allowed (the pods fail at prepare),
// or by the pod's owner (GeneratedClaimsByOwner: bare pods and Jobs fail at
// prepare, where a Job's podFailurePolicy can act; other controllers' pods
// stay Pending instead of being failed and replaced over and over).
//
// # Messages
//
// Both places give the validator's text first, then, in brackets, the
// object, the config entry (its index in the list of configs where it is
// written, and that object's kind) and the requests it applies to (see
// Message):
//
//	partitions must be between 1 and 7, got 9 [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for request "gpu" of driver gpu.example.com]
//
// The webhook names a ResourceClaimTemplate's entry as
// "[ResourceClaimTemplate ns/gpu-template: invalid opaque device config #0
// (source ResourceClaimTemplate) ...]", and at prepare time, the claim made
// from it is named. An entry of a DeviceClass is "[DeviceClass gpu-class:
// invalid opaque device config #1 (source DeviceClass) for all requests of
// the class ...]" in the webhook and "[ResourceClaim ns/gpu: invalid opaque
// device config #1 (source DeviceClass gpu-class) for request "gpu" ...]" at
// prepare time. The whole message fits into the 256 bytes the kubelet keeps
// of a claim's error (v1alpha.MaxErrorBytes): the validator's text is cut
// first, never below 96 bytes, then the brackets; several invalid entries
// share the bytes equally. Keep the validator's text short all the same.
//
// # Metrics
//
// DecisionsMetric counts the webhook's answers by driver_name, resource and
// result (ResultAllowed, ResultDenied, ResultAllowedInvalidGenerated,
// ResultIgnored, ResultError);
// DurationMetric is the histogram of its handling time. Both are in
// k8s.io/component-base/metrics/legacyregistry, which Start serves at
// /metrics.
//
// A driver with a webhook server of its own uses Handler (an http.Handler)
// or Handler.Review instead of Start.
package admission
