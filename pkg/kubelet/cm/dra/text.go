// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

const (
	// maxDriverMessageLen bounds the bytes of one driver message that reach
	// errors, events and pod status: a driver must not bloat pod status.
	maxDriverMessageLen = v1alpha.MaxErrorBytes
	// maxPodMessageLen bounds the whole pod status message, including the
	// "Pod was rejected: " that the kubelet puts before it (events are
	// limited to 1024 bytes too).
	maxPodMessageLen = 1024
	// maxErrorLen bounds the text of the errors of this package: the kubelet
	// logs them and puts them into Events after a prefix of its own
	// ("Failed to prepare dynamic resources: prepare dynamic resources: ").
	maxErrorLen = 900
	// maxNameLen bounds a driver name or claim UID taken from a driver's
	// answer; names from the API are bounded by its validation.
	maxNameLen = decision.MaxNameLen
	// maxDevicesNamed is how many devices of a claim a text names; the rest
	// are counted.
	maxDevicesNamed = 3
	// maxDeviceNameLen bounds one "pool/device" (a pool name alone may have
	// 253 bytes).
	maxDeviceNameLen = 96
)

// truncate is the one truncation of the project (v1alpha.Truncate), shared
// with the driver library, so that a driver that fits its words into
// v1alpha.MaxErrorBytes sees them kept whole.
var truncate = v1alpha.Truncate

// sanitize is decision.Sanitize: the kubelet's texts and the classification
// of driver answers treat driver text alike.
var sanitize = decision.Sanitize
