// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

const (
	testDriver  = "gpu.example.com"
	otherDriver = "nic.example.com"
)

const (
	validParams   = `{"partitions":2}`
	invalidParams = `{"partitions":9}`
	invalidText   = "partitions must be between 1 and 7, got 9"
)

// testValidate wants {"partitions": 1...7}. {"panic": true} panics,
// {"block": true} waits until ctx ends and returns its error.
func testValidate(ctx context.Context, cfg OpaqueConfig) error {
	var params struct {
		Partitions int  `json:"partitions"`
		Panic      bool `json:"panic"`
		Block      bool `json:"block"`
	}
	if err := json.Unmarshal(cfg.Parameters.Raw, &params); err != nil {
		return fmt.Errorf("not a GPUConfig: %w", err)
	}
	if params.Panic {
		panic("validator bug")
	}
	if params.Block {
		<-ctx.Done()
		return fmt.Errorf("gave up: %w", ctx.Err())
	}
	if params.Partitions < 1 || params.Partitions > 7 {
		return fmt.Errorf("partitions must be between 1 and 7, got %d", params.Partitions)
	}
	return nil
}

func opaque(driver, params string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver:     driver,
		Parameters: runtime.RawExtension{Raw: []byte(params)},
	}}
}

func claimEntry(driver, params string, requests ...string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{Requests: requests, DeviceConfiguration: opaque(driver, params)}
}

// testClaim is an unallocated claim ns/gpu with the requests "gpu" (class
// gpu-class), "nic" (class nic-class) and "any" (subrequests "big" of class
// big-class and "small" of gpu-class).
func testClaim(configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gpu", UID: types.UID("claim-uid")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{
				{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu-class", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}},
				{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic-class", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}},
				{Name: "any", FirstAvailable: []resourceapi.DeviceSubRequest{
					{Name: "big", DeviceClassName: "big-class", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
					{Name: "small", DeviceClassName: "gpu-class", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
				}},
			},
			Config: configs,
		}},
	}
}

// allocate gives claim an allocation with these configs.
func allocate(claim *resourceapi.ResourceClaim, configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Config: configs}}
	return claim
}

// allocatedClaim is testClaim allocated as the scheduler does: the configs
// of the class of each request first, then those of the claim.
func allocatedClaim(configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaim {
	claim := testClaim(configs...)
	var allocated []resourceapi.DeviceAllocationConfiguration
	for _, config := range configs {
		allocated = append(allocated, resourceapi.DeviceAllocationConfiguration{
			Source:              resourceapi.AllocationConfigSourceClaim,
			Requests:            config.Requests,
			DeviceConfiguration: config.DeviceConfiguration,
		})
	}
	return allocate(claim, allocated...)
}

func classEntry(config resourceapi.DeviceConfiguration, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClass, Requests: requests, DeviceConfiguration: config}
}

func fromClaim(config resourceapi.DeviceClaimConfiguration) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim, Requests: config.Requests, DeviceConfiguration: config.DeviceConfiguration}
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// TestMain registers the metrics first: the tests read their counters before
// the first request (which is when Handler registers them).
func TestMain(m *testing.M) {
	RegisterMetrics()
	os.Exit(m.Run())
}
