// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import "time"

// RuleName is the name of the DeviceTaintRule of device, for the tests.
func (f *DeviceFaults) RuleName(device DeviceID) string { return f.ruleName(device) }

// SetAfterList makes Load call hook between listing the rules and taking
// them in.
func (f *DeviceFaults) SetAfterList(hook func()) { f.afterList = hook }

// RulesAPIVersion is the version of resource.k8s.io in which f found
// DeviceTaintRules, "" before it looked.
func (f *DeviceFaults) RulesAPIVersion() string {
	f.api.mu.Lock()
	defer f.api.mu.Unlock()
	if f.api.found == nil {
		return ""
	}
	return f.api.found.version
}

// SetRetryBackoff sets the first and the longest wait between two tries of
// a fault's taint.
func (f *DeviceFaults) SetRetryBackoff(initial, longest time.Duration) {
	f.retry.mu.Lock()
	defer f.retry.mu.Unlock()
	f.retry.initial, f.retry.max = initial, longest
}
