// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

// TestSummarizeFailsFast: a permanently failing pod is an OK outcome only when it was Failed
// within seconds, its claim prepared once and unprepared once.
func TestSummarizeFailsFast(t *testing.T) {
	stats := func(prepare, unprepare int) *testdriver.Stats {
		return &testdriver.Stats{Claims: map[string]testdriver.ClaimStats{
			"uid": {Namespace: "default", Name: "permanent-claim-x7k", PrepareCalls: prepare, UnprepareCalls: unprepare},
		}}
	}
	failed := outcome{name: "permanent", want: "Failed within seconds", got: "Failed", ok: true, elapsed: 500 * time.Millisecond}
	for name, tc := range map[string]struct {
		outcome outcome
		stats   *testdriver.Stats
		wantErr bool
	}{
		"fast, one call each":      {failsFast(failed), stats(1, 1), false},
		"retried":                  {failsFast(failed), stats(2, 1), true},
		"not unprepared":           {failsFast(failed), stats(1, 0), true},
		"driver never saw a claim": {failsFast(failed), &testdriver.Stats{}, true},
		"too slow": {func() outcome {
			o := failsFast(failed)
			o.elapsed = time.Minute
			return o
		}(), stats(1, 1), true},
		"no bounds asked": {failed, stats(2, 0), false},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			if err := summarize(&out, []outcome{tc.outcome}, tc.stats); (err != nil) != tc.wantErr {
				t.Errorf("summarize = %v, want an error: %v; it printed:\n%s", err, tc.wantErr, out.String())
			}
		})
	}
}
