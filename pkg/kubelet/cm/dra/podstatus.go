package dra

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

const (
	// PodFailedReason is the pod status Reason, the Event reason and the
	// condition reason of a pod failed by a permanent DRA driver failure.
	// kubectl get pod shows it as the pod's STATUS.
	PodFailedReason = "DRAPermanentDriverFailure"
	// PodConditionType is the pod condition (status True) that the kubelet
	// adds to such a pod, for Job podFailurePolicy rules (onPodConditions)
	// and other controllers to match.
	PodConditionType v1.PodConditionType = "DRAPermanentDriverFailure"
)

// PodRejection tells kubelet.SyncPod whether the pod sync error err means the
// pod must be rejected: it returns the Reason and Message to fail the pod
// with, and counts the failure per driver.
func PodRejection(ctx context.Context, err error) (reason, message string, reject bool) {
	var permanent *PermanentPodError
	if !errors.As(err, &permanent) {
		return "", "", false
	}
	klog.FromContext(ctx).Info("Failing pod: a DRA driver reported a permanent failure", "err", permanent)
	for _, p := range permanent.Permanent {
		permanentFailures.WithLabelValues(p.Driver).Inc()
	}
	return PodFailedReason, permanent.podMessage(), true
}

// podMessage renders every permanent failure, within maxPodMessageLen bytes.
func (e *PermanentPodError) podMessage() string {
	const prefix = "DRA driver failed permanently, will not retry: "
	var b strings.Builder
	b.WriteString(prefix)
	for i, p := range e.Permanent {
		part := p.Error()
		if i > 0 {
			part = "; " + part
		}
		more := fmt.Sprintf("; and %d more", len(e.Permanent)-i)
		if i < len(e.Permanent)-1 && b.Len()+len(part)+len(more) > maxPodMessageLen {
			b.WriteString(more)
			break
		}
		b.WriteString(part)
	}
	return truncate(b.String(), maxPodMessageLen)
}

// DowngradeIfStarted keeps a pod that already ran containers alive: a kubelet
// restart or a lost sandbox re-prepares every claim, and a permanent answer
// then must not kill a workload that was running. For such a pod a permanent
// err is returned as a transient error with the same text; any other err is
// returned unchanged. runtimeHasContainers tells whether the container
// runtime knows containers of the pod; the pod's API status is checked too.
func DowngradeIfStarted(ctx context.Context, pod *v1.Pod, runtimeHasContainers bool, err error) error {
	var permanent *PermanentPodError
	if !errors.As(err, &permanent) || !(runtimeHasContainers || podStartedContainers(pod)) {
		return err
	}
	klog.FromContext(ctx).Info("Not failing pod for a permanent DRA driver failure: the pod already ran containers; retrying", "pod", klog.KObj(pod), "err", err)
	for _, p := range permanent.Permanent {
		permanentDowngrades.WithLabelValues(p.Driver, DowngradePodStarted).Inc()
	}
	return errors.New(err.Error())
}

func podStartedContainers(pod *v1.Pod) bool {
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, status := range statuses {
			if status.State.Running != nil || status.State.Terminated != nil ||
				status.LastTerminationState.Terminated != nil || status.RestartCount > 0 || status.ContainerID != "" {
				return true
			}
		}
	}
	return false
}

// IsPodConditionType reports whether the kubelet owns the pod condition
// type: PodConditionType while the feature is on.
func IsPodConditionType(conditionType v1.PodConditionType) bool {
	return conditionType == PodConditionType && Enabled()
}

// UpdatePodStatus completes the status that the kubelet generates for a pod
// whose previous status old is the Failed status that kubelet.SyncPod set
// for PodRejection's reason: it adds the kubelet-owned PodConditionType
// condition (kept from old when it is there), and marks containers that
// never started as terminated for that reason, so that `kubectl get pod`
// shows the cause instead of ContainerStatusUnknown. The exit code is 137,
// as for upstream's ContainerStatusUnknown; FinishedAt is when the pod
// failed (the condition's transition time, so that regenerating the status
// does not change it). Other pods are left alone.
func UpdatePodStatus(status, old *v1.PodStatus) {
	if !Enabled() {
		return
	}
	condition := podCondition(old)
	if condition == nil {
		return
	}
	status.Conditions = append(status.Conditions, *condition)
	if status.Phase != v1.PodFailed {
		return
	}
	for _, statuses := range [][]v1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
		for i := range statuses {
			if c := &statuses[i]; neverStarted(c) {
				c.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					ExitCode:   137,
					Reason:     PodFailedReason,
					Message:    "The container never started: a DRA driver failed permanently to prepare the pod's resources",
					FinishedAt: condition.LastTransitionTime,
				}}
			}
		}
	}
}

func podCondition(old *v1.PodStatus) *v1.PodCondition {
	for _, c := range old.Conditions {
		if c.Type == PodConditionType {
			return &c
		}
	}
	if old.Phase != v1.PodFailed || old.Reason != PodFailedReason {
		return nil
	}
	return &v1.PodCondition{
		Type:               PodConditionType,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             PodFailedReason,
		Message:            old.Message,
	}
}

func neverStarted(c *v1.ContainerStatus) bool {
	if c.ContainerID != "" || c.RestartCount > 0 || c.State.Running != nil || c.LastTerminationState.Terminated != nil {
		return false
	}
	t := c.State.Terminated
	return t == nil || (t.ContainerID == "" && t.StartedAt.IsZero())
}
