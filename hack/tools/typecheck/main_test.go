// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/dra-failfast/dra-failfast/hack/tools/internal/filetree"
)

// writeModule writes a module example.test/m with the given files (name -> content) into a
// temporary directory and returns it.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.test/m\n\ngo 1.26\n"
	filetree.Write(t, dir, files)
	return dir
}

func TestCheck(t *testing.T) {
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	lib := "package lib\n\nfunc Answer() int { return 42 }\n"
	tests := []struct {
		name      string
		files     map[string]string
		tags      string
		withTests bool
		// wantErrors: substrings, one per expected error line, in sorted order; none: clean.
		wantErrors []string
	}{
		{
			name: "clean",
			files: map[string]string{
				"lib/lib.go": lib,
				"app/app.go": "package app\n\nimport \"example.test/m/lib\"\n\nvar X int = lib.Answer()\n",
			},
		},
		{
			name: "an error in a dependency names the dependency",
			files: map[string]string{
				"lib/lib.go": "package lib\n\nfunc Answer() int { return \"forty-two\" }\n",
				"app/app.go": "package app\n\nimport \"example.test/m/lib\"\n\nvar X = lib.Answer()\n",
			},
			wantErrors: []string{"example.test/m/lib: ", "lib.go:3:"},
		},
		{
			name: "a caller of something the dependency lacks",
			files: map[string]string{
				"lib/lib.go": lib,
				"app/app.go": "package app\n\nimport \"example.test/m/lib\"\n\nvar X = lib.Question()\n",
			},
			wantErrors: []string{"example.test/m/app: ", "undefined: lib.Question"},
		},
		{
			name: "tests are checked only when asked",
			files: map[string]string{
				"lib/lib.go":      lib,
				"lib/lib_test.go": "package lib\n\nvar _ string = Answer()\n",
				"app/app.go":      "package app\n\nimport \"example.test/m/lib\"\n\nvar X = lib.Answer()\n",
			},
			withTests:  true,
			wantErrors: []string{"example.test/m/lib [example.test/m/lib.test]: "},
		},
		{
			name: "build tags select the files",
			files: map[string]string{
				"lib/lib.go":     lib,
				"lib/old.go":     "//go:build before\n\npackage lib\n\nfunc Old() int { return Answer() }\n",
				"app/app.go":     "//go:build before\n\npackage app\n\nimport \"example.test/m/lib\"\n\nvar X = lib.Old()\n",
				"app/current.go": "//go:build !before\n\npackage app\n\nimport \"example.test/m/lib\"\n\nvar X = lib.Old()\n",
			},
			tags:       "before",
			wantErrors: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModule(t, tc.files)
			checked, problems, err := check(dir, tc.tags, tc.withTests, []string{"./..."})
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if checked == 0 {
				t.Fatal("no package checked")
			}
			if len(tc.wantErrors) == 0 {
				if len(problems) != 0 {
					t.Fatalf("want no errors, got %q", problems)
				}
				return
			}
			all := strings.Join(problems, "\n")
			for _, want := range tc.wantErrors {
				if !strings.Contains(all, want) {
					t.Errorf("errors %q lack %q", problems, want)
				}
			}
		})
	}
	t.Run("without the tag the tagged-out caller fails", func(t *testing.T) {
		dir := writeModule(t, map[string]string{
			"lib/lib.go":     lib,
			"lib/old.go":     "//go:build before\n\npackage lib\n\nfunc Old() int { return Answer() }\n",
			"app/current.go": "package app\n\nimport \"example.test/m/lib\"\n\nvar X = lib.Old()\n",
		})
		_, problems, err := check(dir, "", false, []string{"./..."})
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), "undefined: lib.Old") {
			t.Fatalf("want undefined: lib.Old, got %q", problems)
		}
	})
	t.Run("a pattern that matches nothing is an error that names it", func(t *testing.T) {
		dir := writeModule(t, map[string]string{"lib/lib.go": lib})
		_, problems, err := check(dir, "", false, []string{"./nothing/..."})
		if err == nil && !strings.Contains(strings.Join(problems, "\n"), "./nothing/...") {
			t.Fatalf("want an error naming ./nothing/..., got %q", problems)
		}
	})
}
