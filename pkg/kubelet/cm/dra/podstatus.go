// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/api/decision"
)

const (
	// PodFailedReason: see decision.PodFailedReason.
	PodFailedReason = decision.PodFailedReason
	// PodConditionType is the pod condition (status True) that the kubelet
	// adds to such a pod, for Job podFailurePolicy rules (onPodConditions)
	// and other controllers to match.
	PodConditionType v1.PodConditionType = "DRAPermanentDriverFailure"
)

// PodRejection tells kubelet.SyncPod whether the pod sync error err means the
// pod must be rejected: it returns the Reason and Message to fail the pod
// with, and counts the failure per driver. With the feature gate off it
// never rejects (PrepareFailures.Record makes no permanent error then
// either; this is the kubelet's own guard).
func PodRejection(ctx context.Context, err error) (reason, message string, reject bool) {
	var permanent *PermanentPodError
	if !Enabled() || !errors.As(err, &permanent) {
		return "", "", false
	}
	klog.FromContext(ctx).Info("Failing pod: permanent DRA failure", "err", permanent)
	for _, p := range permanent.Permanent {
		permanentFailures.WithLabelValues(p.Driver).Inc()
	}
	return PodFailedReason, permanent.PodMessage(), true
}

// rejectedPrefix is what kubelet.rejectPod puts before the message; the
// status manager has it until UpdatePodStatus removes it.
const rejectedPrefix = "Pod was rejected: "

// downgrade is DowngradeIfMayHaveRun's counterpart in the DRA manager, logged
// at the default verbosity once per pod (a pod is retried at every resync).
func (m *Manager) downgrade(logger klog.Logger, pod *v1.Pod, permanent *PermanentPodError, reason, why string) error {
	downgraded := &DowngradedError{permanent: permanent, why: why}
	if !m.logged.firstTime(string(pod.UID) + "/" + reason) {
		logger = logger.V(4)
	}
	logger.Info("Not failing pod for a permanent DRA driver failure; retrying", "pod", klog.KObj(pod), "reason", reason, "err", downgraded)
	countDowngrades(permanent, reason)
	return downgraded
}

// IsPodConditionType reports whether the kubelet owns the pod condition
// type: PodConditionType while the feature is on.
func IsPodConditionType(conditionType v1.PodConditionType) bool {
	return conditionType == PodConditionType && Enabled()
}

// UpdatePodStatus completes the status that the kubelet generates for a pod
// whose previous status old is the Failed status that kubelet.SyncPod set
// for PodRejection's reason (phase Failed and that reason, nothing less: a
// PodConditionType condition that another client with pods/status access
// wrote, in whatever status, is not the kubelet's rejection, and after a
// kubelet restart old is the API's status), and whose containers never
// started: it keeps the pod Failed with that reason and message, adds the
// kubelet-owned PodConditionType condition (kept from old when it is there:
// the one place that creates it, so its time is stamped once), and gives
// containers that never started a waiting state that names the cause
// instead of ContainerCreating. Other pods are left alone.
//
// Never-started containers stay waiting (upstream's TerminatePod would make
// them ContainerStatusUnknown, exit code 137; patch 0004 keeps our mark, see
// IsNeverStartedMark): they have no exit code and no start time to
// report. A Job's podFailurePolicy onExitCodes
// rules skip containers that are not terminated, so no exit-code rule can
// misread a DRA failure; the PodConditionType condition is what a rule
// matches. The phase is pinned to Failed here, whatever the containers say.
//
// MergePodStatus takes both out again until the pod is terminal.
func UpdatePodStatus(status, old *v1.PodStatus) {
	if !Enabled() || old.Phase != v1.PodFailed || old.Reason != PodFailedReason || podMayHaveRun(status) {
		return
	}
	status.Conditions = append(status.Conditions, *podCondition(old))
	status.Phase = v1.PodFailed
	status.Reason, status.Message = old.Reason, podMessage(old)
	MarkNeverStartedContainers(status)
}

