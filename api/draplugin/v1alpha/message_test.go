// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s        string
		maxBytes int
		want     string
	}{
		{s: "short", maxBytes: 10, want: "short"},
		{s: "exactly10!", maxBytes: 10, want: "exactly10!"},
		{s: "a bit too long", maxBytes: 10, want: "a bit t..."},
		{s: "äöüäöü", maxBytes: 8, want: "äö..."},
		{s: "abc", maxBytes: 3, want: "abc"},
		{s: "abcd", maxBytes: 3, want: "..."},
		{s: "abc", maxBytes: 2, want: ""},
		{s: "abc", maxBytes: -1, want: ""},
		{s: "", maxBytes: 0, want: ""},
	} {
		if got := v1alpha.Truncate(tc.s, tc.maxBytes); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.maxBytes, got, tc.want)
		}
	}
}

// FuzzTruncate: whatever the input, the result fits, is the input when that
// fits, and is otherwise a prefix of the input (on a rune boundary, so valid
// UTF-8 stays valid) followed by the mark. go test runs the seeds; go test
// -fuzz FuzzTruncate explores.
func FuzzTruncate(f *testing.F) {
	f.Add("partitions must be between 1 and 7, got 9", 16)
	f.Add(strings.Repeat("é", 200), v1alpha.MaxErrorBytes)
	f.Add("\xff\xfe invalid UTF-8", 5)
	f.Add("abc", 2)
	f.Add("日本語のエラー", 7)
	f.Fuzz(func(t *testing.T, s string, maxBytes int) {
		got := v1alpha.Truncate(s, maxBytes)
		switch {
		case len(s) <= maxBytes:
			if got != s {
				t.Fatalf("Truncate(%q, %d) = %q, want the input", s, maxBytes, got)
			}
		case got == "":
			if maxBytes >= len(v1alpha.TruncatedMark) {
				t.Fatalf("Truncate(%q, %d) = \"\" with room for the mark", s, maxBytes)
			}
		default:
			head, ok := strings.CutSuffix(got, v1alpha.TruncatedMark)
			if len(got) > maxBytes || !ok || !strings.HasPrefix(s, head) {
				t.Fatalf("Truncate(%q, %d) = %q: longer than allowed, or not a prefix plus the mark", s, maxBytes, got)
			}
			if utf8.ValidString(s) && !utf8.ValidString(got) {
				t.Fatalf("Truncate(%q, %d) = %q cut a rune", s, maxBytes, got)
			}
		}
	})
}
