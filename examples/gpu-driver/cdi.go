// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const (
	cdiVendor  = "gpu.example.com"
	cdiClass   = "gpu"
	cdiKind    = cdiVendor + "/" + cdiClass
	cdiVersion = "0.6.0"
)

// cdiSpecPath is the CDI spec of one claim: the container runtime reads it
// when it creates the claim's containers.
func cdiSpecPath(cdiDir string, claimUID types.UID) string {
	return filepath.Join(cdiDir, cdiVendor+"-"+string(claimUID)+".json")
}

// writeCDISpec writes the CDI spec of a claim, one CDI device per allocated
// GPU, and returns the CDI device IDs to hand to the kubelet. The write is
// atomic: a runtime never reads half a spec.
func writeCDISpec(cdiDir string, claimUID types.UID, gpus []allocatedGPU) (map[string][]string, error) {
	spec := cdispec.Spec{Version: cdiVersion, Kind: cdiKind}
	ids := map[string][]string{}
	for _, gpu := range gpus {
		name := string(claimUID) + "-" + gpu.device
		env := []string{
			"DRA_GPU_DEVICE_" + envSuffix(gpu.request) + "=" + gpu.device,
			"DRA_GPU_SHARING_" + envSuffix(gpu.request) + "=" + gpu.config.Sharing,
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: cdispec.ContainerEdits{Env: env}})
		ids[gpu.device] = append(ids[gpu.device], cdiKind+"="+name)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	path := cdiSpecPath(cdiDir, claimUID)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	return ids, nil
}

// removeCDISpec removes the CDI spec of a claim; a missing one is fine
// (unprepare is retried, and may come after a node reboot).
func removeCDISpec(cdiDir string, claimUID types.UID) error {
	if err := os.Remove(cdiSpecPath(cdiDir, claimUID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}

// envSuffix turns a request name ("gpu", "gpus/first") into an environment
// variable suffix ("GPU", "GPUS_FIRST").
func envSuffix(request string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, request)
}
