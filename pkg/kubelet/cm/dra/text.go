package dra

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxDriverMessageLen bounds the bytes of one driver message that reach
	// errors, events and pod status: a driver must not bloat pod status.
	maxDriverMessageLen = 256
	// maxPodMessageLen bounds the whole pod status message (events are
	// limited to 1024 bytes too).
	maxPodMessageLen = 1024
	truncatedMark    = "...(truncated)"
)

// sanitize makes untrusted text safe for pod status, events and logs: invalid
// UTF-8 and non-printable characters (newlines, escape sequences, bidi
// controls) become spaces, runs of spaces collapse, and the result is cut to
// at most maxLen bytes on a rune boundary, marked when cut.
func sanitize(s string, maxLen int) string {
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
	return truncate(b.String(), maxLen)
}

// truncate cuts s to at most maxLen bytes on a rune boundary, ending with
// truncatedMark when anything was cut.
func truncate(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	cut := max(maxLen-len(truncatedMark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMark
}
