// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// ValidateClaim runs validate on every opaque config entry of driverName in
// the allocation of claim (status.allocation.devices.config, which holds the
// entries of the claim and of the DeviceClasses of its requests). Call it
// from PrepareResourceClaims before preparing the claim:
//
//	if err := admission.ValidateClaim(ctx, driverName, claim, validateConfig); err != nil {
//		result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
//		continue
//	}
//
// When entries are invalid, the error is already marked with
// failfastplugin.Permanent (the claim cannot change, so no retry can help),
// it is an InvalidConfigErrors with one InvalidConfigError per invalid
// entry, and its text is what the webhook says for the same entries. An entry
// of the claim is named by its index in the claim's spec.devices.config, an
// entry of a class by its index in the class's spec.config, as the webhook
// names them.
//
// When validate panics, or fails because ctx ended, the error is a plain one
// (the kubelet retries) that says so. A claim without allocation has
// nothing to validate.
func ValidateClaim(ctx context.Context, driverName string, claim *resourceapi.ResourceClaim, validate ConfigValidator) error {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	invalid, err := validateAll(ctx, validate, claimConfigs(driverName, claim))
	if err != nil {
		return fmt.Errorf("ResourceClaim %s: validating opaque device config of driver %s: %w", klog.KObj(claim), driverName, err)
	}
	if len(invalid) == 0 {
		return nil
	}
	return failfastplugin.Permanent(invalid)
}

// claimConfigs returns the entries of driverName in the allocation of claim,
// each with its position in the object it comes from.
func claimConfigs(driverName string, claim *resourceapi.ResourceClaim) []OpaqueConfig {
	object := ObjectRef{Kind: KindResourceClaim, Namespace: claim.Namespace, Name: claim.Name}
	allocated := claim.Status.Allocation.Devices.Config
	specIndex := claimSpecIndexes(claim)
	classIndex := classIndexes(claim)
	var configs []OpaqueConfig
	for i, config := range allocated {
		if config.Opaque == nil || config.Opaque.Driver != driverName {
			continue
		}
		cfg := OpaqueConfig{
			Driver:           driverName,
			Parameters:       config.Opaque.Parameters,
			Requests:         config.Requests,
			Object:           object,
			Index:            -1,
			AllocationSource: config.Source,
			AllocationIndex:  i,
		}
		switch config.Source {
		case resourceapi.AllocationConfigSourceClaim:
			cfg.Source = object
			cfg.Index = specIndex[i]
		case resourceapi.AllocationConfigSourceClass:
			cfg.Source = ObjectRef{Kind: KindDeviceClass, Name: classIndex[i].class}
			if cfg.Source.Name != "" {
				cfg.Index = classIndex[i].index
			}
		default:
			// A source this library does not know: name it as the
			// allocation does.
			cfg.Source = ObjectRef{Kind: Kind(config.Source)}
		}
		configs = append(configs, cfg)
	}
	return configs
}

// claimSpecIndexes maps the positions of the claim's own entries in its
// allocation to their positions in spec.devices.config. The scheduler
// copies them in order, leaving out those that only name subrequests it did
// not pick, so the allocated ones are a subsequence of the spec's. Entries
// that cannot be matched map to -1.
func claimSpecIndexes(claim *resourceapi.ResourceClaim) map[int]int {
	indexes := map[int]int{}
	spec := claim.Spec.Devices.Config
	next := 0
	for i, config := range claim.Status.Allocation.Devices.Config {
		if config.Source != resourceapi.AllocationConfigSourceClaim {
			continue
		}
		indexes[i] = -1
		for j := next; j < len(spec); j++ {
			if slices.Equal(spec[j].Requests, config.Requests) && sameConfig(spec[j].DeviceConfiguration, config.DeviceConfiguration) {
				indexes[i] = j
				next = j + 1
				break
			}
		}
	}
	return indexes
}

type classPosition struct {
	class string
	index int
}

// classIndexes maps the positions of class entries in the allocation to the
// class and the position in its spec.config. The scheduler adds all entries
// of a class together, in the class's order, once per claim, naming the
// requests that use the class: the class is the one of the first request,
// the position the number of entries of the same class before it.
func classIndexes(claim *resourceapi.ResourceClaim) map[int]classPosition {
	positions := map[int]classPosition{}
	seen := map[string]int{}
	for i, config := range claim.Status.Allocation.Devices.Config {
		if config.Source != resourceapi.AllocationConfigSourceClass || len(config.Requests) == 0 {
			continue
		}
		class := requestClass(claim, config.Requests[0])
		if class == "" {
			continue
		}
		positions[i] = classPosition{class: class, index: seen[class]}
		seen[class]++
	}
	return positions
}

// requestClass returns the DeviceClass of a request ("name") or subrequest
// ("name/sub") of claim, "" if there is none.
func requestClass(claim *resourceapi.ResourceClaim, name string) string {
	parent, sub, isSub := strings.Cut(name, "/")
	for _, request := range claim.Spec.Devices.Requests {
		if request.Name != parent {
			continue
		}
		if !isSub {
			if request.Exactly == nil {
				return ""
			}
			return request.Exactly.DeviceClassName
		}
		for _, subRequest := range request.FirstAvailable {
			if subRequest.Name == sub {
				return subRequest.DeviceClassName
			}
		}
	}
	return ""
}
