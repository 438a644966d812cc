// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command report writes one driver's section of docs/real-driver.md from the reports of make
// test-real-driver (one per driver copy and kubelet: REPORTS/VARIANT-MODE.json, Ginkgo's JSON
// report, or REPORTS/VARIANT-MODE.tap, a BATS suite's TAP output with REPORTS/VARIANT-MODE.seconds)
// and fails when the runs do not show what they must: every run present and complete, every test
// passed on every kubelet except the tests named unrunnable (skipped, with why), and nothing failed
// outside the tests (BeforeSuite, setup_suite, cleanup). The other drivers' sections are kept.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Variants and modes in the order of the report's columns.
var (
	variants = []string{"unmodified", "adopted"}
	modes    = []string{"stock", "fork-off", "fork-on"}
	// kubeletNames say what each mode runs.
	kubeletNames = map[string]string{
		"stock":    "stock kubelet",
		"fork-off": "fork, gate off",
		"fork-on":  "fork, gate on",
	}
)

// suiteReport holds the fields of a Ginkgo JSON report (types.Report) that the report reads.
type suiteReport struct {
	// Problem is what is wrong with the run as a whole (a BATS run that stopped early).
	Problem          string `json:"-"`
	SuiteDescription string
	SuiteSucceeded   bool
	RunTime          time.Duration
	SpecReports      []specReport
}

type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 time.Duration
	Failure                 *struct{ Message string }
	ReportEntries           []reportEntry
}

type reportEntry struct {
	Name  string
	Value struct{ Representation string }
}

func (s specReport) name() string {
	return strings.Join(append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText), " ")
}

type run struct {
	variant, mode string
	report        suiteReport
}

// unrunnable is a spec left out on purpose: a -ginkgo.skip pattern and why.
type unrunnable struct{ pattern, reason string }

func main() {
	driverName := flag.String("driver", "", "the driver: "+strings.Join(driverOrder, ", "))
	reports := flag.String("reports", "", "directory of VARIANT-MODE.json or VARIANT-MODE.tap")
	unrunnableFlag := flag.String("unrunnable", "", "lines of PATTERN | REASON: specs skipped on purpose")
	patch := flag.String("adoption-patch", "", "the adoption patch, for its line count")
	commit := flag.String("commit", "", "the commit tested")
	kubeVersion := flag.String("kube-version", "", "the Kubernetes version of the cluster")
	output := flag.String("output", "", "markdown file to write")
	flag.Parse()
	d, known := drivers[*driverName]
	if *reports == "" || *output == "" || !known {
		flag.Usage()
		os.Exit(2)
	}
	var left []unrunnable
	for line := range strings.Lines(*unrunnableFlag) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		pattern, reason, ok := strings.Cut(line, "|")
		if !ok {
			fail(fmt.Errorf("--unrunnable line %q: want PATTERN | REASON", line))
		}
		left = append(left, unrunnable{strings.TrimSpace(pattern), strings.TrimSpace(reason)})
	}
	var runs []run
	for _, v := range variants {
		for _, m := range modes {
			suite, err := readRun(filepath.Join(*reports, v+"-"+m))
			if err != nil {
				fail(fmt.Errorf("the run of the %s driver on the %s: %w", v, kubeletNames[m], err))
			}
			runs = append(runs, run{v, m, suite})
		}
	}
	var proof suiteReport
	if len(left) > 0 {
		var err error
		if proof, err = readRun(filepath.Join(*reports, "unrunnable-stock")); err != nil {
			fail(fmt.Errorf("the run of the unrunnable tests on the stock kubelet: %w", err))
		}
	}
	patchLines, err := changedLines(*patch)
	if err != nil {
		fail(err)
	}
	section, problems := render(d, runs, proof, left, patchLines, *commit, *kubeVersion)
	old, err := os.ReadFile(*output)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fail(err)
	}
	if err := os.WriteFile(*output, []byte(withSection(string(old), *driverName, section)), 0o644); err != nil {
		fail(err)
	}
	if len(problems) > 0 {
		fail(fmt.Errorf("%s written; the runs of %s do not pass:\n  %s", *output, *driverName, strings.Join(problems, "\n  ")))
	}
	fmt.Printf("%s written: %s, %d runs, every test as expected\n", *output, *driverName, len(runs))
}

