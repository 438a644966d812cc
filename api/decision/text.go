// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// MaxNameLen bounds a driver name or claim UID taken from a driver's answer
// in a text; names from the API are bounded by its validation.
const MaxNameLen = 128

// Sanitize makes untrusted text safe for pod status, events and logs: invalid
// UTF-8 and non-printable characters (newlines, escape sequences, bidi
// controls) become spaces, runs of spaces collapse, and the result is cut to
// at most maxLen bytes on a rune boundary by v1alpha.Truncate, marked when cut.
func Sanitize(s string, maxLen int) string {
	var b strings.Builder
	space := false
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return v1alpha.Truncate(b.String(), maxLen)
}

// boundedError is an error from a driver call, its text sanitized and
// bounded to what the kubelet keeps of a driver message.
type boundedError struct{ err error }

func (e boundedError) Error() string { return Sanitize(e.err.Error(), v1alpha.MaxErrorBytes) }
func (e boundedError) Unwrap() error { return e.err }
