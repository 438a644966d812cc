// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"sort"
	"time"
)

// Stats is the answer of GET /stats.
type Stats struct {
	// Claims holds the counters of every claim the driver was asked to
	// prepare or unprepare since it started or was last reset, keyed by
	// claim UID.
	Claims map[string]ClaimStats `json:"claims"`
	// BrokenDevices is the current broken set, sorted.
	BrokenDevices []string `json:"brokenDevices"`
	// TaintedDevices are the devices published with the broken taint, sorted.
	TaintedDevices []string `json:"taintedDevices"`
	// Behaviors are the behavior overrides, keyed by namespace (see
	// Driver.SetBehavior). Reset does not clear them.
	Behaviors map[string]BehaviorSpec `json:"behaviors,omitempty"`
}

// ClaimStats are the counters of one claim.
type ClaimStats struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PrepareCalls counts the claim in NodePrepareResources calls.
	PrepareCalls int `json:"prepareCalls"`
	// UnprepareCalls counts the claim in NodeUnprepareResources calls.
	UnprepareCalls int `json:"unprepareCalls"`
	// LastError is the error of the last prepare call, empty if it
	// succeeded.
	LastError string `json:"lastError,omitempty"`
	// LastUnprepareError is the error of the last unprepare call, empty if
	// it succeeded.
	LastUnprepareError string `json:"lastUnprepareError,omitempty"`
	// Permanent tells whether LastError was marked permanent.
	Permanent bool `json:"permanent"`
	// Prepared tells whether the claim is prepared: the last prepare call
	// succeeded and no unprepare call came after it.
	Prepared bool `json:"prepared"`
	// Devices are the devices of the driver allocated to the claim, as
	// seen in the last prepare call.
	Devices []string `json:"devices,omitempty"`
	// LastPrepare and LastUnprepare are the times of the last calls.
	LastPrepare   *time.Time `json:"lastPrepare,omitempty"`
	LastUnprepare *time.Time `json:"lastUnprepare,omitempty"`
	// LastPrepareAnswered is when the driver had its answer to the last
	// prepare call (the gRPC response leaves right after).
	LastPrepareAnswered *time.Time `json:"lastPrepareAnswered,omitempty"`
	// PrepareTimes and UnprepareTimes are the arrival times of the first
	// MaxRecordedCalls calls, for retry timelines.
	PrepareTimes   []time.Time `json:"prepareTimes,omitempty"`
	UnprepareTimes []time.Time `json:"unprepareTimes,omitempty"`
}

// MaxRecordedCalls bounds ClaimStats.PrepareTimes and UnprepareTimes: a
// claim retried forever must not grow the driver's memory.
const MaxRecordedCalls = 64

// record appends t to times unless MaxRecordedCalls are there.
func record(times []time.Time, t time.Time) []time.Time {
	if len(times) >= MaxRecordedCalls {
		return times
	}
	return append(times, t)
}

// Claim returns the counters of the claim namespace/name. If the driver saw
// several claims with that name (deleted and re-created), the one prepared
// or unprepared last wins.
func (s *Stats) Claim(namespace, name string) (ClaimStats, bool) {
	var (
		found ClaimStats
		ok    bool
	)
	for _, claim := range s.Claims {
		if claim.Namespace != namespace || claim.Name != name {
			continue
		}
		if !ok || lastCall(claim).After(lastCall(found)) {
			found, ok = claim, true
		}
	}
	return found, ok
}

// Total sums the counters of all claims.
func (s *Stats) Total() (prepareCalls, unprepareCalls int) {
	for _, claim := range s.Claims {
		prepareCalls += claim.PrepareCalls
		unprepareCalls += claim.UnprepareCalls
	}
	return prepareCalls, unprepareCalls
}

func lastCall(claim ClaimStats) time.Time {
	var last time.Time
	for _, t := range []*time.Time{claim.LastPrepare, claim.LastUnprepare} {
		if t != nil && t.After(last) {
			last = *t
		}
	}
	return last
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for key, value := range set {
		if value {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}
