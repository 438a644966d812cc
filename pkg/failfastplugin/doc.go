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
// Before the answer leaves the driver, the library creates one cluster-scoped
// DeviceTaintRule per faulty device, in the first of DeviceTaintRuleVersions
// that the API server serves (found by discovery: v1 from Kubernetes 1.37 on,
// v1beta2 or v1alpha3 on 1.36 and 1.35 with their feature gate and
// runtime-config; the library needs k8s.io/* v0.36 or later, not v0.37): a
// NoSchedule taint
// (DefaultDeviceFaultTaintKey, the value the fault's class from
// DeviceFaultClass or "device-fault", never the error's text, TimeAdded when) on exactly
// that driver, pool and device, named by DeviceTaintRuleName (the writer's
// node ends the name). It waits only until the API server stored the rules
// (at most DefaultDeviceFaultWaitTimeout) and then returns the permanent
// error (a rule that could not be written by then is retried in the
// background until it exists or ClearDeviceFault clears the fault:
// PendingTaints); the wait happens in GRPCInterceptor, after kubeletplugin has left
// the section in which it serializes the node's prepare and unprepare calls,
// so that other pods' calls do not wait for it. A rule that exists already counts as tainted if it selects that
// driver, pool and device, and is left as it is. A
// claim whose devices could not be tainted (creating a rule failed or took too
// long) still fails permanently: the error the kubelet sees ends with why the
// devices were not tainted, the driver's log says it too, and the counter
// DeviceTaintFailuresMetric counts it.
//
// The rules are API objects of their own, not part of the driver's
// ResourceSlices: they outlive the driver process (a restart, a DaemonSet
// roll, a node reboot, after which the kubelet deletes the node's
// ResourceSlices), they apply before the driver publishes, and to pools and
// slices of any kind and size. A rule's name is derived from driver, pool and
// device, so that a restarted driver finds it; it carries the label
// DeviceTaintRuleDriverLabel and the annotation DeviceTaintRuleNodeAnnotation,
// and the driver's Node owns it (deleting the Node object deletes it). It
// stays until the driver calls ClearDeviceFault or an operator deletes it; a
// restart clears nothing, so a driver that learns that a device was repaired
// (for example by its health check at start) clears it explicitly. Every
// fault writes the rule again: one deleted while the device is still broken
// comes back at the next fault. Helper.TaintedDevices lists the devices with a
// rule as the driver process knows them.
//
// The returned *Helper embeds the *kubeletplugin.Helper: publish the driver's
// ResourceSlices with its PublishResources as before. ClearDeviceFault and
// TaintedDevices are its own.
//
// StartWithDeviceFaults takes the driver name, node name and client in
// DeviceFaultConfig, not from the kubeletplugin options: those are opaque
// functions, and kubeletplugin.Helper does not reveal them either. The
// library needs them to write the rules, and passes them on to kubeletplugin,
// so a driver does not repeat them as options. Once kubeletplugin started, it
// reads the rules an earlier instance on the node left (its node's only, by
// DeviceTaintRuleNodeLabel, in pages), in the background (DeviceFaults.LoadInBackground), so that the driver
// registers whatever the API server does; Helper.Loaded is closed when that is
// done, and Helper.LoadErr says why it gave up (at once when the API server
// serves DeviceTaintRules in none of DeviceTaintRuleVersions,
// ErrDeviceTaintRulesNotServed, whose text names the gate and runtime-config
// each Kubernetes version needs). The driver's service account
// needs, besides what kubeletplugin needs, to list (at start), create (a
// fault), get (a rule of that name exists already) and delete
// (ClearDeviceFault) devicetaintrules. Start takes the same options as before
// and returns the same Helper, but taints nothing: a DeviceFault then says
// that its devices were not tainted. A driver that assembles the kubeletplugin
// options itself uses NewDeviceFaults, the DeviceFaults' Wrap and
// GRPCInterceptor, and LoadInBackground once kubeletplugin started.
//
// The metrics (DeviceTaintFailuresMetric, DeviceTaintWaitMetric) are in
// k8s.io/component-base/metrics/legacyregistry: serve them with
//
//	http.Handle("/metrics", legacyregistry.Handler())
//
// or, for a driver that serves a registry of its own, add them there with
// RegisterMetricsWith.
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
