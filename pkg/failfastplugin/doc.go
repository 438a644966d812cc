// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package failfastplugin lets a DRA driver built on
// k8s.io/dynamic-resource-allocation/kubeletplugin report that preparing a
// ResourceClaim failed permanently (KEP-5322). A kubelet with the
// DRAHandlePermanentDriverFailures feature then fails the Pod instead of
// retrying forever; older kubelets ignore the mark and retry as before.
//
// Mark the error with Permanent, and start the driver with Start instead of
// kubeletplugin.Start (or wrap the plugin with Wrap and add GRPCInterceptor
// to the options yourself):
//
//	func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
//		result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
//		for _, claim := range claims {
//			config, err := parseConfig(claim)
//			if err != nil {
//				// The claim is immutable: retrying can never help.
//				result[claim.UID] = kubeletplugin.PrepareResult{Err: failfastplugin.Permanent(fmt.Errorf("invalid opaque config: %w", err))}
//				continue
//			}
//			result[claim.UID] = d.prepare(ctx, claim, config) // transient errors stay unmarked
//		}
//		return result, nil
//	}
//
//	helper, err := failfastplugin.Start(ctx, &driver{}, // was: kubeletplugin.Start
//		kubeletplugin.DriverName("gpu.example.com"),
//		kubeletplugin.NodeName(nodeName),
//		kubeletplugin.KubeClient(client),
//	)
//
// Start has kubeletplugin.Start's signature and returns its
// *kubeletplugin.Helper: the call is the one line that changes.
//
// # Broken devices
//
// When preparing fails because a device is broken, a permanent error alone
// makes things worse: a controller replaces the failed pod at once, the
// scheduler hands the replacement the same device, and it fails too, over and
// over. Report such a failure with DeviceFault, naming the devices, and start
// the driver with StartWithDeviceFaults:
//
//	result[claim.UID] = kubeletplugin.PrepareResult{Err: failfastplugin.DeviceFault(err, failfastplugin.DeviceID{Pool: pool, Device: device})}
//
//	helper, err := failfastplugin.StartWithDeviceFaults(ctx, &driver{},
//		failfastplugin.DeviceFaultConfig{DriverName: "gpu.example.com", NodeName: nodeName, KubeClient: client})
//
// Before the answer leaves the driver, the library republishes the driver's
// ResourceSlices with a NoSchedule device taint on exactly those devices
// (DefaultDeviceFaultTaintKey, the value says why, TimeAdded when), waits
// until the taint is visible in the API (at most
// DefaultDeviceFaultWaitTimeout) and only then returns the permanent error. A
// claim whose devices could not be tainted (unknown device, publishing failed,
// the taint did not show up in time) still fails permanently: the error the
// kubelet sees ends with why the devices were not tainted, the driver's log
// says it too, and the counter DeviceTaintFailuresMetric counts it.
//
// Publish the driver's ResourceSlices with the returned *Helper's
// PublishResources (not kubeletplugin's: StartWithDeviceFaults does not hand
// that one out): it remembers them and adds the taints, so that a later
// republish keeps them. The taints stay until the driver calls
// ClearDeviceFault, for example once the device was repaired.
//
// StartWithDeviceFaults takes the driver name, node name and client in
// DeviceFaultConfig, not from the kubeletplugin options: those are opaque
// functions, and kubeletplugin.Helper does not reveal them either. The
// library needs them to list the driver's ResourceSlices while it waits for
// the taint, and passes them on to kubeletplugin, so a driver does not repeat
// them as options. Start takes the same options as before and returns the
// same Helper, but taints nothing: a DeviceFault then says that its devices
// were not tainted. A driver that assembles the kubeletplugin options itself
// uses NewDeviceFaults, the DeviceFaults' Wrap, GRPCInterceptor and
// SetPublisher.
//
// The metrics (DeviceTaintFailuresMetric, DeviceTaintWaitMetric) are in
// k8s.io/component-base/metrics/legacyregistry: serve them with
//
//	http.Handle("/metrics", legacyregistry.Handler())
//
// # Invalid configuration
//
// For invalid opaque config, package
// github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission runs one
// validation function both in a validating admission webhook, which denies
// the ResourceClaim, ResourceClaimTemplate or DeviceClass before any pod
// exists, and at prepare time, where it fails the claim with Permanent.
//
// # Wrapping errors
//
// The mark survives wrapping with %w (fmt.Errorf("...: %w", err),
// errors.Join) but not formatting with %v or %s: fmt.Errorf("%v", err) turns
// a permanent error into a plain one, which the kubelet retries.
//
// Only the v1 DRA gRPC service carries the mark. A kubelet that talks to the
// driver over v1beta1 always sees a transient error.
package failfastplugin
