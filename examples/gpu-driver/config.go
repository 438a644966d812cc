// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// GPUConfig is the driver's opaque device configuration, written by users in
// a ResourceClaim, ResourceClaimTemplate or DeviceClass:
//
//	config:
//	- opaque:
//	    driver: gpu.example.com
//	    parameters:
//	      apiVersion: gpu.example.com/v1alpha1
//	      kind: GPUConfig
//	      sharing: TimeSlicing
type GPUConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Sharing is how containers share the GPU: Exclusive (the default) or
	// TimeSlicing.
	Sharing string `json:"sharing,omitempty"`
}

const (
	configAPIVersion = driverName + "/v1alpha1"
	configKind       = "GPUConfig"
)

// validateConfig is the driver's one validation of its opaque config. The
// admission webhook runs it, so that kubectl apply of an invalid object is
// denied, and PrepareResourceClaims runs it, so that a claim that got past
// the webhook (it was down, or the object is older) fails its pod
// permanently instead of being retried forever. It looks at the config only:
// the webhook has no devices.
func validateConfig(_ context.Context, cfg admission.OpaqueConfig) error {
	_, err := decodeConfig(cfg.Parameters.Raw)
	return err
}

// decodeConfig decodes and checks parameters strictly: an unknown field is a
// typo that would otherwise be ignored silently.
func decodeConfig(raw []byte) (GPUConfig, error) {
	var config GPUConfig
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&config); err != nil {
		return config, fmt.Errorf("not a %s: %w", configKind, err)
	}
	if config.APIVersion != configAPIVersion || config.Kind != configKind {
		return config, fmt.Errorf("apiVersion/kind must be %s/%s, got %q/%q", configAPIVersion, configKind, config.APIVersion, config.Kind)
	}
	switch config.Sharing {
	case "", "Exclusive", "TimeSlicing":
	default:
		return config, fmt.Errorf("sharing must be Exclusive or TimeSlicing, got %q", config.Sharing)
	}
	return config, nil
}
