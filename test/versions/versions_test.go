// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package versions checks how the scripts pick a Kubernetes version
// (hack/lib.sh) and that the series' hand-ported patches stay in step with
// the series (docs/versions.md).
package versions

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// libSh prints the variables named in vars after sourcing hack/lib.sh with
// KUBE_VERSION set to version ("" for the default), as a script named script
// would see them.
func libSh(t *testing.T, script, version string, vars ...string) (string, error) {
	t.Helper()
	var echo strings.Builder
	for _, v := range vars {
		echo.WriteString(`echo "` + v + `=${` + v + `-}"; `)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, script)
	body := "#!/usr/bin/env bash\nsource " + filepath.Join(repoRoot(t), "hack", "lib.sh") + "\n" + echo.String() + "\n"
	if script == "upstream.sh" || script == "test-series.sh" {
		// As those scripts do: the upstream-shaped series' version (hack/lib.sh, SERIES_KUBE_VERSION).
		body = "#!/usr/bin/env bash\nSERIES=upstream\nsource " + filepath.Join(repoRoot(t), "hack", "lib.sh") + "\n" + echo.String() + "\n"
	}
	if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", path)
	// The variables lib.sh sets come from it alone, not from the environment of the test.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCAL_CLUSTER_") && !strings.HasPrefix(kv, "KUBE_VERSION=") && !strings.HasPrefix(kv, "GOTOOLCHAIN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "KUBE_VERSION="+version)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func supportedVersions(t *testing.T) (def string, all []string) {
	t.Helper()
	out, err := libSh(t, "test-versions.sh", "", "DEFAULT_KUBE_VERSION", "SUPPORTED_KUBE_VERSIONS[*]")
	if err != nil {
		t.Fatalf("hack/lib.sh: %v\n%s", err, out)
	}
	def = regexp.MustCompile(`(?m)^DEFAULT_KUBE_VERSION=(\S+)$`).FindStringSubmatch(out)[1]
	all = strings.Fields(regexp.MustCompile(`(?m)^SUPPORTED_KUBE_VERSIONS\[\*\]=(.*)$`).FindStringSubmatch(out)[1])
	return def, all
}

func minor(version string) int {
	var major, m, patch int
	if _, err := fmt.Sscanf(version, "v%d.%d.%d", &major, &m, &patch); err != nil {
		return -1
	}
	return m
}

// TestGoTags: the build tags of an older tree name every minor it lacks, up
// to the default's; the default and newer trees have none. A newer tree may
// need a newer Go toolchain.
func TestGoTags(t *testing.T) {
	def, all := supportedVersions(t)
	if len(all) < 2 {
		t.Fatalf("supported versions %v: want the default and older minors", all)
	}
	for _, version := range all {
		t.Run(version, func(t *testing.T) {
			out, err := libSh(t, "build-kubelet.sh", version, "KUBE_GO_TAGS", "KUBE_STAGING_VERSION", "GOTOOLCHAIN")
			if err != nil {
				t.Fatalf("hack/lib.sh: %v\n%s", err, out)
			}
			var want []string
			for m := minor(version) + 1; m <= minor(def); m++ {
				want = append(want, "dra_failfast_before_1_"+strconv.Itoa(m))
			}
			if !strings.Contains(out, "KUBE_GO_TAGS="+strings.Join(want, ",")+"\n") {
				t.Errorf("KUBE_GO_TAGS for %s: got\n%s\nwant %v", version, out, want)
			}
			if !strings.Contains(out, "KUBE_STAGING_VERSION=v0."+strings.TrimPrefix(version, "v1.")+"\n") {
				t.Errorf("KUBE_STAGING_VERSION for %s: got\n%s", version, out)
			}
			// 1.38's go.mod says go 1.27: its trees build with the toolchain the
			// go command fetches, the others with the machine's Go.
			toolchain := "local"
			if minor(version) >= 38 {
				toolchain = "go1.27.3"
			}
			if !strings.Contains(out, "GOTOOLCHAIN="+toolchain+"\n") {
				t.Errorf("GOTOOLCHAIN for %s: got\n%s\nwant %s", version, out, toolchain)
			}
		})
	}
}

