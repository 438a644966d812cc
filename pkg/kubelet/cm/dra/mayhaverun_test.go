// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodMayHaveRun pins the one definition of "started" that the decision
// (DowngradeIfMayHaveRun) and the failed pod's status (UpdatePodStatus)
// share: only a status that shows the container never ran is "never".
func TestPodMayHaveRun(t *testing.T) {
	started := metav1.NewTime(time.Unix(1700000000, 0))
	cases := map[string]struct {
		container v1.ContainerStatus
		want      bool
	}{
		"no state":         {container: v1.ContainerStatus{}},
		"waiting":          {container: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}},
		"running":          {container: v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, want: true},
		"has container ID": {container: v1.ContainerStatus{ContainerID: "containerd://abc"}, want: true},
		"restarted":        {container: v1.ContainerStatus{RestartCount: 1}, want: true},
		"terminated before": {
			container: v1.ContainerStatus{LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}},
			want:      true,
		},
		"terminated with a start time": {
			container: v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{StartedAt: started}}},
			want:      true,
		},
		"terminated with a container ID": {
			container: v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://abc"}}},
			want:      true,
		},
		"terminated by the kubelet, never started": {
			container: v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "ContainerStatusUnknown", ExitCode: 137}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := containerMayHaveRun(&tc.container); got != tc.want {
				t.Errorf("containerMayHaveRun = %v, want %v", got, tc.want)
			}
			never := v1.ContainerStatus{}
			for what, status := range map[string]v1.PodStatus{
				"init container":      {InitContainerStatuses: []v1.ContainerStatus{never, tc.container}},
				"container":           {ContainerStatuses: []v1.ContainerStatus{tc.container, never}},
				"ephemeral container": {ContainerStatuses: []v1.ContainerStatus{never}, EphemeralContainerStatuses: []v1.ContainerStatus{tc.container}},
			} {
				if got := podMayHaveRun(&status); got != tc.want {
					t.Errorf("podMayHaveRun with it as %s = %v, want %v", what, got, tc.want)
				}
			}
		})
	}
	if podMayHaveRun(&v1.PodStatus{}) {
		t.Error("podMayHaveRun of an empty status = true, want false")
	}
}