// MergePodStatus is called by the kubelet's status manager on every status
// it is about to publish, after upstream's merge (status: what will be sent,
// apiStatus: what the API has). It keeps one invariant: phase Failed for a
// permanent DRA driver failure and the PodConditionType condition reach the
// API together, never one without the other.
//
//   - While upstream holds back the terminal phase (the pod could still have
//     running containers or prepared claims), the whole status is held
//     back: the API's stays as it is (the condition, the never-started
//     containers' waiting states, and Ready and ContainersReady, which say
//     "PodFailed" for the Failed phase, would show the failure early; the
//     rest changes nothing for a pod that never started a container), and
//     the sync costs no PATCH. (SkipsSync spares the GET before it, for
//     the statuses whose pod the pod manager knows.)
//   - A status that is Failed for that reason but lacks the condition is
//     held back whole: the API's status is published unchanged. That is
//     the minimal status kubelet.rejectPod caches: the status manager
//     publishes statuses from a batch it captured earlier, so it can publish
//     that one after the pod finished terminating, just before the full
//     status that has the condition. Only UpdatePodStatus creates the
//     condition, so its time is stamped once and never moves (an API status
//     that has it already keeps it).
//   - The full Failed status keeps the API's lastTransitionTime for every
//     other condition whose status did not change (keepTransitionTimes).
//
// It allocates nothing for pods it has nothing to do with.
//
// With the feature gate off it does nothing at all: the kubelet is then the
// stock kubelet, which leaves conditions it does not own to their writers.
func MergePodStatus(status, apiStatus *v1.PodStatus) {
	if !Enabled() {
		return
	}
	_, hasCondition := conditionIndex(status)
	if status.Phase != v1.PodFailed {
		if hasCondition || hasNeverStartedMark(status) {
			// The terminal phase is held back: so is everything else. The
			// pod never started a container; the API's status stays right
			// until the terminal one, and the sync sends no PATCH.
			*status = *apiStatus.DeepCopy()
		}
		return
	}
	if status.Reason != PodFailedReason {
		return
	}
	if hasCondition {
		keepTransitionTimes(status, apiStatus)
		return
	}
	// kubelet.rejectPod's minimal status: nothing but phase, reason and
	// message, every other field empty. Published, it would clear the pod's
	// conditions, container statuses and IPs in the API. The API's status
	// stays as it is, whether it shows the full Failed status already or
	// not yet.
	*status = *apiStatus.DeepCopy()
}

// keepTransitionTimes gives each condition of a rejected pod's full Failed
// status that the API shows with the same status the API's
// lastTransitionTime: kubelet.rejectPod's minimal status replaced the status
// manager's cache, so the kubelet regenerated the conditions it owns
// (PodScheduled, Initialized, PodReadyToStartContainers...) with the time of
// the failure, as if they had just changed.
func keepTransitionTimes(status, apiStatus *v1.PodStatus) {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type == PodConditionType {
			continue
		}
		for _, api := range apiStatus.Conditions {
			if api.Type == c.Type && api.Status == c.Status {
				c.LastTransitionTime = api.LastTransitionTime
			}
		}
	}
}

// PublishNow tells the status manager's SetPodStatus to sync status even
// when it equals the cached one: it is a rejected pod's full Failed status
// (phase, reason and the PodConditionType condition) that the API does not
// show yet (pod.Status is the kubelet's last view of the API), the pod can
// no longer have running containers (safety: the status manager's deletion
// safety provider, the kubelet), so the status may be published now, and
// the last sync of it was skipped (SkipsSync), so no sync is pending. The
// pod worker sets the same status again once it has finished terminating
// the pod (SyncTerminatedPod), which upstream ignores as unchanged, so the
// status would wait for the next sync trigger: TerminatePod, after the
// volume manager's unmount wait (polled every 300 ms), or the 10 s resync.
// Forcing that update publishes it as soon as it may be published. When the
// status manager published the status already (its sync ran after the pod
// terminated) or has not yet run the sync of it, nothing is forced: a
// forced sync is a GET of the pod. With the feature gate off it is false.
func PublishNow(pod *v1.Pod, status *v1.PodStatus, safety interface{ PodCouldHaveRunningContainers(*v1.Pod) bool }) bool {
	if !Enabled() || status.Phase != v1.PodFailed || status.Reason != PodFailedReason || pod.Status.Phase == v1.PodFailed {
		return false
	}
	if _, ok := conditionIndex(status); !ok || safety.PodCouldHaveRunningContainers(pod) {
		return false
	}
	return skippedSyncs.take(pod.UID)
}

