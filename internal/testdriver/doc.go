// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testdriver is the test DRA driver of the demo, the e2e tests and the
// benchmarks: a kubelet plugin built on k8s.io/dynamic-resource-allocation's
// kubeletplugin helper and on pkg/failfastplugin, whose failures are chosen by
// the test.
//
// The driver publishes the devices dev-0 ... dev-<N-1> of its node in one
// pool named after the node, in ResourceSlices of at most DevicesPerSlice
// devices, and prepares claims by writing one CDI spec file per claim that
// gives the containers the environment variables
// DRA_DEVICE_<REQUEST>=<device name(s)> and DRA_CLAIM=<namespace>/<name>.
//
// Failures are injected in three ways:
//
//   - Per claim, through an opaque device configuration for the driver (in the
//     claim or in its DeviceClass), a PrepareBehavior object:
//
//     {"apiVersion": "dra-failfast.test/v1", "kind": "PrepareBehavior",
//     "prepare": "Succeed" | "Permanent" | "Transient",
//     "failures": N, "message": "...", "messageRepeat": N,
//     "unprepareFailures": N, "wire": {...}}
//
//     Permanent fails every prepare call of the claim with an error marked by
//     failfastplugin.Permanent. Transient fails the first N prepare calls of
//     the claim with a plain (retriable) error and then succeeds; N = 0 fails
//     forever. unprepareFailures fails the first N unprepare calls. wire
//     (WireSpec) makes the gRPC answer of the failing prepare calls hostile
//     or malformed: another or no error_type, raw protobuf bytes, a result
//     too many or too few, a gRPC status error. A configuration that cannot
//     be parsed fails the claim permanently, with an error that names the
//     claim, the configuration, the requests it applies to and the problem.
//     ValidateConfig is that check, run at prepare time through
//     pkg/failfastplugin/admission's ValidateClaim and by the driver's
//     validating admission webhook (StartWebhook, WebhookOptions), which
//     denies such configs in ResourceClaims, ResourceClaimTemplates and
//     DeviceClasses with the same message.
//
//   - Per namespace, at runtime, through the HTTP control endpoint (PUT
//     /behavior, see Handler and Client.SetBehavior): the same fields
//     (BehaviorSpec) override the opaque configs of every claim in the
//     namespace, also for claims that exist already or were prepared by an
//     earlier driver process.
//
//   - Per device: preparing a claim that got a device of the broken set fails
//     permanently ("device dev-1 is broken"). With taint mode on, the error
//     is a failfastplugin.DeviceFault for those devices, so that the library
//     first writes a DeviceTaintRule with its NoSchedule taint
//     (failfastplugin.DefaultDeviceFaultTaintKey) for each of them: the
//     scheduler gives replacement pods another device. The rule outlives
//     the driver process. The broken set can be changed at runtime through
//     the HTTP control endpoint; repairing a device clears its fault and
//     deletes its rule.
//
// Start starts the whole driver (kubelet plugin, ResourceSlices, HTTP
// endpoint, admission webhook); cmd/dra-test-driver is the command around it.
package testdriver
