// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package upstreame2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// A Ginkgo v2 JSON report as the e2e framework writes it, cut down to what parseReport reads
// plus fields it must ignore.
const sampleReport = `[{
  "SuitePath": "/x", "SuiteDescription": "E2eNode Suite", "SuiteSucceeded": false, "RunTime": 1000,
  "SpecReports": [
    {"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed", "RunTime": 5},
    {"ContainerHierarchyTexts": ["[sig-node] [DRA] [Feature:DynamicResourceAllocation]", "Resource Kubelet Plugin"],
     "LeafNodeType": "It", "LeafNodeText": "must run pod if NodePrepareResources fails and then succeeds [Serial]",
     "State": "passed", "RunTime": 61000000000},
    {"ContainerHierarchyTexts": ["[sig-node] [DRA] [Feature:DynamicResourceAllocation]", "Two resource Kubelet Plugins"],
     "LeafNodeType": "It", "LeafNodeText": "must provide metrics [Serial]",
     "State": "failed", "RunTime": 2000000000,
     "Failure": {"Message": "Expected\n    <int>: 0\nto equal 1", "Location": {"FileName": "k8s.io/kubernetes/test/e2e_node/dra_test.go", "LineNumber": 650}}},
    {"ContainerHierarchyTexts": ["[sig-node] [DRA] [Feature:DynamicResourceAllocation]", "Resource Health"],
     "LeafNodeType": "It", "LeafNodeText": "should not add health status to Pod when feature gate is disabled",
     "State": "skipped", "Failure": {"Message": "feature ResourceHealthStatus is enabled"}},
    {"ContainerHierarchyTexts": ["[sig-node] [DRA] [Feature:DynamicResourceAllocation]", "Resource Kubelet Plugin"],
     "LeafNodeType": "It", "LeafNodeText": "must register after Kubelet restart [Serial]", "State": "skipped"},
    {"ContainerHierarchyTexts": ["[sig-node] DRA Node Allocatable Resources [Feature:DynamicResourceAllocation]"],
     "LeafNodeType": "It", "LeafNodeText": "verifies cgroup settings", "State": "skipped"},
    {"ContainerHierarchyTexts": ["[sig-node] Pods"], "LeafNodeType": "It", "LeafNodeText": "should be updated", "State": "skipped"},
    {"LeafNodeType": "ReportAfterSuite", "LeafNodeText": "Kubernetes e2e JUnit report", "State": "failed",
     "Failure": {"Message": "cannot write\nreport"}}
  ]
}]`

func TestParseReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(sampleReport), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, suite, err := parseReport(path, regexp.MustCompile(Focus), SkipsFor(false))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SpecResult{}
	for _, s := range specs {
		got[s.Name[strings.LastIndex(s.Name, "] ")+2:]] = s
	}
	for _, tc := range []struct {
		leaf, reason, location string
		state                  State
	}{
		{leaf: "Resource Kubelet Plugin must run pod if NodePrepareResources fails and then succeeds [Serial]", state: Passed},
		{leaf: "Two resource Kubelet Plugins must provide metrics [Serial]", state: Failed,
			reason: "failed: Expected", location: "test/e2e_node/dra_test.go:650"},
		{leaf: "Resource Health should not add health status to Pod when feature gate is disabled", state: Skipped,
			reason: "feature ResourceHealthStatus is enabled"},
		{leaf: "Resource Kubelet Plugin must register after Kubelet restart [Serial]", state: SkippedHere, reason: noSystemd},
		{leaf: "verifies cgroup settings", state: SkippedHere, reason: nodeAllocatable.Reason},
	} {
		s, ok := got[tc.leaf]
		if !ok {
			t.Errorf("%s: missing from %v", tc.leaf, specs)
			continue
		}
		if s.State != tc.state || s.Reason != tc.reason || s.Location != tc.location {
			t.Errorf("%s: got %s %q %q, want %s %q %q", tc.leaf, s.State, s.Reason, s.Location, tc.state, tc.reason, tc.location)
		}
	}
	if len(specs) != 5 {
		t.Errorf("got %d specs, want the 5 DRA ones: %v", len(specs), specs)
	}
	if got := got["Resource Kubelet Plugin must run pod if NodePrepareResources fails and then succeeds [Serial]"].Duration; got != 61*time.Second {
		t.Errorf("duration %s, want 61s", got)
	}
	if len(suite) != 1 || suite[0] != "ReportAfterSuite failed: cannot write" {
		t.Errorf("suite failures %q", suite)
	}

	if err := os.WriteFile(path, []byte(`{"not": "a list"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseReport(path, regexp.MustCompile(Focus), SkipsFor(false)); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a malformed report gave %v, want an error naming it", err)
	}
}

// TestParseReportInSystemdNode: in a systemd node a kubelet-restart spec is not skipped here; if
// it was skipped anyway, it is reported as skipped by the spec, never hidden as a planned skip.
func TestParseReportInSystemdNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(sampleReport), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, _, err := parseReport(path, regexp.MustCompile(Focus), SkipsFor(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		switch {
		case strings.Contains(s.Name, "must register after Kubelet restart") && s.State != Skipped:
			t.Errorf("%s: %s, want skipped (by the spec: no planned skip in a systemd node)", s.Name, s.State)
		case strings.Contains(s.Name, "verifies cgroup settings") && s.State != SkippedHere:
			t.Errorf("%s: %s, want skipped here", s.Name, s.State)
		}
	}
}

func TestSkipRegexp(t *testing.T) {
	if got := SkipsFor(true); len(got) != 1 || got[0] != nodeAllocatable {
		t.Errorf("SkipsFor(systemd) = %v, want only the Node Allocatable specs", got)
	}
	if got := SkipsFor(false); len(got) != len(restartSpecs)+1 {
		t.Errorf("SkipsFor(host) has %d skips, want the %d restart specs and Node Allocatable", len(got), len(restartSpecs))
	}
	re := regexp.MustCompile(SkipRegexp(SkipsFor(false)))
	for _, s := range SkipsFor(false) {
		if !re.MatchString("[sig-node] [DRA] container " + s.Spec + " [Serial]") {
			t.Errorf("the skip expression misses %q", s.Spec)
		}
	}
	inNode := regexp.MustCompile(SkipRegexp(SkipsFor(true)))
	for _, spec := range restartSpecs {
		if inNode.MatchString("[sig-node] [DRA] container " + spec + " [Serial]") {
			t.Errorf("in a systemd node the skip expression still matches %q", spec)
		}
	}
	for _, spec := range []string{
		"Resource Kubelet Plugin must call NodeUnprepareResources for deleted pod [Serial]",
		"Resource Kubelet Plugin must run pod if NodePrepareResources fails and then succeeds",
		"Two resource Kubelet Plugins must run pod if NodePrepareResources fails for one plugin and then succeeds",
	} {
		if re.MatchString(spec) {
			t.Errorf("the skip expression matches %q, which runs here", spec)
		}
	}
	prepare := regexp.MustCompile(PrepareFocus)
	for spec, want := range map[string]bool{
		"[sig-node] [DRA] [Feature:DynamicResourceAllocation] [FeatureGate:DynamicResourceAllocation] Resource Kubelet Plugin must run pod if NodePrepareResources fails and then succeeds [Serial]": true,
		"[sig-node] [DRA] [Feature:DynamicResourceAllocation] [FeatureGate:DynamicResourceAllocation] Two resource Kubelet Plugins must provide metrics [Serial]":                                    true,
		"[sig-node] [DRA] [Feature:DynamicResourceAllocation] [FeatureGate:DynamicResourceAllocation] ResourceSlice must be removed after plugin unregistration [Serial]":                            false,
		"[sig-node] [DRA] [Feature:DynamicResourceAllocation] [FeatureGate:DynamicResourceAllocation] Resource Health [FeatureGate:ResourceHealthStatus] should reflect device health changes":       false,
	} {
		if prepare.MatchString(spec) != want {
			t.Errorf("PrepareFocus matches %q: %t, want %t", spec, !want, want)
		}
	}
	if !regexp.MustCompile(OwnSpecFocus).MatchString("[sig-node] [DRA] [FeatureGate:DRAHandlePermanentDriverFailures] x") {
		t.Error("OwnSpecFocus does not match the gate's label")
	}
}

func run(name string, states map[string]State) Run {
	r := Run{Kubelet: name}
	for spec, state := range states {
		r.Specs = append(r.Specs, SpecResult{Name: spec, State: state})
	}
	return r
}

// Full names of series specs as Ginkgo reports them (containers, leaf, labels).
const (
	seriesPrefix  = "[sig-node] [DRA] [Feature:DynamicResourceAllocation] Resource Kubelet Plugin "
	gatedPrefix   = "[sig-node] [DRA] [Feature:DynamicResourceAllocation] Permanent driver failures [FeatureGate:DRAHandlePermanentDriverFailures] "
	gatedSuffix   = " [Alpha] [Feature:OffByDefault] [Serial]"
	permanentSpec = gatedPrefix + "must fail pod if NodePrepareResources fails permanently" + gatedSuffix
	restartSpec   = gatedPrefix + "must fail pod if NodePrepareResources fails permanently after Kubelet restart" + gatedSuffix
	disabledSpec  = seriesPrefix + "must retry NodePrepareResources if it fails permanently with DRAHandlePermanentDriverFailures disabled"
	untypedSpec   = seriesPrefix + "must keep pod in pending state if NodePrepareResources fails for a claim without error type, and run it once it succeeds"
)

// seriesRun is a series run with one upstream spec passed and these own specs.
func seriesRun(gates string, own map[string]State) Run {
	r := run("series", map[string]State{"a": Passed})
	r.Gates = gates
	for spec, state := range own {
		r.OwnSpecs = append(r.OwnSpecs, SpecResult{Name: spec, State: state, Reason: string(state)})
	}
	return r
}

func TestSplitSeriesSpecs(t *testing.T) {
	specs := []SpecResult{{Name: seriesPrefix + "must run pod if NodePrepareResources fails and then succeeds [Serial]"},
		{Name: permanentSpec}, {Name: restartSpec}}
	upstream, own := splitSeriesSpecs(specs)
	if len(upstream) != 1 || len(own) != 2 {
		t.Fatalf("split into %d upstream, %d own specs, want 1 and 2", len(upstream), len(own))
	}
	// The longer text wins: the restart spec is not taken for the one its text starts with.
	if s, _ := seriesSpec(restartSpec); !strings.HasSuffix(s.Text, "after Kubelet restart") {
		t.Errorf("seriesSpec(%q) = %q", restartSpec, s.Text)
	}
	missing := missingSeriesSpecs(own)
	if len(missing) != len(SeriesSpecs)-2 || slices.Contains(missing, SeriesSpecs[2].Text) {
		t.Errorf("missing %q, want every series spec but the two given", missing)
	}
	if !skippedByGate(disabledSpec, "DRAHandlePermanentDriverFailures=true") || skippedByGate(disabledSpec, "DRAHandlePermanentDriverFailures=false") ||
		!skippedByGate(permanentSpec, "DRAHandlePermanentDriverFailures=false") || skippedByGate(untypedSpec, "DRAHandlePermanentDriverFailures=false") {
		t.Error("skippedByGate does not follow the specs' gates")
	}
}

// TestSeriesSpecsMatchPatch: SeriesSpecs are exactly the specs the series' node e2e patch adds,
// and each spec's gate is the one it checks.
func TestSeriesSpecsMatchPatch(t *testing.T) {
	patches, err := filepath.Glob("../../upstream/patches/*-e2e_node-*.patch")
	if err != nil || len(patches) != 1 {
		t.Fatalf("the series' node e2e patch: %q, %v", patches, err)
	}
	data, err := os.ReadFile(patches[0])
	if err != nil {
		t.Fatal(err)
	}
	added := regexp.MustCompile(`(?m)^\+[ \t]*(?:f|ginkgo)\.It\("([^"]+)",(.*)$`).FindAllStringSubmatchIndex(string(data), -1)
	if len(added) != len(SeriesSpecs) {
		t.Fatalf("%s adds %d specs, SeriesSpecs lists %d", patches[0], len(added), len(SeriesSpecs))
	}
	// The gate-on specs are those of the context that carries the gate's label (after it in the
	// patch: the context is added below the file's other specs).
	gatedContext := regexp.MustCompile(`(?m)^\+\tf\.Context\("[^"]+", framework\.WithFeatureGate\(features\.DRAHandlePermanentDriverFailures\), f\.WithSerial\(\), func\(\) \{$`).FindIndex(data)
	if gatedContext == nil {
		t.Fatalf("%s adds no context labelled with the gate", patches[0])
	}
	for i, at := range added {
		m := []string{"", string(data[at[2]:at[3]]), string(data[at[4]:at[5]])}
		want := SeriesSpecs[i]
		if m[1] != want.Text {
			t.Errorf("spec %d: the patch has %q, SeriesSpecs %q", i, m[1], want.Text)
		}
		// A gate-on spec is in the gated context; the gate-off one says "disabled".
		gateOnLabel := at[0] > gatedContext[0]
		switch {
		case want.Gate == nil && (gateOnLabel || strings.Contains(m[1], "disabled")),
			want.Gate != nil && *want.Gate != gateOnLabel,
			want.Gate != nil && !*want.Gate && !strings.Contains(m[1], "disabled"):
			t.Errorf("spec %q: gate %v does not match the patch (label %t)", m[1], want.Gate, gateOnLabel)
		}
	}
}

