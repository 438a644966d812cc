// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	v1 "k8s.io/api/core/v1"
)

// neverStartedMessage is the message of a never-started container's waiting
// state in a pod failed for a permanent DRA driver failure.
const neverStartedMessage = "The container never started: a DRA driver failed permanently to prepare the pod's resources"

// MarkNeverStartedContainers gives the containers of a pod failed for a
// permanent DRA driver failure that never started (containerMayHaveRun) a
// waiting state with reason PodFailedReason instead of ContainerCreating.
// Such a container has no exit code and no start time to report; exit code
// 137, which a terminal pod's waiting containers get otherwise, could match a
// Job's podFailurePolicy onExitCodes rule and swallow the failure.
func MarkNeverStartedContainers(status *v1.PodStatus) {
	for _, statuses := range [][]v1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
		for i := range statuses {
			if c := &statuses[i]; !containerMayHaveRun(c) {
				c.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: PodFailedReason, Message: neverStartedMessage}}
			}
		}
	}
}
