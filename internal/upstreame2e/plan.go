// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package upstreame2e runs upstream Kubernetes' own node e2e suite (test/e2e_node, built from
// the pristine KUBE_VERSION tree) against the stock kubelet and against the dra-failfast kubelet
// with its gate off and on, on this machine, and compares the results spec by spec: parity
// proven by tests no one here wrote. The suite starts its own etcd, API server and kubelet;
// this package gives it a container runtime (localcluster.StartRuntime) and the images it
// needs, hides systemd from it, and reads its Ginkgo JSON report.
package upstreame2e

import (
	"regexp"
	"strings"

	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// Focus selects upstream's DRA node specs: those of test/e2e_node/dra_test.go and the DRA specs
// of test/e2e/common/node that the node suite includes.
const Focus = `\[Feature:DynamicResourceAllocation\]`

// PrepareFocus selects the DRA specs that prepare and unprepare claims: the contexts "Resource
// Kubelet Plugin" and "Two resource Kubelet Plugins" of test/e2e_node/dra_test.go, the code paths
// the series changes. It leaves out "ResourceSlice" (plugin registration and ResourceSlice
// cleanup, untouched by the series) and "Resource Health" (device health streams): 10 of the 26
// minutes of a full run, which is what make test can afford (make test-upstream-e2e runs all).
const PrepareFocus = `\[Feature:DynamicResourceAllocation\].* (Resource Kubelet Plugin|Two resource Kubelet Plugins) `

// OwnSpecFocus selects the KEP-5322 specs that the patch series adds to test/e2e_node.
const OwnSpecFocus = `\[FeatureGate:` + string(failfastdra.DRAHandlePermanentDriverFailures) + `\]`

// Skip is a group of specs that cannot run on this machine, with the reason. Skips apply to
// every kubelet alike, so they never hide a difference.
type Skip struct {
	// Spec is a part of the specs' full text (containers and leaf), matched literally.
	Spec   string `json:"spec"`
	Reason string `json:"reason"`
}

// noSystemd is why the kubelet-restart specs cannot run on the host.
const noSystemd = "restarts the kubelet with `sudo systemctl`; this machine has no systemd as PID 1, " +
	"so the suite starts the kubelet as a plain process it cannot restart (they run in a systemd node: " +
	"make test-upstream-e2e)"

// restartSpecs are the DRA specs that restart the kubelet through systemd (restartKubelet,
// mustStopKubelet in upstream's test/e2e_node/util.go). They run only in a systemd node
// (Config.Systemd).
var restartSpecs = []string{
	"must register after Kubelet restart",
	"must recover and register after registration failure",
	"must recover and register after NotifyRegistrationStatus failure",
	"must process pod created when kubelet is not running",
	"must retry NodePrepareResources after Kubelet restart",
	"must retry NodeUnprepareResources after Kubelet restart",
	"must call NodeUnprepareResources for deleted pod after Kubelet restart",
	"must not call NodePrepareResources for deleted pod after Kubelet restart",
	"must run pod if NodePrepareResources is in progress for one plugin when Kubelet restarts",
	"must call NodeUnprepareResources again if it's in progress for one plugin when Kubelet restarts",
	"must be removed on kubelet startup",
	// The series' own (SeriesSpecs).
	"must not call NodePrepareResources again for a running pod after Kubelet restart",
	"must fail pod if NodePrepareResources fails permanently after Kubelet restart",
}

// nodeAllocatable is skipped everywhere: it belongs to the cluster e2e suite.
var nodeAllocatable = Skip{"DRA Node Allocatable Resources", "test/e2e/common/node: needs the alpha DRANodeAllocatableResources gate " +
	"(off by default) and deploys its driver as a ReplicaSet, which needs kube-controller-manager (the node " +
	"suite runs none) and a driver image from a registry; it belongs to the cluster e2e suite"}

// SkipsFor returns the specs skipped for every kubelet: in a systemd node (the suite can restart
// the kubelet) only the Node Allocatable specs, on the host also the kubelet-restart specs.
func SkipsFor(systemd bool) []Skip {
	if systemd {
		return []Skip{nodeAllocatable}
	}
	skips := make([]Skip, 0, len(restartSpecs)+1)
	for _, spec := range restartSpecs {
		skips = append(skips, Skip{spec, noSystemd})
	}
	return append(skips, nodeAllocatable)
}

// SkipRegexp is the --ginkgo.skip expression of skips: their texts, quoted.
func SkipRegexp(skips []Skip) string {
	alts := make([]string, len(skips))
	for i, s := range skips {
		alts[i] = regexp.QuoteMeta(s.Spec)
	}
	return strings.Join(alts, "|")
}

// skipReason returns the reason when the spec with this full text is in skips.
func skipReason(skips []Skip, name string) (string, bool) {
	for _, s := range skips {
		if strings.Contains(name, s.Spec) {
			return s.Reason, true
		}
	}
	return "", false
}

// Kubelet is one of the kubelets the suite runs against.
type Kubelet struct {
	// Name names the run in reports: stock, fork-gate-off, fork-gate-on, series-gate-off,
	// series-gate-on.
	Name string
	// Path is the kubelet binary.
	Path string
	// FeatureGates go to the kubelet (through --kubelet-flags): upstream's test binary does not
	// know the fork's gate, so they cannot go through the suite's --feature-gates (the series'
	// test binary does: Series).
	FeatureGates map[string]bool
	// OwnSpec: also run the patch series' own spec (OwnSpecFocus) with the patched test binary.
	OwnSpec bool
	// Series: the kubelet of the upstream-shaped series (upstream/patches/). Its suite is the
	// series' own e2e_node.test (Config.SeriesTestBinary): upstream's DRA specs, compared with
	// stock's, and the series' new ones (SeriesSpecs), reported as its own specs. That binary
	// knows the gate, so FeatureGates go to the suite too, and the new specs skip themselves
	// as the gate says (SeriesSpec.Gate).
	Series bool
}

// stockRun names the run the others are compared with.
const stockRun = "stock"

// Kubelets are the runs of make test-upstream-e2e, in order: stock, the fork's kubelet and the
// series' kubelet, each with the gate off and on.
func Kubelets(stock, fork, series string) []Kubelet {
	gate := string(failfastdra.DRAHandlePermanentDriverFailures)
	return []Kubelet{
		{Name: stockRun, Path: stock},
		{Name: "fork-gate-off", Path: fork, FeatureGates: map[string]bool{gate: false}},
		{Name: "fork-gate-on", Path: fork, FeatureGates: map[string]bool{gate: true}, OwnSpec: true},
		{Name: "series-gate-off", Path: series, FeatureGates: map[string]bool{gate: false}, Series: true},
		{Name: "series-gate-on", Path: series, FeatureGates: map[string]bool{gate: true}, Series: true},
	}
}

// SeriesSpec is one of the specs the series adds to test/e2e_node/dra_test.go (0005).
type SeriesSpec struct {
	// Text is the spec's text in the It call.
	Text string
	// Gate is the value of DRAHandlePermanentDriverFailures the spec needs (it skips itself
	// otherwise); nil: it runs either way.
	Gate *bool
}

var gateOn, gateOff = true, false

// SeriesSpecs are the series' node e2e specs; TestSeriesSpecsMatchPatch keeps the list equal
// to the It calls 0005 adds.
var SeriesSpecs = []SeriesSpec{
	{"must keep pod in pending state if NodePrepareResources fails for a claim without error type, and run it once it succeeds", nil},
	{"must retry NodePrepareResources if it fails permanently with DRAHandlePermanentDriverFailures disabled", &gateOff},
	// In the context "Permanent driver failures", gated as a whole.
	{"must fail pod if NodePrepareResources fails permanently", &gateOn},
	{"must fail pod only after NodeUnprepareResources succeeds if NodePrepareResources fails permanently", &gateOn},
	{"must unprepare the claims of a pod failed permanently with another instance of the plugin", &gateOn},
	{"must unprepare the claims of many pods failed permanently", &gateOn},
	{"must not call NodePrepareResources again for a running pod after Kubelet restart, nor fail it", &gateOn},
	{"must fail pod if NodePrepareResources fails permanently after Kubelet restart", &gateOn},
	{"must fail pod and unprepare the claims of both plugins if NodePrepareResources fails permanently for one plugin", &gateOn},
}

// seriesSpec returns the series' spec whose text the spec's full name holds (the longest: one
// text can be the start of another), if any.
func seriesSpec(name string) (SeriesSpec, bool) {
	var found SeriesSpec
	for _, s := range SeriesSpecs {
		if strings.Contains(name, s.Text) && len(s.Text) > len(found.Text) {
			found = s
		}
	}
	return found, found.Text != ""
}

// skippedByGate reports whether the series' spec named name skips itself with these gates (a
// Run's Gates).
func skippedByGate(name, gates string) bool {
	s, ok := seriesSpec(name)
	if !ok || s.Gate == nil {
		return false
	}
	on := strings.Contains(gates, string(failfastdra.DRAHandlePermanentDriverFailures)+"=true")
	return on != *s.Gate
}