func TestVerdict(t *testing.T) {
	same := map[string]State{"a": Passed, "b": Failed, "c": SkippedHere}
	for _, tc := range []struct {
		name    string
		runs    []Run
		wantErr []string
	}{
		{name: "agree, a failure on all three included",
			runs: []Run{run("stock", same), run("fork-gate-off", same), run("fork-gate-on", same)}},
		{name: "a spec differs",
			runs:    []Run{run("stock", same), run("fork-gate-on", map[string]State{"a": Failed, "b": Failed, "c": SkippedHere})},
			wantErr: []string{"a: stock passed, fork-gate-on failed"}},
		{name: "a spec missing",
			runs:    []Run{run("stock", same), run("fork-gate-on", map[string]State{"a": Passed, "b": Failed})},
			wantErr: []string{"c: stock skipped-here, fork-gate-on absent"}},
		{name: "alone, a failure",
			runs:    []Run{run("fork-gate-on", same)},
			wantErr: []string{"fork-gate-on: b:", "every spec must pass"}},
		{name: "alone, all pass",
			runs: []Run{run("fork-gate-on", map[string]State{"a": Passed, "c": SkippedHere})}},
		{name: "nothing ran",
			runs:    []Run{run("stock", map[string]State{"c": SkippedHere})},
			wantErr: []string{"stock: no spec passed"}},
		{name: "everything failed alike",
			runs:    []Run{run("stock", map[string]State{"a": Failed}), run("fork-gate-on", map[string]State{"a": Failed})},
			wantErr: []string{"stock: no spec passed", "fork-gate-on: no spec passed"}},
		{name: "stock alone, a failure",
			runs:    []Run{run("stock", same)},
			wantErr: []string{"stock: b:", "every spec must pass"}},
		{name: "own spec failed",
			runs: []Run{run("stock", same), func() Run {
				r := run("fork-gate-on", same)
				r.OwnSpecs = []SpecResult{{Name: "own", State: Failed, Reason: "timedout: Timed out after 120.000s."}}
				return r
			}()},
			wantErr: []string{"own spec own: timedout: Timed out after 120.000s."}},
		{name: "series: gate-on specs pass, the gate-off one skips itself",
			runs: []Run{seriesRun("DRAHandlePermanentDriverFailures=true", map[string]State{
				permanentSpec: Passed, restartSpec: Passed, disabledSpec: Skipped, untypedSpec: Passed})}},
		{name: "series: gate-off spec passes, gate-on ones skip themselves",
			runs: []Run{seriesRun("DRAHandlePermanentDriverFailures=false", map[string]State{
				permanentSpec: Skipped, restartSpec: Skipped, disabledSpec: Passed, untypedSpec: Passed})}},
		{name: "series: a restart spec skipped here on the host",
			runs: []Run{seriesRun("DRAHandlePermanentDriverFailures=true", map[string]State{permanentSpec: Passed, restartSpec: SkippedHere})}},
		{name: "series: a spec for the other gate value ran",
			runs:    []Run{seriesRun("DRAHandlePermanentDriverFailures=true", map[string]State{permanentSpec: Passed, disabledSpec: Passed})},
			wantErr: []string{"want skipped with DRAHandlePermanentDriverFailures=true"}},
		{name: "series: a gate-on spec skipped itself with the gate on",
			runs:    []Run{seriesRun("DRAHandlePermanentDriverFailures=true", map[string]State{permanentSpec: Skipped})},
			wantErr: []string{"own spec " + permanentSpec + ": skipped"}},
		{name: "series: a gate-independent spec failed",
			runs:    []Run{seriesRun("DRAHandlePermanentDriverFailures=false", map[string]State{untypedSpec: Failed})},
			wantErr: []string{"own spec " + untypedSpec + ": failed"}},
		{name: "the fork leaves more CDI specs than stock",
			runs: []Run{func() Run { r := run("stock", same); r.CDISpecsLeft = 4; return r }(),
				func() Run { r := run("fork-gate-off", same); r.CDISpecsLeft = 4; return r }(),
				func() Run { r := run("fork-gate-on", same); r.CDISpecsLeft = 5; return r }()},
			wantErr: []string{"fork-gate-on left 5 CDI specs behind, stock 4"}},
		{name: "own specs leave a CDI spec",
			runs:    []Run{func() Run { r := run("fork-gate-on", map[string]State{"a": Passed}); r.OwnCDISpecsLeft = 1; return r }()},
			wantErr: []string{"own specs left 1 CDI specs"}},
		{name: "run error and suite failure",
			runs: []Run{func() Run {
				r := run("stock", same)
				r.Error, r.SuiteFailures = "no report", []string{"SynchronizedBeforeSuite failed: system validation"}
				return r
			}()},
			wantErr: []string{"stock: no report", "system validation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verdict(tc.runs)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Verdict: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verdict: nil, want %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Verdict: %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	res := Results{Focus: Focus, Skips: SkipsFor(false), Runs: []Run{
		{Kubelet: "stock", Version: "Kubernetes v1.37.1", WallTime: 90 * time.Second, Specs: []SpecResult{
			{Name: "x must work", State: Passed, Duration: 3 * time.Second},
			{Name: "x must fail", State: Failed, Reason: "failed: boom", Location: "test/e2e_node/dra_test.go:1"},
		}},
		{Kubelet: "fork-gate-on", Gates: "G=true", Specs: []SpecResult{
			{Name: "x must work", State: Passed},
			{Name: "x must fail", State: Failed, Reason: "failed: boom"},
		}, OwnSpecs: []SpecResult{{Name: "own spec", State: Passed, Duration: 100 * time.Second}}},
	}}
	md := res.Markdown()
	for _, want := range []string{
		"| stock | (defaults) | 2 | 1 | 1 | 0 | 0 | 0 | - | 1m30s |",
		"| fork-gate-on | G=true | 2 | 1 | 1 | 0 | 0 | 0 | 1 of 1 | 0s |",
		"Every other kubelet agrees with stock spec by spec.",
		"| x must work | passed (3s) | passed (0s) |",
		"- stock: x must fail\n  - failed: boom (test/e2e_node/dra_test.go:1)",
		"- fork-gate-on: own spec: **passed** (100s)",
		"- must be removed on kubelet startup: " + noSystemd,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

func TestPathWithout(t *testing.T) {
	dir := t.TempDir()
	withSystemd, plain, farm := filepath.Join(dir, "usr-bin"), filepath.Join(dir, "local-bin"), filepath.Join(dir, "farm")
	for _, f := range []string{"usr-bin/systemd-run", "usr-bin/systemctl", "usr-bin/mount", "local-bin/go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path, err := pathWithout(farm, plain+":"+withSystemd+"::"+filepath.Join(dir, "missing"), "systemd-run", "systemctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", path)
	if !strings.HasPrefix(path, plain+":") {
		t.Errorf("PATH %s does not keep %s first", path, plain)
	}
	for name, wantFound := range map[string]bool{"systemd-run": false, "systemctl": false, "mount": true, "go": true} {
		_, err := exec.LookPath(name)
		if (err == nil) != wantFound {
			t.Errorf("looking up %s in %s: %v, want found=%t", name, path, err, wantFound)
		}
	}
}

func TestKubeletFlags(t *testing.T) {
	for _, k := range Kubelets("stock", "fork", "series") {
		flags := strings.Join(kubeletFlags(k), " ")
		if !strings.Contains(flags, "--system-cgroups= ") {
			t.Errorf("%s: flags %q keep the suite's /system cgroup", k.Name, flags)
		}
		hasGate := strings.Contains(flags, "DRAHandlePermanentDriverFailures=")
		if hasGate != (k.Name != "stock") {
			t.Errorf("%s: flags %q: the stock kubelet must get no fork gate (it would refuse to start), the fork an explicit one", k.Name, flags)
		}
	}
}

func TestNodeCheckPaths(t *testing.T) {
	n := Node{Mounts: []string{"/repo", "/out"}}
	for path, wantErr := range map[string]string{
		"/repo/_output/bin/kubelet": "",
		"/out/images/busybox.tar":   "",
		"/repo":                     "",
		"/repository/kubelet":       "outside the directories mounted",
		"/usr/bin/kubelet":          "outside the directories mounted",
		"_output/bin/kubelet":       "absolute paths",
	} {
		err := n.CheckPaths(path)
		if (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("CheckPaths(%s) = %v, want %q", path, err, wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("CheckPaths(%s): %v does not name the path", path, err)
		}
	}
}

func TestSuiteKubeletConfig(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	if err := os.WriteFile(base, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: cgroupfs\nevictionHard:\n  nodefs.available: 10%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := suiteKubeletConfig(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Strict: a key of the additions that upstream's base also sets would be a duplicate.
	var conf kubeletconfigv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &conf); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	if conf.CgroupDriver != "cgroupfs" || conf.EvictionHard["nodefs.available"] != "10%" {
		t.Errorf("upstream's base settings lost: %s", data)
	}
	if conf.FailCgroupV1 == nil || *conf.FailCgroupV1 || conf.FailSwapOn == nil || *conf.FailSwapOn {
		t.Errorf("cgroup v1 and swap settings missing: %s", data)
	}
	if conf.ImageGCHighThresholdPercent == nil || *conf.ImageGCHighThresholdPercent != 100 {
		t.Errorf("image GC not off (imported images cannot be pulled again): %s", data)
	}
}
