// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSpecFile(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"create with --bundle":        {[]string{"--root", "/run/x", "--log", "l", "create", "--bundle", "/b", "id"}, "/b/config.json"},
		"create with -b":              {[]string{"create", "-b", "/b", "id"}, "/b/config.json"},
		"create with --bundle=":       {[]string{"--systemd-cgroup", "create", "--bundle=/b", "id"}, "/b/config.json"},
		"run in the bundle directory": {[]string{"run", "id"}, "config.json"},
		"exec with --process":         {[]string{"--root", "/r", "exec", "--process", "/p.json", "--detach", "id"}, "/p.json"},
		"exec with -p":                {[]string{"exec", "-p", "/p.json", "id"}, "/p.json"},
		"exec from the command line":  {[]string{"exec", "id", "sh"}, ""},
		"start":                       {[]string{"--root", "/r", "start", "id"}, ""},
		"delete":                      {[]string{"delete", "--force", "id"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := specFile(tc.args); got != tc.want {
				t.Errorf("specFile(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}

// TestRewriteSpec: only the missing capabilities and the rlimits go, in a bundle's config.json
// (process nested) and in an exec process file (process at the top); everything else stays.
func TestRewriteSpec(t *testing.T) {
	process := map[string]any{
		"args":    []any{"/sbin/init"},
		"rlimits": []any{map[string]any{"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576}},
		"capabilities": map[string]any{
			"bounding":  []any{"CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"},
			"effective": []any{"CAP_SYS_RESOURCE"},
		},
	}
	want := map[string]any{
		"args": []any{"/sbin/init"},
		"capabilities": map[string]any{
			"bounding":  []any{"CAP_CHOWN", "CAP_SYS_ADMIN"},
			"effective": []any{},
		},
	}
	for name, tc := range map[string]struct {
		doc  map[string]any
		want map[string]any
	}{
		"bundle config":   {map[string]any{"ociVersion": "1.2.0", "process": process}, map[string]any{"ociVersion": "1.2.0", "process": want}},
		"exec process":    {process, want},
		"nothing to drop": {map[string]any{"process": map[string]any{"args": []any{"x"}}}, map[string]any{"process": map[string]any{"args": []any{"x"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.json")
			raw, err := json.Marshal(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := rewriteSpec(file, []string{"CAP_SYS_RESOURCE"}); err != nil {
				t.Fatalf("rewriteSpec: %v", err)
			}
			var got map[string]any
			raw, err = os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			wantRaw, _ := json.Marshal(tc.want)
			var wantDoc map[string]any
			_ = json.Unmarshal(wantRaw, &wantDoc)
			if !reflect.DeepEqual(got, wantDoc) {
				t.Errorf("rewritten spec = %s, want %s", raw, wantRaw)
			}
			if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("file mode changed: %v %v", info.Mode(), err)
			}
		})
	}
	if err := rewriteSpec(filepath.Join(t.TempDir(), "missing.json"), nil); err == nil {
		t.Error("rewriteSpec of a missing file succeeded")
	}
}

func TestMissingCapabilities(t *testing.T) {
	missing, err := missingCapabilities()
	if err != nil {
		t.Fatalf("missingCapabilities: %v", err)
	}
	for _, name := range missing {
		if name == "CAP_CHOWN" {
			t.Errorf("CAP_CHOWN reported missing: every root bounding set has it (%v)", missing)
		}
	}
}
