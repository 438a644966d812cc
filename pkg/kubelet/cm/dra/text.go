// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// The kubelet package's names for the light module's text helpers, so that
// errors.go reads as kubelet code.
const (
	// maxDriverMessageLen bounds the bytes of one driver message that reach
	// errors, events and pod status: a driver must not bloat pod status.
	maxDriverMessageLen = v1alpha.MaxErrorBytes
	// maxNameLen bounds a driver name or claim UID taken from a driver's
	// answer; names from the API are bounded by its validation.
	maxNameLen = decision.MaxNameLen
)

// truncate is the one truncation of the project (v1alpha.Truncate), shared
// with the driver library, so that a driver that fits its words into
// v1alpha.MaxErrorBytes sees them kept whole.
var truncate = v1alpha.Truncate

// sanitize is decision.Sanitize: the kubelet's texts and the classification
// of driver answers treat driver text alike.
var sanitize = decision.Sanitize
