// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"

	v1 "k8s.io/api/core/v1"
)

// DowngradePodStarted: a permanent failure is not acted on because the pod
// may have run (DowngradeIfMayHaveRun).
const DowngradePodStarted = "pod_started_containers"

// DowngradeIfMayHaveRun keeps a pod that may have run alive. The DRA manager
// prepares a pod's claims when the kubelet creates the pod's sandbox, unless
// it marked them prepared since the kubelet started (the mark is not
// checkpointed): a driver is asked again for a pod that ran when its sandbox
// is created again after a kubelet restart (a crash, a node reboot), and a
// permanent answer then must not kill a workload that was running. For such a pod a permanent err
// is returned as a *DowngradedError, which is transient and says why; any
// other err is returned unchanged. runtimeKnowsPod tells whether the
// container runtime knows a sandbox or a container of the pod (an earlier
// sandbox counts too); the pod's status is checked as well (podMayHaveRun).
// The downgrade is counted per driver.
func DowngradeIfMayHaveRun(pod *v1.Pod, runtimeKnowsPod bool, err error) error {
	var permanent *PermanentPodError
	if !errors.As(err, &permanent) || !(runtimeKnowsPod || podMayHaveRun(&pod.Status)) {
		return err
	}
	countDowngrades(permanent, DowngradePodStarted)
	return &DowngradedError{permanent: permanent, why: "the pod had a sandbox or started containers"}
}

func countDowngrades(permanent *PermanentPodError, reason string) {
	for _, p := range permanent.Permanent {
		permanentDowngrades.WithLabelValues(p.Driver, reason).Inc()
	}
}

// podMayHaveRun tells whether a container of the pod whose status this is
// may have run: the one definition of "started" that the kubelet uses
// before it fails a pod for a permanent failure.
func podMayHaveRun(status *v1.PodStatus) bool {
	for _, statuses := range [][]v1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range statuses {
			if containerMayHaveRun(&statuses[i]) {
				return true
			}
		}
	}
	return false
}

// containerMayHaveRun is true unless the status shows that the container
// never ran. A terminated state without a container ID and a start time is
// one the kubelet made up for a container that never started (a terminal
// pod's waiting containers become ContainerStatusUnknown, exit code 137).
func containerMayHaveRun(c *v1.ContainerStatus) bool {
	if c.ContainerID != "" || c.RestartCount > 0 || c.State.Running != nil || c.LastTerminationState.Terminated != nil {
		return true
	}
	t := c.State.Terminated
	return t != nil && (t.ContainerID != "" || !t.StartedAt.IsZero())
}
