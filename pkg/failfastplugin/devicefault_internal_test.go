// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

func TestTaintValue(t *testing.T) {
	for text, want := range map[string]string{
		"claim ns/broken: device dev-1 is broken": "claim-ns-broken-device-dev-1-is-broken",
		"":                              defaultTaintValue,
		"💥":                             defaultTaintValue,
		"--- ... ___":                   defaultTaintValue,
		"ECC error: bank 3":             "ECC-error-bank-3",
		"_leading.and.trailing_":        "leading.and.trailing",
		"über-heiß":                     "ber-hei",
		"a\nb\tc\u202ed":                "a-b-c-d",
		strings.Repeat("ab ", 40):       strings.TrimRight(strings.Repeat("ab-", 21), "-"),
		strings.Repeat("x", 62) + "._y": strings.Repeat("x", 62),
	} {
		got := taintValue(text)
		if got != want {
			t.Errorf("taintValue(%q) = %q, want %q", text, got, want)
		}
		if errs := content.IsLabelValue(got); len(errs) > 0 {
			t.Errorf("taintValue(%q) = %q is no label value: %v", text, got, errs)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s      string
		maxLen int
		want   string
	}{
		{s: "short", maxLen: 10, want: "short"},
		{s: "exactly10!", maxLen: 10, want: "exactly10!"},
		{s: "a bit too long", maxLen: 10, want: "a bit t..."},
		{s: "äöüäöü", maxLen: 8, want: "äö..."},
		{s: "abc", maxLen: 2, want: ""},
	} {
		got := truncate(tc.s, tc.maxLen)
		if got != tc.want || len(got) > tc.maxLen || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.maxLen, got, tc.want)
		}
	}
}
