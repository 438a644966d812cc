// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission_test

import (
	"context"
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// The example of the package documentation, compiled.

const driverName = "gpu.example.com"

type GPUConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Partitions int    `json:"partitions"`
}

// validateConfig is the one validation: the webhook and prepare both run it.
func validateConfig(ctx context.Context, cfg admission.OpaqueConfig) error {
	var config GPUConfig
	if err := json.Unmarshal(cfg.Parameters.Raw, &config); err != nil {
		return fmt.Errorf("not a GPUConfig: %w", err)
	}
	if config.Partitions < 1 || config.Partitions > 7 {
		return fmt.Errorf("partitions must be between 1 and 7, got %d", config.Partitions)
	}
	return nil
}

type driver struct{ kubeletplugin.DRAPlugin }

func (d *driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	return kubeletplugin.PrepareResult{} // the driver's own work
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		// Wiring 1: invalid config fails the claim permanently, with the webhook's message.
		if err := admission.ValidateClaim(ctx, driverName, claim, validateConfig); err != nil {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		result[claim.UID] = d.prepare(ctx, claim)
	}
	return result, nil
}

func run(ctx context.Context, opts ...kubeletplugin.Option) error {
	// Wiring 2: serve the webhook (HTTPS, /healthz, /readyz, /metrics) until ctx ends.
	webhook, err := admission.Start(ctx, admission.ServerConfig{DriverName: driverName, Validate: validateConfig, Address: ":8443", CertFile: "/etc/webhook/tls.crt", KeyFile: "/etc/webhook/tls.key"})
	if err != nil {
		return err
	}
	helper, err := failfastplugin.Start(ctx, &driver{}, append(opts, kubeletplugin.DriverName(driverName))...)
	if err != nil {
		return err
	}
	defer helper.Stop()
	<-webhook.Done()
	return webhook.Err()
}

func Example() {
	_ = run // needs a kubelet and a certificate: compiled, not run

	claim := &resourceapi.ResourceClaim{}
	claim.Namespace, claim.Name = "ns", "gpu"
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu-class"}}}
	entry := resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driverName}}
	entry.Opaque.Parameters.Raw = []byte(`{"apiVersion":"gpu.example.com/v1","kind":"GPUConfig","partitions":9}`)
	claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: entry}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Config: []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: entry}},
	}}

	results, _ := (&driver{}).PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	err := results[claim.UID].Err
	fmt.Println(failfastplugin.IsPermanent(err))
	fmt.Println(err)
	// Output:
	// true
	// partitions must be between 1 and 7, got 9 [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for request "gpu" of driver gpu.example.com]
}
