// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// driver is the kubelet plugin: it prepares the GPUs of allocated claims by
// writing a CDI spec for each claim.
type driver struct {
	// pool is the pool of the node's GPUs: the node's name.
	pool   string
	cdiDir string
	// broken tells which of the node's GPUs are broken. A real driver asks
	// its hardware; this one reads a file (see brokenFromFile).
	broken func() (map[string]bool, error)
	// stop ends the driver on an error kubeletplugin cannot recover from.
	stop context.CancelCauseFunc
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

// allocatedGPU is one GPU of a claim's allocation, with the config that
// applies to its request.
type allocatedGPU struct {
	request string
	device  string
	config  GPUConfig
}

// PrepareResourceClaims prepares each claim on its own: one claim's failure
// does not fail the others.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		result[claim.UID] = d.prepare(ctx, claim)
	}
	return result, nil
}

func (d *driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim))
	// Invalid config can never work (a claim's allocation is immutable):
	// ValidateClaim's error is already marked permanent, with the words the
	// webhook would have used.
	if err := admission.ValidateClaim(ctx, driverName, claim, validateConfig); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	gpus, err := d.allocatedGPUs(claim)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}

	// A broken GPU does not heal by retrying. DeviceFault marks the error
	// permanent and names the GPUs: the library taints them first, so that
	// the replacement pod gets another GPU instead of failing the same way.
	broken, err := d.broken()
	if err != nil {
		// Not knowing is no verdict on the device: the kubelet retries.
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("checking GPU health: %w", err)}
	}
	var faults []failfastplugin.DeviceID
	for _, gpu := range gpus {
		if broken[gpu.device] {
			faults = append(faults, failfastplugin.DeviceID{Pool: d.pool, Device: gpu.device})
		}
	}
	if len(faults) > 0 {
		names := make([]string, len(faults))
		for i, fault := range faults {
			names[i] = fault.Device
		}
		logger.Info("Allocated GPUs are broken, failing the claim permanently", "gpus", names)
		return kubeletplugin.PrepareResult{Err: failfastplugin.DeviceFaultClass("health-check", fmt.Errorf("GPU %s failed its health check", strings.Join(names, ", ")), faults...)}
	}

	ids, err := writeCDISpec(d.cdiDir, claim.UID, gpus)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err} // transient: the kubelet retries
	}
	var devices []kubeletplugin.Device
	for _, gpu := range gpus {
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{gpu.request},
			PoolName:     d.pool,
			DeviceName:   gpu.device,
			CDIDeviceIDs: ids[gpu.device],
		})
	}
	logger.V(2).Info("Prepared claim", "gpus", len(devices))
	return kubeletplugin.PrepareResult{Devices: devices}
}

// allocatedGPUs returns the driver's GPUs in the claim's allocation, each
// with its config: the last opaque entry of the driver that applies to its
// request wins (the allocation lists the classes' entries first, then the
// claim's).
func (d *driver) allocatedGPUs(claim *resourceapi.ResourceClaim) ([]allocatedGPU, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s is not allocated", klog.KObj(claim))
	}
	var gpus []allocatedGPU
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != driverName {
			continue
		}
		if result.Pool != d.pool {
			return nil, fmt.Errorf("GPU %s/%s is not on this node (pool %s)", result.Pool, result.Device, d.pool)
		}
		gpu := allocatedGPU{request: result.Request, device: result.Device}
		for _, entry := range claim.Status.Allocation.Devices.Config {
			if entry.Opaque == nil || entry.Opaque.Driver != driverName || !appliesTo(entry.Requests, result.Request) {
				continue
			}
			// Validated above: decoding cannot fail here.
			config, err := decodeConfig(entry.Opaque.Parameters.Raw)
			if err != nil {
				return nil, err
			}
			gpu.config = config
		}
		if gpu.config.Sharing == "" {
			gpu.config.Sharing = "Exclusive"
		}
		gpus = append(gpus, gpu)
	}
	return gpus, nil
}

// appliesTo tells whether a config entry for requests (none: all) applies to
// request, which may be a subrequest ("parent/sub").
func appliesTo(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	return slices.Contains(requests, request) || slices.Contains(requests, parent)
}

// UnprepareResourceClaims removes the claims' CDI specs.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		result[claim.UID] = removeCDISpec(d.cdiDir, claim.UID)
	}
	return result, nil
}

// HandleError is called for errors in the background, such as publishing
// ResourceSlices. Recoverable ones are retried by kubeletplugin; any other
// stops the driver, so that its pod restarts.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.stop != nil {
		d.stop(fmt.Errorf("%s: %w", msg, err))
	}
}

// deviceFaults is what clearRepaired needs of failfastplugin.Helper.
type deviceFaults interface {
	TaintedDevices() []failfastplugin.DeviceID
	ClearDeviceFault(ctx context.Context, devices ...failfastplugin.DeviceID) error
}

// watchRepairs runs clearRepaired at once and then every interval until ctx
// ends (interval 0: only at once): a GPU repaired while the driver was down
// is untainted at start, one repaired while it runs at the next check,
// without a restart. A failed check or clear is logged, and tried again at
// the next check. A real driver would rather act on its health monitor's
// events; the health check here is a file, so it is polled.
func (d *driver) watchRepairs(ctx context.Context, faults deviceFaults, interval time.Duration) {
	check := func(ctx context.Context) {
		if err := d.clearRepaired(ctx, faults); err != nil {
			klog.FromContext(ctx).Error(err, "Clearing the faults of repaired GPUs failed; they stay tainted until the next check", "interval", interval)
		}
	}
	if interval <= 0 {
		check(ctx)
		return
	}
	wait.UntilWithContext(ctx, check, interval)
}

// clearRepaired clears the faults of the node's GPUs that the health check
// finds healthy now: their DeviceTaintRules outlive the driver process and
// the fault, so a repaired GPU would stay tainted otherwise.
func (d *driver) clearRepaired(ctx context.Context, faults deviceFaults) error {
	broken, err := d.broken()
	if err != nil {
		// No verdict: the taints stay.
		return fmt.Errorf("health check: %w", err)
	}
	var repaired []failfastplugin.DeviceID
	for _, device := range faults.TaintedDevices() {
		if device.Pool == d.pool && !broken[device.Device] {
			repaired = append(repaired, device)
		}
	}
	if len(repaired) == 0 {
		return nil
	}
	klog.FromContext(ctx).Info("GPUs healthy again, clearing their faults", "gpus", len(repaired))
	return faults.ClearDeviceFault(ctx, repaired...)
}

// brokenFromFile returns a health check that reads the names of broken GPUs
// from path, one per line ('#' starts a comment), at every call. No path, or
// no file, means that every GPU is healthy.
func brokenFromFile(path string) func() (map[string]bool, error) {
	return func() (map[string]bool, error) {
		broken := map[string]bool{}
		if path == "" {
			return broken, nil
		}
		file, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return broken, nil
		}
		if err != nil {
			return nil, err
		}
		defer func() { _ = file.Close() }()
		scanner := bufio.NewScanner(file)
		for scanner.Scan() {
			line, _, _ := strings.Cut(scanner.Text(), "#")
			if name := strings.TrimSpace(line); name != "" {
				broken[name] = true
			}
		}
		if err := scanner.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		return broken, nil
	}
}
