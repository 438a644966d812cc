// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

import "unicode/utf8"

// MaxErrorBytes is how many bytes of a driver's error text (a claim's
// NodePrepareResourceResponse.error, or the error of a failed call) the
// kubelet keeps for a pod's status message, its events and its logs; it cuts
// the rest. A driver that wants its words seen puts them first and fits them
// into this.
const MaxErrorBytes = 256

// TruncatedMark ends a text that Truncate cut.
const TruncatedMark = "..."

// Truncate returns s cut to at most maxBytes bytes on a rune boundary, ending
// with TruncatedMark when anything was cut. s is returned as it is when it
// fits; when maxBytes leaves no room for the mark, a longer s becomes "".
func Truncate(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	if maxBytes < len(TruncatedMark) {
		return "" // no room to say that something was cut: leave it all out
	}
	cut := maxBytes - len(TruncatedMark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncatedMark
}
