// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/decision"
)

// PrepareFailures collects the failures of all NodePrepareResources calls of
// one PrepareResources attempt for a pod, so that the error names every
// failing claim instead of the first one found.
//
// The DRA manager calls Record after each driver call; when Record returns
// true, the manager skips its own handling of that response. After the last
// driver, Err returns the attempt's error. With the feature gate off, Record
// always returns false and Err nil: the manager behaves as in stock.
type PrepareFailures struct {
	manager *Manager
	enabled bool
	pod     *v1.Pod
	claims  map[types.UID]*resourceapi.ResourceClaim
	results []DriverResult
	// devices counts, per claim and driver, the devices of each successful
	// answer: what the DRA manager's checkpoint will hold for them.
	devices map[types.UID]map[string]int
}

// Record classifies one driver's NodePrepareResources call (see Classify) and
// reports whether it failed in any way. The caller must not use resp when it
// returns true.
func (f *PrepareFailures) Record(ctx context.Context, driver string, sent []*drapbv1.Claim, resp *drapbv1.NodePrepareResourcesResponse, callErr error) bool {
	if !f.enabled {
		return false
	}
	result := decision.Classify(driver, sent, resp, callErr, Enabled())
	logger := klog.FromContext(ctx)
	if budget := f.manager.applyPolicy(logger, string(f.pod.UID), &result); budget != "" {
		// The driver did not mark these permanent: the node's retry budget
		// for the driver ran out.
		for i := range result.Claims {
			if claim := &result.Claims[i]; claim.Outcome == FailedPermanent {
				claim.Message = "retry budget exhausted (" + budget + "): " + claim.Message
			}
		}
	}
	for _, claim := range result.Claims {
		if claim.Downgraded == "" {
			continue
		}
		permanentDowngrades.WithLabelValues(driver, claim.Downgraded).Inc()
		claimLogger := logger
		if !f.manager.logged.firstTime(string(f.pod.UID) + "/" + string(claim.Claim.UID) + "/" + claim.Downgraded) {
			claimLogger = logger.V(4)
		}
		claimLogger.Info("Warning: DRA driver response not taken as a permanent failure", "driverName", driver, "claim", claim.Claim, "reason", claim.Downgraded, "pod", klog.KObj(f.pod))
	}
	if !result.Failed() {
		if f.devices == nil {
			f.devices = map[types.UID]map[string]int{}
		}
		for _, claim := range sent {
			uid := types.UID(claim.GetUid())
			if f.devices[uid] == nil {
				f.devices[uid] = map[string]int{}
			}
			f.devices[uid][driver] = len(resp.GetClaims()[claim.GetUid()].GetDevices())
		}
		return false
	}
	f.results = append(f.results, result)
	return true
}

// Err returns nil when no driver failed, a *PermanentPodError when any claim
// failed permanently, and otherwise an error naming every transient failure.
// A permanent failure of a pod whose claims were all prepared before (the
// record of prepared pods, preparedPods) is a *DowngradedError: it may have
// had a sandbox that the runtime has forgotten since. With no failure, the
// pod is added to that record: the kubelet goes on to create its sandbox.
func (f *PrepareFailures) Err(ctx context.Context) error {
	if len(f.results) == 0 {
		if f.enabled && podHasClaims(f.pod) {
			f.manager.prepared.add(klog.FromContext(ctx), f.pod.UID, f.devices, f.everyClaimPreparedNow())
		}
		return nil
	}
	err := prepareFailure(f.results, f.claims)
	var permanent *PermanentPodError
	if !errors.As(err, &permanent) {
		return err
	}
	if f.manager.prepared.has(f.pod.UID) {
		return f.manager.downgrade(klog.FromContext(ctx), f.pod, permanent, DowngradePreparedBefore,
			"the pod's claims were prepared for it before, so it may have had a sandbox")
	}
	return permanent
}

// podHasClaims tells whether the DRA manager prepares claims for pod.
func podHasClaims(pod *v1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil
}

// everyClaimPreparedNow tells whether this attempt prepared every claim of
// the pod, each driver returning devices for it (the DRA manager calls every
// driver of a claim that it prepares, and only after all answered without an
// error does Err run). The DRA manager's checkpoint, which it writes with
// those devices before the sandbox, then proves the pod prepared
// (podsPrepared) without a read of it. A claim prepared before, for another
// pod, is not in f.claims: the checkpoint has to be read then.
func (f *PrepareFailures) everyClaimPreparedNow() bool {
	for _, drivers := range f.devices {
		for _, count := range drivers {
			if count == 0 {
				return false
			}
		}
	}
	names := sets.New[string]()
	for _, claim := range f.claims {
		names.Insert(claim.Name)
	}
	for i := range f.pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(f.pod, &f.pod.Spec.ResourceClaims[i])
		if err != nil || name != nil && !names.Has(*name) {
			return false
		}
	}
	extended := f.pod.Status.ExtendedResourceClaimStatus
	return extended == nil || names.Has(extended.ResourceClaimName)
}
