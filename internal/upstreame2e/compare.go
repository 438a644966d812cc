// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package upstreame2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Counts summarises a run's specs.
type Counts struct {
	Run, Passed, Failed, Skipped, SkippedHere int
}

func count(specs []SpecResult) Counts {
	var c Counts
	for _, s := range specs {
		switch s.State {
		case Passed:
			c.Run++
			c.Passed++
		case Failed:
			c.Run++
			c.Failed++
		case Skipped:
			c.Skipped++
		case SkippedHere:
			c.SkippedHere++
		}
	}
	return c
}

// Differences compares every run with the stock one spec by spec and returns one line per
// spec whose state differs or that only one of them has. Without a stock run it returns nil.
func Differences(runs []Run) []string {
	i := slices.IndexFunc(runs, func(r Run) bool { return r.Kubelet == stockRun })
	if i < 0 {
		return nil
	}
	stock := runs[i]
	base := states(stock.Specs)
	var diffs []string
	for _, r := range runs {
		if r.Kubelet == stockRun {
			continue
		}
		other := states(r.Specs)
		names := map[string]bool{}
		for name := range base {
			names[name] = true
		}
		for name := range other {
			names[name] = true
		}
		sorted := make([]string, 0, len(names))
		for name := range names {
			sorted = append(sorted, name)
		}
		sort.Strings(sorted)
		for _, name := range sorted {
			b, o := base[name], other[name]
			if b != o {
				diffs = append(diffs, fmt.Sprintf("%s: %s %s, %s %s", name, stock.Kubelet, orNone(b), r.Kubelet, orNone(o)))
			}
		}
	}
	return diffs
}

func states(specs []SpecResult) map[string]State {
	m := make(map[string]State, len(specs))
	for _, s := range specs {
		m[s.Name] = s.State
	}
	return m
}

func orNone(s State) State {
	if s == "" {
		return "absent"
	}
	return s
}

// Verdict returns nil when every run completed, at least one spec ran in each, every own spec
// passed, and the fork agrees with stock spec by spec; without a stock run to compare with
// (make test runs fork-gate-on alone), every spec that ran must pass.
func Verdict(runs []Run) error {
	var errs []error
	withStock := comparesWithStock(runs)
	for _, r := range runs {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("%s: %s", r.Kubelet, r.Error))
		}
		if len(r.SuiteFailures) > 0 {
			errs = append(errs, fmt.Errorf("%s: suite failures: %s", r.Kubelet, strings.Join(r.SuiteFailures, "; ")))
		}
		// A suite broken by this machine fails every spec alike on every kubelet: then nothing
		// would differ, yet nothing was shown.
		if count(r.Specs).Passed == 0 && r.Error == "" {
			errs = append(errs, fmt.Errorf("%s: no spec passed", r.Kubelet))
		}
		for _, s := range r.Specs {
			if s.State == Failed && !withStock {
				errs = append(errs, fmt.Errorf("%s: %s: %s (no stock run to compare with: every spec must pass)", r.Kubelet, s.Name, s.Reason))
			}
		}
		for _, s := range r.OwnSpecs {
			switch {
			case skippedByGate(s.Name, r.Gates):
				// The series' spec for the other value of the gate must have skipped itself.
				if s.State != Skipped {
					errs = append(errs, fmt.Errorf("%s: own spec %s: %s, want skipped with %s", r.Kubelet, s.Name, cmp.Or(s.Reason, string(s.State)), r.Gates))
				}
			case s.State == Passed, s.State == SkippedHere:
			default:
				// A failure's reason starts with Ginkgo's state (failed, timedout, ...).
				errs = append(errs, fmt.Errorf("%s: own spec %s: %s", r.Kubelet, s.Name, cmp.Or(s.Reason, string(s.State))))
			}
		}
		if r.OwnCDISpecsLeft > 0 {
			errs = append(errs, fmt.Errorf("%s: the own specs left %d CDI specs behind (claims never unprepared)", r.Kubelet, r.OwnCDISpecsLeft))
		}
	}
	if withStock {
		stock := runs[slices.IndexFunc(runs, func(r Run) bool { return r.Kubelet == stockRun })]
		for _, r := range runs {
			if r.CDISpecsLeft > stock.CDISpecsLeft {
				errs = append(errs, fmt.Errorf("%s left %d CDI specs behind, stock %d: claims the fork never unprepared",
					r.Kubelet, r.CDISpecsLeft, stock.CDISpecsLeft))
			}
		}
	}
	for _, d := range Differences(runs) {
		errs = append(errs, errors.New("differs from stock: "+d))
	}
	return errors.Join(errs...)
}

