// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
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
			markdown, problems := render(drivers["example"], runs, tc.proof, left, 16, "abc", "v1.37.2")
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

func TestReadTAP(t *testing.T) {
	tests := map[string]struct {
		tap, seconds string
		wantStates   []string
		wantProblem  string
		wantEntry    string
		wantFailure  string
	}{
		"a complete run": {
			tap:        "1..3\nok 1 the plugin runs\n# pod created to Failed: 2s\nok 2 a pod fails\nok 3 later # skip (no TPU v5)\n",
			seconds:    "301\n",
			wantStates: []string{"passed", "passed", "skipped"},
			wantEntry:  "pod created to Failed: 2s",
		},
		"a failed test keeps its words": {
			tap:         "1..2\nok 1 first\nnot ok 2 second\n# (in test file tests/e2e.bats, line 9)\n#   `assert_output 4' failed\n",
			wantStates:  []string{"passed", "failed"},
			wantFailure: "assert_output 4' failed",
		},
		"setup_suite failed": {
			tap:         "1..7\nnot ok 1 setup_suite\n# (from function `setup_suite' in test file tests/setup_suite.bash, line 40)\n",
			wantStates:  []string{"failed"},
			wantProblem: "0 test results for a plan of 7 tests",
		},
		"no plan": {wantProblem: "no TAP plan"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "adopted-fork-on")
			if err := os.WriteFile(base+".tap", []byte(tc.tap), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.seconds != "" {
				if err := os.WriteFile(base+".seconds", []byte(tc.seconds), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			suite, err := readRun(base)
			if err != nil {
				t.Fatal(err)
			}
			var states []string
			for _, s := range suite.SpecReports {
				states = append(states, s.State)
			}
			if strings.Join(states, ",") != strings.Join(tc.wantStates, ",") {
				t.Errorf("states %q, want %q", states, tc.wantStates)
			}
			if !strings.Contains(suite.Problem, tc.wantProblem) || (tc.wantProblem == "") != (suite.Problem == "") {
				t.Errorf("problem %q, want %q", suite.Problem, tc.wantProblem)
			}
			if tc.wantEntry != "" {
				e := suite.SpecReports[1].ReportEntries
				if len(e) != 1 || e[0].Name+": "+e[0].Value.Representation != tc.wantEntry {
					t.Errorf("second test's entries %+v, want %q", e, tc.wantEntry)
				}
			}
			if tc.wantFailure != "" && !strings.Contains(failureText(suite.SpecReports[len(suite.SpecReports)-1]), tc.wantFailure) {
				t.Errorf("failure %q, want it to contain %q", failureText(suite.SpecReports[len(suite.SpecReports)-1]), tc.wantFailure)
			}
			if tc.seconds != "" && suite.RunTime.Seconds() != 301 {
				t.Errorf("run time %v, want 301s", suite.RunTime)
			}
		})
	}
}

func TestWithSectionKeepsTheOthers(t *testing.T) {
	doc := withSection("", "tpu", "## TPU, first run\n")
	doc = withSection(doc, "example", "## example\n")
	doc = withSection(doc, "tpu", "## TPU, second run\n")
	if strings.Contains(doc, "first run") || !strings.Contains(doc, "second run") || !strings.Contains(doc, "## example") {
		t.Fatalf("doc:\n%s", doc)
	}
	if strings.Index(doc, "## example") > strings.Index(doc, "## TPU") {
		t.Errorf("sections not in driverOrder:\n%s", doc)
	}
	if strings.Count(doc, docTitle) != 1 {
		t.Errorf("title %d times", strings.Count(doc, docTitle))
	}
}