// readRun reads BASE.json (Ginkgo) or, without it, BASE.tap (BATS).
func readRun(base string) (suiteReport, error) {
	if _, err := os.Stat(base + ".json"); err == nil {
		return readSuite(base + ".json")
	}
	return readTAP(base + ".tap")
}

// tapResult matches a TAP test line of bats: "ok 3 name", "not ok 4 name", "ok 5 name # skip (why)".
var tapResult = regexp.MustCompile(`^(ok|not ok) (\d+) (.*?)(?: # skip(?: \(?(.*?)\)?)?)?$`)

// tapEntry matches what a test says on fd 3 for the report: "# NAME: VALUE", as "# pod created to
// Failed: 1s".
var tapEntry = regexp.MustCompile(`^# ([a-zA-Z][^:]*): (\S+)$`)

// readTAP reads a BATS suite's TAP output as a suite report: each test a spec; lines "# NAME:
// VALUE" before a test's result become its report entries, "# " lines after a failed test its
// failure; a plan that does not match the results, or a failed setup_suite, fails the suite.
// BASE.seconds (beside it) is the suite's time, which TAP does not give.
func readTAP(file string) (suiteReport, error) {
	f, err := os.Open(file)
	if err != nil {
		return suiteReport{}, err
	}
	defer func() { _ = f.Close() }()
	var suite suiteReport
	planned := -1
	var entries []reportEntry
	var last *specReport
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if n, ok := strings.CutPrefix(line, "1.."); ok && planned < 0 {
			if planned, err = strconv.Atoi(n); err != nil {
				return suiteReport{}, fmt.Errorf("%s: plan %q: %w", file, line, err)
			}
			continue
		}
		if m := tapResult.FindStringSubmatch(line); m != nil {
			spec := specReport{LeafNodeType: "It", LeafNodeText: m[3], State: "passed", ReportEntries: entries}
			switch {
			case m[1] == "not ok":
				spec.State = "failed"
				spec.Failure = &struct{ Message string }{}
			case strings.Contains(line, " # skip"):
				spec.State = "skipped"
			}
			if spec.LeafNodeText == "setup_suite" || spec.LeafNodeText == "teardown_suite" {
				spec.LeafNodeType = spec.LeafNodeText
			}
			entries = nil
			suite.SpecReports = append(suite.SpecReports, spec)
			last = &suite.SpecReports[len(suite.SpecReports)-1]
			continue
		}
		if m := tapEntry.FindStringSubmatch(line); m != nil {
			e := reportEntry{Name: m[1]}
			e.Value.Representation = m[2]
			entries = append(entries, e)
			continue
		}
		if text, ok := strings.CutPrefix(line, "# "); ok && last != nil && last.Failure != nil {
			last.Failure.Message += text + "\n"
		}
	}
	if err := scanner.Err(); err != nil {
		return suiteReport{}, fmt.Errorf("%s: %w", file, err)
	}
	tests := 0
	for _, s := range suite.SpecReports {
		if s.LeafNodeType == "It" {
			tests++
		}
	}
	switch {
	case planned < 0:
		suite.Problem = "no TAP plan: the suite did not start"
	case tests != planned:
		suite.Problem = fmt.Sprintf("%d test results for a plan of %d tests: the suite stopped early", tests, planned)
	}
	if data, err := os.ReadFile(strings.TrimSuffix(file, ".tap") + ".seconds"); err == nil {
		if seconds, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			suite.RunTime = time.Duration(seconds) * time.Second
		}
	}
	return suite, nil
}

func readSuite(file string) (suiteReport, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return suiteReport{}, err
	}
	var suites []suiteReport
	if err := json.Unmarshal(data, &suites); err != nil {
		return suiteReport{}, fmt.Errorf("%s: %w", file, err)
	}
	if len(suites) != 1 {
		return suiteReport{}, fmt.Errorf("%s: %d suite reports, want 1", file, len(suites))
	}
	return suites[0], nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ERROR:", err)
	os.Exit(1)
}