// TestRefusals: a version that is not supported stops every script, and a
// script that runs on the default version only stops on another one, naming
// itself and the version, before it does anything.
func TestRefusals(t *testing.T) {
	def, all := supportedVersions(t)
	var older string
	for _, v := range all {
		if v != def {
			older = v
		}
	}
	for _, tc := range []struct {
		script, version, want string
	}{
		{"build-kubelet.sh", "v1.34.0", "KUBE_VERSION=v1.34.0 is not supported by this fork"},
		{"test-kind.sh", older, "KUBE_VERSION=" + older + ": hack/test-kind.sh runs on " + def + " only"},
		{"test-series.sh", older, "KUBE_VERSION=" + older + ": the upstream-shaped series is written against "},
		{"upstream.sh", older, "KUBE_VERSION=" + older + ": the upstream-shaped series is written against "},
		{"verify-adoption.sh", older, "hack/verify-adoption.sh runs on " + def + " only"},
	} {
		out, err := libSh(t, tc.script, tc.version, "KUBE_VERSION")
		if err == nil || !strings.Contains(out, tc.want) || strings.Contains(out, "KUBE_VERSION="+tc.version+"\n") {
			t.Errorf("%s with KUBE_VERSION=%s: err %v, output\n%s\nwant a refusal containing %q", tc.script, tc.version, err, out, tc.want)
		}
	}
	// The upstream-shaped series' scripts take their own version when none is asked for.
	for _, script := range []string{"upstream.sh", "test-series.sh"} {
		if out, err := libSh(t, script, "", "KUBE_VERSION"); err != nil || strings.Contains(out, "KUBE_VERSION="+def+"\n") || !strings.Contains(out, "KUBE_VERSION=v1.") {
			t.Errorf("%s without KUBE_VERSION: err %v, output\n%s\nwant it to run on the series' version, not %s", script, err, out, def)
		}
	}
	for _, script := range []string{"build-kubelet.sh", "verify-patches.sh", "test-upstream.sh", "test-versions.sh", "build.sh", "build-cluster-binaries.sh", "demo.sh",
		"kind-image.sh", "kind-up.sh", "kind-down.sh", "kind-demo.sh", "kind-deploy-driver.sh", "engine.sh",
		"release.sh", "verify-release.sh", "test-upstream-e2e.sh", "bench.sh"} {
		if out, err := libSh(t, script, older, "KUBE_VERSION"); err != nil || !strings.Contains(out, "KUBE_VERSION="+older+"\n") {
			t.Errorf("%s with KUBE_VERSION=%s: err %v, output\n%s\nwant it to run", script, older, err, out)
		}
	}
}

// TestPortsFollowTheSeries: every hand-ported patch replaces a patch of the
// series under the same name, for the minor of a supported version other
// than the default, and was made from that patch as it is now (its
// Ported-from trailer, which hack/tree.sh checks too).
func TestPortsFollowTheSeries(t *testing.T) {
	def, all := supportedVersions(t)
	minors := map[string]bool{}
	for _, v := range all {
		if v != def {
			minors[fmt.Sprintf("v1.%d", minor(v))] = true // v1.38.0-beta.0's too
		}
	}
	root := repoRoot(t)
	ports, err := filepath.Glob(filepath.Join(root, "staging-patches", "ports", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range ports {
		rel, _ := filepath.Rel(root, port)
		if !minors[filepath.Base(filepath.Dir(port))] {
			t.Errorf("%s: not the minor of a supported version other than the default (%v)", rel, all)
		}
		patch, err := os.ReadFile(filepath.Join(root, "staging-patches", filepath.Base(port)))
		if err != nil {
			t.Errorf("%s replaces no patch of the series: %v", rel, err)
			continue
		}
		ported, err := os.ReadFile(port)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("\nPorted-from: sha256:%x\n", sha256.Sum256(patch))
		if !strings.Contains(string(ported), want) {
			t.Errorf("%s: no %q: it was made from another version of the patch; port it again (docs/versions.md)", rel, strings.TrimSpace(want))
		}
	}
}

// TestControlPlaneEnv: a local cluster of another version takes that
// version's binaries, and a 1.36 or 1.35 control plane serves
// DeviceTaintRules (the driver library stops without them); the default
// version needs nothing.
func TestControlPlaneEnv(t *testing.T) {
	def, all := supportedVersions(t)
	for _, version := range all {
		t.Run(version, func(t *testing.T) {
			out, err := libSh(t, "demo.sh", version, "OUTPUT_DIR", "LOCAL_CLUSTER_BIN_DIR", "LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES", "LOCAL_CLUSTER_RUNTIME_CONFIG")
			if err != nil {
				t.Fatalf("hack/lib.sh: %v\n%s", err, out)
			}
			want := []string{"LOCAL_CLUSTER_BIN_DIR=\n", "LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES=\n", "LOCAL_CLUSTER_RUNTIME_CONFIG=\n"}
			if version != def {
				output := regexp.MustCompile(`(?m)^OUTPUT_DIR=(.*)$`).FindStringSubmatch(out)[1]
				want[0] = "LOCAL_CLUSTER_BIN_DIR=" + output + "/bin/" + version + "\n"
			}
			switch {
			case strings.HasPrefix(version, "v1.36."):
				want[1] = "LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES=DRADeviceTaintRules=true\n"
				want[2] = "LOCAL_CLUSTER_RUNTIME_CONFIG=resource.k8s.io/v1beta2=true\n"
			case strings.HasPrefix(version, "v1.35."):
				want[1] = "LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES=DRADeviceTaints=true,DRADeviceTaintRules=true\n"
				want[2] = "LOCAL_CLUSTER_RUNTIME_CONFIG=resource.k8s.io/v1alpha3=true\n"
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("want %q in\n%s", w, out)
				}
			}
		})
	}
}