// Totals counts every spec that ran over all runs, own specs included, for make test's
// "N passed, N failed" line.
func Totals(runs []Run) (passed, failed int) {
	for _, r := range runs {
		c := count(append(append([]SpecResult{}, r.Specs...), r.OwnSpecs...))
		passed += c.Passed
		failed += c.Failed
	}
	return passed, failed
}

// Results is what results.json holds.
type Results struct {
	Started time.Time `json:"started"`
	Focus   string    `json:"focus"`
	// Node is where the suite ran: on this host (systemd hidden), or in a systemd node (Node).
	Node  string `json:"node,omitempty"`
	Skip  string `json:"skip"`
	Skips []Skip `json:"skips"`
	// Images are the images built for the specs, without their registry host.
	Images   []string `json:"images"`
	Runs     []Run    `json:"runs"`
	WallTime string   `json:"wallTime"`
}

// ReadResults reads dir/results.json.
func ReadResults(dir string) (Results, error) {
	var res Results
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	return res, nil
}

// Write writes results.json and report.md into dir.
func (res Results) Write(dir string) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(res.Markdown()), 0o644)
}

// Table is the three-way table: one row per kubelet.
func (res Results) Table() string {
	var b strings.Builder
	b.WriteString("| kubelet | gates | specs run | passed | failed | skipped by the spec | skipped here | CDI specs left | own specs passed | wall time |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		c := count(r.Specs)
		gates := r.Gates
		if gates == "" {
			gates = "(defaults)"
		}
		own := "-"
		if len(r.OwnSpecs) > 0 {
			oc := count(r.OwnSpecs)
			own = fmt.Sprintf("%d of %d", oc.Passed, len(r.OwnSpecs))
			if skipped := oc.Skipped + oc.SkippedHere; skipped > 0 {
				own += fmt.Sprintf(" (%d skipped)", skipped)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %s | %s |\n", r.Kubelet, gates, c.Run, c.Passed, c.Failed,
			c.Skipped, c.SkippedHere, r.CDISpecsLeft, own, r.WallTime)
	}
	return b.String()
}

// Markdown is report.md: the table, the verdict, every spec's state per kubelet, the failures
// with their first line, the skips with their reasons, the own spec.
func (res Results) Markdown() string {
	var b strings.Builder
	node := res.Node
	if node == "" {
		node = "this host, systemd hidden from the suite"
	}
	fmt.Fprintf(&b, "# Upstream's DRA node e2e suite: stock vs. fork vs. series\n\nStarted %s, %s in all. Focus `%s`. "+
		"Ran on: %s. Images built here: %s (registry host omitted).\n\n",
		res.Started.UTC().Format(time.RFC3339), res.WallTime, res.Focus, node, strings.Join(res.Images, ", "))
	b.WriteString(res.Table())
	b.WriteString("\n")
	if err := Verdict(res.Runs); err != nil {
		fmt.Fprintf(&b, "**Verdict: FAIL**\n\n```\n%v\n```\n\n", err)
	} else {
		b.WriteString("**Verdict: pass.** " + verdictText(res.Runs) + "\n\n")
	}
	for _, r := range res.Runs {
		fmt.Fprintf(&b, "- %s: `%s`\n", r.Kubelet, r.Version)
	}
	b.WriteString("\n## Every spec\n\n| spec |")
	for _, r := range res.Runs {
		fmt.Fprintf(&b, " %s |", r.Kubelet)
	}
	b.WriteString("\n|---|")
	for range res.Runs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var names []string
	seen := map[string]bool{}
	for _, r := range res.Runs {
		for _, s := range r.Specs {
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "| %s |", strings.ReplaceAll(name, "|", "\\|"))
		for _, r := range res.Runs {
			cell := "absent"
			for _, s := range r.Specs {
				if s.Name == name {
					cell = string(s.State)
					if s.State == Passed || s.State == Failed {
						cell += fmt.Sprintf(" (%.0fs)", s.Duration.Seconds())
					}
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}

	b.WriteString("\n## Failures\n\n")
	any := false
	for _, r := range res.Runs {
		for _, s := range append(append([]SpecResult{}, r.Specs...), r.OwnSpecs...) {
			if s.State == Failed {
				any = true
				fmt.Fprintf(&b, "- %s: %s\n  - %s (%s)\n", r.Kubelet, s.Name, s.Reason, s.Location)
			}
		}
		for _, f := range r.SuiteFailures {
			any = true
			fmt.Fprintf(&b, "- %s: suite: %s\n", r.Kubelet, f)
		}
		if r.Error != "" {
			any = true
			fmt.Fprintf(&b, "- %s: run error: %s\n", r.Kubelet, r.Error)
		}
	}
	if !any {
		b.WriteString("None.\n")
	}

	b.WriteString("\n## CDI specs left\n\nThe runtime removes the CDI specs left in `/var/run/cdi` after each run and counts them. " +
		"Upstream's test driver leaves the specs of claims it prepared when a spec stops it before the kubelet " +
		"unprepared them; the fork must leave no more than stock, and the own specs none.\n")
	b.WriteString("\n## Skipped here, for all kubelets\n\n")
	for _, s := range res.Skips {
		fmt.Fprintf(&b, "- %s: %s\n", s.Spec, s.Reason)
	}
	b.WriteString("\n## Skipped by the spec itself\n\n")
	skippedBySpec := map[string]string{}
	for _, r := range res.Runs {
		for _, s := range r.Specs {
			if s.State == Skipped {
				skippedBySpec[s.Name] = s.Reason
			}
		}
	}
	if len(skippedBySpec) == 0 {
		b.WriteString("None.\n")
	}
	for _, name := range sortedKeys(skippedBySpec) {
		fmt.Fprintf(&b, "- %s: %s\n", name, skippedBySpec[name])
	}

	b.WriteString("\n## The series' own specs\n\nfork-gate-on: the fork's series' spec (patched test binary, focus `" + OwnSpecFocus + "`). " +
		"series-gate-*: the specs the upstream-shaped series adds to `test/e2e_node/dra_test.go`, run with upstream's by its own test binary; " +
		"each skips itself unless the gate has the value it tests.\n\n")
	for _, r := range res.Runs {
		for _, s := range r.OwnSpecs {
			state := string(s.State)
			if s.State == Skipped || s.State == SkippedHere {
				state += ": " + s.Reason
			}
			fmt.Fprintf(&b, "- %s: %s: **%s** (%.0fs)\n", r.Kubelet, s.Name, state, s.Duration.Seconds())
		}
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// verdictText says what a passing verdict means for these runs.
func verdictText(runs []Run) string {
	if comparesWithStock(runs) {
		return "Every other kubelet agrees with stock spec by spec."
	}
	return "Every spec that ran passed."
}

// comparesWithStock: the runs include stock and another one to compare with it.
func comparesWithStock(runs []Run) bool {
	return len(runs) > 1 && slices.ContainsFunc(runs, func(r Run) bool { return r.Kubelet == stockRun })
}