// changedLines counts the lines a unified diff adds and removes.
func changedLines(path string) (int, error) {
	if path == "" {
		return 0, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		if (strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++")) ||
			(strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---")) {
			n++
		}
	}
	return n, nil
}

// render returns the markdown and what is wrong with the runs.
func render(d driverDoc, runs []run, proof suiteReport, left []unrunnable, patchLines int, commit, kubeVersion string) (string, []string) {
	var problems []string
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\nGenerated by `make test-real-driver DRIVER=%s` (hack/test-real-driver.sh) at commit %s, %s, on kind\n"+
		"clusters of this project's node images (Kubernetes %s), 2 cores. ", d.title, d.name, commit, time.Now().UTC().Format("2006-01-02"), kubeVersion)
	b.WriteString(strings.ReplaceAll(d.intro, "PATCH_LINES", strconv.Itoa(patchLines)) + "\n\n")
	for _, r := range runs {
		if r.report.Problem != "" {
			problems = append(problems, fmt.Sprintf("%s/%s: %s", r.variant, r.mode, r.report.Problem))
		}
	}
	b.WriteString("| driver | kubelet | passed | failed | skipped | suite time |\n|---|---|---|---|---|---|\n")
	results := map[string]map[string]string{} // spec -> run -> state
	var specOrder []string
	var timings []string
	for _, r := range runs {
		column := r.variant + "/" + r.mode
		counts := map[string]int{}
		for _, s := range r.report.SpecReports {
			if s.LeafNodeType != "It" {
				if s.State != "passed" {
					problems = append(problems, fmt.Sprintf("%s: %s %s", column, s.LeafNodeType, failureText(s)))
				}
				continue
			}
			counts[s.State]++
			name := s.name()
			if results[name] == nil {
				results[name] = map[string]string{}
				specOrder = append(specOrder, name)
			}
			results[name][column] = s.State
			for _, e := range s.ReportEntries {
				timings = append(timings, fmt.Sprintf("| %s | %s | %s | %s |", r.variant, kubeletNames[r.mode], s.LeafNodeText, e.Name+": "+e.Value.Representation))
			}
			switch {
			case s.State == "skipped" && matchesUnrunnable(name, left) == "":
				problems = append(problems, fmt.Sprintf("%s: %q skipped, and not named unrunnable", column, name))
			case s.State != "passed" && s.State != "skipped":
				problems = append(problems, fmt.Sprintf("%s: %q %s: %s", column, name, s.State, failureText(s)))
			}
		}
		specs := 0
		for _, n := range counts {
			specs += n
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s |\n", r.variant, kubeletNames[r.mode], counts["passed"],
			specs-counts["passed"]-counts["skipped"], counts["skipped"], r.report.RunTime.Round(time.Second))
	}

	fmt.Fprintf(&b, "\n### %s: every %s on every kubelet\n\n", d.short, d.test)
	header := "| " + d.test + " |"
	rule := "|---|"
	for _, r := range runs {
		header += " " + r.variant + ", " + kubeletNames[r.mode] + " |"
		rule += "---|"
	}
	b.WriteString(header + "\n" + rule + "\n")
	for _, name := range specOrder {
		row := "| " + strings.ReplaceAll(name, "|", `\|`) + " |"
		for _, r := range runs {
			state, ok := results[name][r.variant+"/"+r.mode]
			switch {
			case !ok:
				state = "not in this copy"
			case state == "skipped":
				state = "skipped: unrunnable"
			}
			row += " " + state + " |"
		}
		b.WriteString(row + "\n")
	}

	if len(left) > 0 {
		fmt.Fprintf(&b, "\n### %s: %ss that cannot run here\n\n", d.short, d.test)
		b.WriteString("Skipped in the runs above, and run once on their own (focused) with the unmodified driver on the\n" +
			"stock kubelet, where they fail too: the cluster's Kubernetes version cannot run them, the fork\n" +
			"has nothing to do with it.\n\n")
	}
	for _, u := range left {
		fmt.Fprintf(&b, "- specs matching `%s`: %s.\n", u.pattern, u.reason)
		found := false
		for _, s := range proof.SpecReports {
			if s.LeafNodeType != "It" || !strings.Contains(s.name(), u.pattern) {
				continue
			}
			found = true
			if s.State == "passed" || s.State == "skipped" {
				problems = append(problems, fmt.Sprintf("unrunnable spec %q %s on the stock kubelet: it can run, take it off the list", s.name(), s.State))
			}
			fmt.Fprintf(&b, "  - %q on the stock kubelet: %s, %q\n", s.name(), s.State, failureText(s))
		}
		if !found {
			problems = append(problems, fmt.Sprintf("no spec matches the unrunnable pattern %q", u.pattern))
		}
	}
	fmt.Fprintf(&b, "\n### %s: time to Failed (adopted driver, our %ss)\n\n", d.short, d.test)
	b.WriteString("The API stores both times in whole seconds: each figure is within a second of the true one.\n\n" +
		"| driver | kubelet | " + d.test + " | measured |\n|---|---|---|---|\n")
	b.WriteString(strings.Join(timings, "\n") + "\n")
	fmt.Fprintf(&b, "\n### %s: substitutions\n\n", d.short)
	b.WriteString("These machines reach the Go module proxy and Debian's packages, no container registry and no chart\n" +
		"repository. What the driver's own recipe fetches from elsewhere is replaced, and nothing else:\n\n" + d.substitutions)
	if len(problems) > 0 {
		fmt.Fprintf(&b, "\n### %s: problems in this run\n\n- %s\n", d.short, strings.Join(problems, "\n- "))
	}
	return b.String(), problems
}

