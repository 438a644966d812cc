// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dra is the dra-failfast logic that the patched kubelet's DRA
// manager, kuberuntime and kubelet call (KEP-5322, feature gate
// DRAHandlePermanentDriverFailures). The upstream patch series only adds the
// calls; every decision is made here:
//
//   - Manager is the feature's state in one kubelet, a field of the DRA
//     manager: the node's driver failure policy, retry budgets, the record
//     of prepared pods;
//   - PrepareFailures classifies each driver's NodePrepareResources response
//     (Classify) and turns all failures of a pod into one error, a
//     *PermanentPodError when any claim failed permanently;
//   - DowngradeIfMayHaveRun and the record of prepared pods (preparedPods) keep
//     pods that may have run out of it;
//   - PodRejection gives kubelet.SyncPod the Reason and Message to fail the
//     pod with, and UpdatePodStatus the condition that Jobs can match.
//
// With the feature gate off, every function here leaves the kubelet's stock
// behaviour unchanged.
package dra
