// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Manager is the feature's state in one kubelet: the node's driver failure
// policy, the retry budgets, what was logged once, and the record of the
// pods whose claims were prepared. The kubelet's DRA manager holds one as a
// field (patches 0001 and 0008), so that kubelets sharing a process
// (kubemark) share nothing. Its zero value is usable: the default policy, a
// record in memory only (tests of the kubelet's packages that build a DRA
// manager without NewManager).
type Manager struct {
	policy   policySource
	budgets  budgetCounts
	logged   onceSet
	prepared preparedPods
	// now is the retry budgets' clock; nil is time.Now (tests move it).
	now func() time.Time
}

// policyPollInterval is how often a kubelet looks at its policy file (one
// stat; nothing is read unless it changed).
const policyPollInterval = time.Second

// Start is called once, by the DRA manager's NewManager, with the directory
// where the DRA manager keeps its checkpoint. It reads and checks the node's
// policy, logs it, starts watching the file (policySource), and loads the
// record of prepared pods kept beside the checkpoint (preparedPods). An
// invalid policy, or a DriverPolicyEnv file that cannot be read, is an error:
// the kubelet refuses to start, as it does on an invalid configuration. A
// damaged record is logged and rebuilt from the checkpoint, never an error.
// With the feature gate off it does nothing: no file is read or written.
func (m *Manager) Start(logger klog.Logger, stateDir string) error {
	return m.start(logger, stateDir, policyPollInterval)
}

// start is Start with the policy file's poll interval; 0 starts no
// goroutine (the package's tests call refresh themselves).
func (m *Manager) start(logger klog.Logger, stateDir string, pollInterval time.Duration) error {
	if !Enabled() {
		return nil
	}
	if err := m.policy.load(logger, pollInterval); err != nil {
		return err
	}
	m.prepared.load(logger, stateDir)
	return nil
}

// NewPrepareFailures starts collecting the failures of one PrepareResources
// attempt for pod. claims are the ResourceClaims being prepared, by UID; they
// name the devices of a failing claim.
func (m *Manager) NewPrepareFailures(pod *v1.Pod, claims map[types.UID]*resourceapi.ResourceClaim) *PrepareFailures {
	enabled := Enabled()
	if enabled {
		registerMetrics() // with the gate off, /metrics is stock
	}
	return &PrepareFailures{manager: m, enabled: enabled, pod: pod, claims: claims}
}

func (m *Manager) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}
