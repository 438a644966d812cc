// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// CDIVendor and CDIClass make up the CDI kind of the devices the driver
	// hands out: "dra-failfast.test/device".
	CDIVendor = "dra-failfast.test"
	CDIClass  = "device"
	CDIKind   = CDIVendor + "/" + CDIClass
	// CDIVersion is the CDI spec version written. It is the lowest version
	// that has everything the spec uses (env edits only need 0.3.0) and
	// that every CDI release since 2023 reads, including the one in
	// containerd 2.x.
	CDIVersion = "0.6.0"
)

// cdiSpec is the subset of a CDI spec (tags.cncf.io/container-device-interface
// specs-go) that the driver writes.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string            `json:"name"`
	ContainerEdits cdiContainerEdits `json:"containerEdits"`
}

type cdiContainerEdits struct {
	Env []string `json:"env,omitempty"`
}

// CDISpecPath is where the CDI spec of a claim is written. The claim UID in
// the name (and in the CDI device names) keeps the container runtime's CDI
// cache from ever confusing two claims.
func CDISpecPath(cdiDir, driverName string, claimUID types.UID) string {
	return filepath.Join(cdiDir, driverName+"_"+string(claimUID)+".json")
}

// cdiDeviceName builds a valid CDI device name (letters, digits, '_', '-',
// '.', ':'; starting and ending with a letter or digit) from its parts.
func cdiDeviceName(parts ...string) string {
	name := strings.Join(parts, "-")
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.', r == ':':
			return r
		default:
			return '_'
		}
	}, name)
}

// envName turns a request name into the suffix of DRA_DEVICE_<REQUEST>:
// upper case, anything but letters and digits replaced by '_'.
func envName(request string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		default:
			return '_'
		}
	}, request)
}

// writeCDISpec writes spec to path atomically: a container runtime watching
// the directory never sees a partial file.
func writeCDISpec(path string, spec *cdiSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode CDI spec: %w", err)
	}
	dir := filepath.Dir(path)
	// The ".tmp" extension keeps CDI from reading the file before the rename.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	tmpName := tmp.Name()
	_, writeErr := tmp.Write(append(data, '\n'))
	if err := errors.Join(writeErr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		_ = os.Remove(tmpName)
		return fmt.Errorf("write CDI spec: %w", err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		_ = os.Remove(tmpName)
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// removeCDISpec removes the file at path; a missing file is no error.
func removeCDISpec(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}
