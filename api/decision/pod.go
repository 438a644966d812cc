// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

// PodFailedReason is the pod status Reason, the Event reason and the
// condition reason of a pod failed by a permanent DRA driver failure.
// kubectl get pod shows it as the pod's STATUS. The condition's type has the
// same value.
const PodFailedReason = "DRAPermanentDriverFailure"
