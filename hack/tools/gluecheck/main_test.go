// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// patchOf is a patch that adds lines to pkg/kubelet/pod_workers.go and a
// decoy test file with another condition.
func patchOf(caseCond, ifCond string) string {
	return `diff --git a/pkg/kubelet/pod_workers.go b/pkg/kubelet/pod_workers.go
--- a/pkg/kubelet/pod_workers.go
+++ b/pkg/kubelet/pod_workers.go
@@ -1,3 +1,9 @@
+	var nothingInRuntime *kubecontainer.PodStatus
+			case ` + caseCond + `:
+				// a comment
+				status = nothingInRuntime
 			default:
+			nothingInRuntime = nil
+			if ` + ifCond + ` {
+				nothingInRuntime = status
+			}
diff --git a/pkg/kubelet/pod_workers_test.go b/pkg/kubelet/pod_workers_test.go
+	if true {
+		nothingInRuntime = other
+	}
`
}

func TestCompare(t *testing.T) {
	const forkCase, forkIf = "nothingInRuntime != nil && update.WorkType != SyncPod",
		"failfastdra.Enabled() && err == nil && (isTerminal || update.WorkType == TerminatingPod) && status != nil && len(status.SandboxStatuses)+len(status.ContainerStatuses) == 0"
	for name, tc := range map[string]struct {
		caseCond, ifCond string
		wantErr          string
	}{
		"the fork's own": {caseCond: forkCase, ifCond: forkIf},
		"upstream's spelling, split lines and len checks": {caseCond: "update.WorkType != SyncPod && nothingInRuntime != nil",
			ifCond: "utilfeature.DefaultFeatureGate.Enabled(features.DRAHandlePermanentDriverFailures) &&\n+\t\t\t\terr == nil && (isTerminal || update.WorkType == TerminatingPod) &&\n+\t\t\t\tstatus != nil && len(status.SandboxStatuses) == 0 && len(status.ContainerStatuses) == 0"},
		"a conjunct missing": {caseCond: forkCase, ifCond: "failfastdra.Enabled() && (isTerminal || update.WorkType == TerminatingPod) && status != nil && len(status.SandboxStatuses)+len(status.ContainerStatuses) == 0",
			wantErr: "the condition that sets nothingInRuntime differs"},
		"another gate": {caseCond: forkCase, ifCond: strings.Replace(forkIf, "failfastdra.Enabled()", "utilfeature.DefaultFeatureGate.Enabled(features.SomethingElse)", 1),
			wantErr: "the condition that sets nothingInRuntime differs"},
		"the sandboxes only": {caseCond: forkCase, ifCond: strings.Replace(forkIf, "len(status.SandboxStatuses)+len(status.ContainerStatuses) == 0", "len(status.SandboxStatuses) == 0", 1),
			wantErr: "the condition that sets nothingInRuntime differs"},
		"reused on a sync too": {caseCond: "nothingInRuntime != nil", ifCond: forkIf,
			wantErr: "the case that reads nothingInRuntime differs"},
		"no reuse at all": {caseCond: forkCase, ifCond: "",
			wantErr: "the condition that sets nothingInRuntime: not found"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fork, other := filepath.Join(dir, "fork.patch"), filepath.Join(dir, "other.patch")
			otherPatch := patchOf(tc.caseCond, tc.ifCond)
			if tc.ifCond == "" {
				otherPatch = strings.Replace(otherPatch, "+\t\t\tif  {\n", "", 1)
				otherPatch = strings.Replace(otherPatch, "+\t\t\t}\n", "", 1)
			}
			for path, content := range map[string]string{fork: patchOf(forkCase, forkIf), other: otherPatch} {
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			summary, err := compare("pkg/kubelet/pod_workers.go", "nothingInRuntime", fork, other)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got error %v (summary %q), want one containing %q", err, summary, tc.wantErr)
			case err == nil && !strings.Contains(summary, gate):
				t.Fatalf("summary %q does not name the gate", summary)
			}
		})
	}
}
