// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

// What the kubelet does with a pod whose claims failed permanently; not yet
// rendered into the upstream-shaped series (upstream/generated.txt), whose
// kubelet part does not fail pods yet.

// PodFailedReason is the pod status Reason, the Event reason and the
// condition reason of a pod failed by a permanent DRA driver failure.
// kubectl get pod shows it as the pod's STATUS.
const PodFailedReason = "DRAPermanentDriverFailure"

// DowngradePodStarted: a permanent failure is not acted on because the pod
// may have run: the container runtime knows a sandbox or a container of it,
// or its status shows a started container.
const DowngradePodStarted = "pod_started_containers"
