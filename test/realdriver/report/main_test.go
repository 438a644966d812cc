// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

func spec(text, state string) specReport {
	return specReport{ContainerHierarchyTexts: []string{"Suite"}, LeafNodeType: "It", LeafNodeText: text, State: state}
}

func TestRenderProblems(t *testing.T) {
	left := []unrunnable{{"PodGroups", "needs an API 1.37 does not serve"}}
	unrunnableFails := suiteReport{SpecReports: []specReport{spec("shares PodGroups", "failed"), spec("allocates", "skipped")}}
	tests := map[string]struct {
		change func(runs []run) // applied to six passing runs
		proof  suiteReport
		want   []string
	}{
		"every spec passed, the unrunnable one skipped and failing on stock": {proof: unrunnableFails},
		"a spec failed on one kubelet": {
			change: func(runs []run) { runs[5].report.SpecReports[0].State = "failed" },
			proof:  unrunnableFails,
			want:   []string{`adopted/fork-on: "Suite allocates" failed`},
		},
		"a spec skipped that is not named unrunnable": {
			change: func(runs []run) { runs[0].report.SpecReports[0].State = "skipped" },
			proof:  unrunnableFails,
			want:   []string{`unmodified/stock: "Suite allocates" skipped, and not named unrunnable`},
		},
		"BeforeSuite failed": {
			change: func(runs []run) {
				runs[2].report.SpecReports = append(runs[2].report.SpecReports, specReport{LeafNodeType: "BeforeSuite", State: "failed"})
			},
			proof: unrunnableFails,
			want:  []string{"unmodified/fork-on: BeforeSuite failed"},
		},
		"the unrunnable spec passes on stock": {
			proof: suiteReport{SpecReports: []specReport{spec("shares PodGroups", "passed")}},
			want:  []string{`unrunnable spec "Suite shares PodGroups" passed on the stock kubelet`},
		},
		"the unrunnable pattern matches nothing": {
			proof: suiteReport{},
			want:  []string{`no spec matches the unrunnable pattern "PodGroups"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var runs []run
			for _, v := range variants {
				for _, m := range modes {
					runs = append(runs, run{v, m, suiteReport{SpecReports: []specReport{spec("allocates", "passed"), spec("shares PodGroups", "skipped")}}})
				}
			}
			if tc.change != nil {
				tc.change(runs)
			}
			markdown, problems := render(runs, tc.proof, left, 16, "abc", "v1.37.2")
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %q, want %q", problems, tc.want)
			}
			for i, want := range tc.want {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %q, want it to contain %q", problems[i], want)
				}
			}
			if !strings.Contains(markdown, "| Suite allocates |") || !strings.Contains(markdown, "16 changed lines") {
				t.Errorf("markdown lacks the spec row or the patch's size:\n%s", markdown)
			}
		})
	}
}

func TestFailureText(t *testing.T) {
	message := "Failed to create objects from /src/checkout/_output/real-driver/manifests/pg/pg.yaml\nUnexpected error:\n    <*fmt.wrapError | 0x1>: \n    failed to get REST mapping: no matches for kind \"PodGroup\"\n    {\n"
	s := specReport{State: "failed", Failure: &struct{ Message string }{message}}
	want := `Failed to create objects from pg.yaml failed to get REST mapping: no matches for kind "PodGroup"`
	if got := failureText(s); got != want {
		t.Errorf("failureText = %q, want %q", got, want)
	}
}
