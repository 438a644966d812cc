// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"strings"
	"testing"

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

// FuzzTaintValue: whatever a fault's text, its taint value is a valid label
// value, or the API server would reject the driver's whole ResourceSlice.
func FuzzTaintValue(f *testing.F) {
	for _, seed := range []string{"claim ns/broken: device dev-1 is broken", "", "💥", "a\nb\tc\u202ed", strings.Repeat("x", 62) + "._y", "\xff\xfe"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got := taintValue(text); len(content.IsLabelValue(got)) > 0 || got == "" {
			t.Fatalf("taintValue(%q) = %q is no label value: %v", text, got, content.IsLabelValue(got))
		}
	})
}
