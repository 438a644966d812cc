// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package upstreame2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The parts of Ginkgo v2's JSON report (--report-complete-ginkgo: <report-dir>/ginkgo/report.json)
// that we read. Ginkgo's own types are not imported: this module does not depend on Ginkgo, and
// these field names are Ginkgo's stable report format.
type ginkgoReport struct {
	SuiteDescription string             `json:"SuiteDescription"`
	SuiteSucceeded   bool               `json:"SuiteSucceeded"`
	RunTime          time.Duration      `json:"RunTime"`
	SpecReports      []ginkgoSpecReport `json:"SpecReports"`
}

type ginkgoSpecReport struct {
	ContainerHierarchyTexts []string      `json:"ContainerHierarchyTexts"`
	LeafNodeType            string        `json:"LeafNodeType"`
	LeafNodeText            string        `json:"LeafNodeText"`
	State                   string        `json:"State"`
	RunTime                 time.Duration `json:"RunTime"`
	Failure                 struct {
		Message  string `json:"Message"`
		Location struct {
			FileName   string `json:"FileName"`
			LineNumber int    `json:"LineNumber"`
		} `json:"Location"`
	} `json:"Failure"`
}

// State is a spec's result.
type State string

const (
	Passed State = "passed"
	Failed State = "failed"
	// Skipped: skipped while running (the spec skipped itself, e.g. for a feature gate).
	Skipped State = "skipped"
	// SkippedHere: in Skips, so not run on this machine.
	SkippedHere State = "skipped-here"
)

// SpecResult is one spec of one run.
type SpecResult struct {
	// Name is the spec's full text: its containers' texts and its leaf text.
	Name     string        `json:"name"`
	State    State         `json:"state"`
	Duration time.Duration `json:"duration"`
	// Reason: the first line of the failure, or why it was skipped.
	Reason string `json:"reason,omitempty"`
	// Location of the failure, file:line in upstream's tree.
	Location string `json:"location,omitempty"`
}

// parseReport reads a Ginkgo JSON report and returns the specs whose full text matches focus,
// and the failures of suite-level nodes (BeforeSuite, AfterSuite, ReportAfterSuite), which
// make every spec of the run suspect. A skipped spec that is in skips is SkippedHere, with its reason.
func parseReport(path string, focus *regexp.Regexp, skips []Skip) ([]SpecResult, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, nil, fmt.Errorf("%s: not a Ginkgo JSON report: %w", path, err)
	}
	if len(reports) == 0 {
		return nil, nil, fmt.Errorf("%s: empty Ginkgo report", path)
	}
	var specs []SpecResult
	var suiteFailures []string
	for _, r := range reports {
		for _, s := range r.SpecReports {
			failed := s.State != "passed" && s.State != "skipped" && s.State != "pending"
			if s.LeafNodeType != "It" {
				if failed {
					suiteFailures = append(suiteFailures, fmt.Sprintf("%s %s: %s", s.LeafNodeType, s.State, firstLine(s.Failure.Message)))
				}
				continue
			}
			name := strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
			if !focus.MatchString(name) {
				continue
			}
			res := SpecResult{Name: name, Duration: s.RunTime}
			switch {
			case s.State == "passed":
				res.State = Passed
			case s.State == "skipped" || s.State == "pending":
				res.State = Skipped
				if reason, ok := skipReason(skips, name); ok {
					res.State, res.Reason = SkippedHere, reason
				} else {
					res.Reason = firstLine(s.Failure.Message)
				}
			default:
				res.State = Failed
				res.Reason = s.State + ": " + firstLine(s.Failure.Message)
				if loc := s.Failure.Location; loc.FileName != "" {
					res.Location = fmt.Sprintf("%s:%d", trimToTree(loc.FileName), loc.LineNumber)
				}
			}
			specs = append(specs, res)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs, suiteFailures, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const maxLen = 300
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return s
}

// trimToTree shortens a source path of the test binary to its path in the Kubernetes tree
// (binaries are built with -trimpath: k8s.io/kubernetes/test/e2e_node/dra_test.go).
func trimToTree(file string) string {
	for _, marker := range []string{"k8s.io/kubernetes/", "/tree/pristine/", "/tree/patched/"} {
		if i := strings.LastIndex(file, marker); i >= 0 {
			return file[i+len(marker):]
		}
	}
	return file
}