// SkipsSync tells the status manager's syncPod, before it GETs the pod,
// that a sync of status (the status manager's cached status for pod uid)
// would publish nothing, because MergePodStatus holds it back whole: it is
// kubelet.rejectPod's minimal status, or the full Failed status of a
// rejected pod that could still have running containers or prepared claims
// (pods: the kubelet's pod manager, whose copy of the pod is the kubelet's
// last view of the API; safety: the status manager's deletion safety
// provider). Each such sync would cost a GET of the pod and no PATCH: two
// per failed pod (the statuses of rejectPod and of SyncTerminatingPod).
// The sync is not marked done, so the status manager's resync (every 10 s)
// asks again, and a skipped full status is noted for PublishNow. When it is
// false, MergePodStatus still decides on the API's own status. With the
// feature gate off it is false.
func SkipsSync(pods interface {
	GetPodByUID(types.UID) (*v1.Pod, bool)
}, safety interface{ PodCouldHaveRunningContainers(*v1.Pod) bool }, uid types.UID, status *v1.PodStatus) bool {
	if !Enabled() || status.Phase != v1.PodFailed || status.Reason != PodFailedReason {
		return false
	}
	if _, ok := conditionIndex(status); !ok {
		return true
	}
	// Noted before the pod worker's state is read: a PublishNow that comes
	// after the pod terminated then sees the note of a sync that read the
	// state before (and skipped).
	skippedSyncs.note(uid)
	pod, ok := pods.GetPodByUID(uid)
	if ok && pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded && safety.PodCouldHaveRunningContainers(pod) {
		return true
	}
	skippedSyncs.take(uid)
	return false
}

// skippedSyncs holds the pods whose full Failed status the status manager
// skipped last (SkipsSync) and has not published since. Process-wide: the
// two status manager hooks that share it have no handle on the DRA manager;
// entries are pod UIDs, so kubelets in one process (kubemark) never share
// one. An entry leaves when the status is published or PublishNow forces
// it; a pod that never finishes terminating keeps its entry (a UID).
var skippedSyncs podSet

type podSet struct {
	mu   sync.Mutex
	pods sets.Set[types.UID]
}

func (s *podSet) note(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods == nil {
		s.pods = sets.New[types.UID]()
	}
	s.pods.Insert(uid)
}

// take removes uid and tells whether it was there.
func (s *podSet) take(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := s.pods.Has(uid)
	s.pods.Delete(uid)
	return had
}

func conditionIndex(status *v1.PodStatus) (int, bool) {
	i := slices.IndexFunc(status.Conditions, func(c v1.PodCondition) bool { return c.Type == PodConditionType })
	return i, i >= 0
}

// IsNeverStartedMark tells whether c is a never-started container that
// UpdatePodStatus marked, with the feature gate on. The status manager's
// TerminatePod keeps such a container as it is: without this, it turns every
// container of a terminal pod that is not terminated into
// ContainerStatusUnknown, exit code 137, no timestamps (kubectl describe
// prints year 1), and a podFailurePolicy rule such as "onExitCodes In [137]
// -> Ignore" would then swallow the failure. With the gate off it is false:
// TerminatePod is stock, also for a mark that a kubelet with the gate on left
// in the pod's status before a restart.
func IsNeverStartedMark(c *v1.ContainerStatus) bool {
	return Enabled() && neverStartedMark(c)
}

func neverStartedMark(c *v1.ContainerStatus) bool {
	w := c.State.Waiting
	return w != nil && w.Reason == PodFailedReason && w.Message == neverStartedMessage
}

func hasNeverStartedMark(status *v1.PodStatus) bool {
	for _, statuses := range [][]v1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
		for i := range statuses {
			if neverStartedMark(&statuses[i]) {
				return true
			}
		}
	}
	return false
}

// podCondition returns old's PodConditionType condition when it is the
// kubelet's (status True), else a new one for old's rejection.
func podCondition(old *v1.PodStatus) *v1.PodCondition {
	for _, c := range old.Conditions {
		if c.Type == PodConditionType && c.Status == v1.ConditionTrue {
			return &c
		}
	}
	return &v1.PodCondition{
		Type:               PodConditionType,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             PodFailedReason,
		Message:            podMessage(old),
	}
}

// podMessage is the message of a pod that kubelet.SyncPod failed, without
// the "Pod was rejected: " that kubelet.rejectPod puts before it: the pod
// passed admission, a DRA driver failed it later.
func podMessage(old *v1.PodStatus) string {
	return strings.TrimPrefix(old.Message, rejectedPrefix)
}