// docTitle heads docs/real-driver.md; each driver's section follows, between markers, in
// driverOrder.
const docTitle = `# Drivers nobody here wrote, with their own suites

Each section is written by ` + "`make test-real-driver DRIVER=NAME`" + ` (hack/test-real-driver.sh,
test/realdriver/report) from the runs it reports: the driver built from its snapshot
(../shared/third_party), its own suite unmodified on each kubelet (the stock kubelet, the fork with
DRAHandlePermanentDriverFailures off, the fork with it on), then the driver with this project's
adoption patch and our tests in the suite's own style. A test that cannot run here is named with
why, and shown to fail on the stock kubelet too.
`

func beginMarker(driver string) string { return "<!-- test-real-driver " + driver + ": begin -->\n" }
func endMarker(driver string) string   { return "<!-- test-real-driver " + driver + ": end -->\n" }

// withSection returns doc (docs/real-driver.md as it was) with driver's section replaced by
// section, the other drivers' sections kept, all in driverOrder under docTitle.
func withSection(doc, driver, section string) string {
	sections := map[string]string{driver: section}
	for _, other := range driverOrder {
		if other == driver {
			continue
		}
		_, rest, ok := strings.Cut(doc, beginMarker(other))
		if !ok {
			continue
		}
		if kept, _, ok := strings.Cut(rest, endMarker(other)); ok {
			sections[other] = kept
		}
	}
	var b strings.Builder
	b.WriteString(docTitle)
	for _, name := range driverOrder {
		if text, ok := sections[name]; ok {
			b.WriteString("\n" + beginMarker(name) + strings.TrimRight(text, "\n") + "\n" + endMarker(name))
		}
	}
	return b.String()
}

func matchesUnrunnable(name string, left []unrunnable) string {
	for _, u := range left {
		if strings.Contains(name, u.pattern) {
			return u.reason
		}
	}
	return ""
}

// failureText is a spec's failure in one line: Gomega's first line, and the first line after it
// that says what was wrong (not its own scaffolding), file paths cut to their base names (the
// report names no path of the machine it ran on).
func failureText(s specReport) string {
	if s.Failure == nil {
		return s.State
	}
	lines := strings.Split(s.Failure.Message, "\n")
	text := strings.TrimSpace(lines[0])
	for _, line := range lines[1:] {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "<") || strings.HasPrefix(line, "{") ||
			strings.HasPrefix(line, "Unexpected error") || strings.HasPrefix(line, "The function passed") ||
			strings.HasPrefix(line, "Expected") {
			continue
		}
		text += " " + line
		break
	}
	return directories.ReplaceAllString(text, "")
}

// directories matches the directory part of an absolute path.
var directories = regexp.MustCompile(`/[^\s:"']*/`)
