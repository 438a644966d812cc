// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dra-failfast/dra-failfast/hack/tools/internal/filetree"
)

const testBoilerplate = "/*\nCopyright The Kubernetes Authors.\n*/\n"

const header = "// Copyright 2026 The dra-failfast Authors.\n// SPDX-License-Identifier: Apache-2.0\n\n"

func TestGenerate(t *testing.T) {
	sources := map[string]string{
		"api/text/text.go": header + `package text

// Clean returns s cleaned, cut by Cut.
func Clean(s string) string { return Cut(s) }

// Cut cuts.
func Cut(s string) string { return s }

// Uses of the package's own names that are a rename's result are meant.
var cutClean = clean("x")

// Kinds are keyed by names that are renamed; r.Clean is not this package's Clean.
var Kinds = map[string]int{Clean("a"): 1}

type kindNames map[int]string

var names = kindNames{Rank: "first"}

// Rank is a constant.
const Rank = 1
`,
		"pkg/dra/result.go": header + `package dra

import (
	"fmt"

	"github.com/dra-failfast/dra-failfast/api/text"
	"github.com/dra-failfast/dra-failfast/api/wire"
)

// Result is text.Clean's answer.
type Result struct {
	// Result is a field named like the type: it stays, its comment too.
	Result string
	Kind   wire.Kind
}

// Result is a method named like the type: it stays.
func (r Result) Result() string { return r.Result }

func describe(s string) Result {
	return Result{Result: fmt.Sprint(text.Clean(s)), Kind: wire.Permanent}
}
`,
	}
	sources["pkg/dra/only.go"] = header + `package dra

import (
	// text.Clean cleans.
	"github.com/dra-failfast/dra-failfast/api/text"
)

var cleaned = text.Clean("x")
`
	manifest := `# test
file pkg/dra/only.go    pkg/kubelet/cm/dra/only.go    dra
file api/text/text.go   pkg/kubelet/cm/dra/text.go    dra
file pkg/dra/result.go  pkg/kubelet/cm/dra/result.go  dra
import github.com/dra-failfast/dra-failfast/api/text  .
import github.com/dra-failfast/dra-failfast/api/wire  k8s.io/kubelet/pkg/apis/dra/v1
rename Clean  clean
rename Result claimResult
rename Rank   rank
`
	wantText := testBoilerplate + `
package dra

// clean returns s cleaned, cut by Cut.
func clean(s string) string { return Cut(s) }

// Cut cuts.
func Cut(s string) string { return s }

// Uses of the package's own names that are a rename's result are meant.
var cutClean = clean("x")

// Kinds are keyed by names that are renamed; r.Clean is not this package's clean.
var Kinds = map[string]int{clean("a"): 1}

type kindNames map[int]string

var names = kindNames{rank: "first"}

// rank is a constant.
const rank = 1
`
	wantResult := testBoilerplate + `
package dra

import (
	"fmt"

	wire "k8s.io/kubelet/pkg/apis/dra/v1"
)

// claimResult is clean's answer.
type claimResult struct {
	// Result is a field named like the type: it stays, its comment too.
	Result string
	Kind   wire.Kind
}

// Result is a method named like the type: it stays.
func (r claimResult) Result() string { return r.Result }

func describe(s string) claimResult {
	return claimResult{Result: fmt.Sprint(clean(s)), Kind: wire.Permanent}
}
`
	repo, tree := t.TempDir(), t.TempDir()
	filetree.Write(t, repo, sources)
	filetree.Write(t, repo, map[string]string{"generated.txt": manifest})
	filetree.Write(t, tree, map[string]string{"hack/boilerplate/boilerplate.go.txt": testBoilerplate})
	manifestPath := filepath.Join(repo, "generated.txt")

	// -existing: nothing is in the tree yet, nothing is written.
	if _, err := run(manifestPath, repo, tree, false, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tree, "pkg/kubelet/cm/dra/text.go")); !os.IsNotExist(err) {
		t.Fatalf("-existing wrote a file that was not in the tree: %v", err)
	}
	differ, err := run(manifestPath, repo, tree, true, false)
	if err != nil || len(differ) != 3 {
		t.Fatalf("-check before writing: want 3 missing files, have %q, %v", differ, err)
	}

	if _, err := run(manifestPath, repo, tree, false, false); err != nil {
		t.Fatal(err)
	}
	wantOnly := testBoilerplate + `
package dra

var cleaned = clean("x")
`
	for name, want := range map[string]string{"pkg/kubelet/cm/dra/text.go": wantText, "pkg/kubelet/cm/dra/result.go": wantResult, "pkg/kubelet/cm/dra/only.go": wantOnly} {
		have, err := os.ReadFile(filepath.Join(tree, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(have) != want {
			t.Errorf("%s:\n--- have\n%s\n--- want\n%s", name, have, want)
		}
	}
	if differ, err := run(manifestPath, repo, tree, true, false); err != nil || len(differ) != 0 {
		t.Fatalf("-check after writing: want no difference, have %q, %v", differ, err)
	}

	// An edit of the series' copy is found.
	filetree.Write(t, tree, map[string]string{"pkg/kubelet/cm/dra/text.go": wantText + "\n// edited\n"})
	differ, err = run(manifestPath, repo, tree, true, false)
	if err != nil || len(differ) != 1 || !strings.Contains(differ[0], "pkg/kubelet/cm/dra/text.go") {
		t.Fatalf("-check after an edit of the copy: have %q, %v", differ, err)
	}
}

func TestGenerateRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		source, wantErr string
	}{
		"an import of this repository that is not mapped": {
			source:  header + "package dra\n\nimport \"github.com/dra-failfast/dra-failfast/api/other\"\n\nvar _ = other.X\n",
			wantErr: "imports github.com/dra-failfast/dra-failfast/api/other, which upstream/generated.txt does not map",
		},
		"a comment that names this repository": {
			source:  header + "package dra\n\n// X is dra-failfast's.\nvar X = 1\n",
			wantErr: "a comment names this repository",
		},
		"no license header": {
			source:  "package dra\n\nvar X = 1\n",
			wantErr: "no license header",
		},
		"a rename that a name of the source would capture": {
			source:  header + "package dra\n\nfunc F() int { clean := 1; return clean + Clean() }\n\nfunc Clean() int { return 0 }\n",
			wantErr: "clean is declared here",
		},
		"an unnamed import of a major version path": {
			source:  header + "package dra\n\nimport \"github.com/dra-failfast/dra-failfast/api/v2\"\n\nvar _ = api.X\n",
			wantErr: "name the import of github.com/dra-failfast/dra-failfast/api/v2",
		},
		"a source that does not parse": {
			source:  header + "package dra\n\nvar X =\n",
			wantErr: "expected operand",
		},
	} {
		t.Run(name, func(t *testing.T) {
			repo, tree := t.TempDir(), t.TempDir()
			filetree.Write(t, repo, map[string]string{
				"src.go":        tc.source,
				"generated.txt": "file src.go pkg/dra/src.go dra\nimport github.com/dra-failfast/dra-failfast/api/v2 .\nrename Clean clean\n",
			})
			filetree.Write(t, tree, map[string]string{"hack/boilerplate/boilerplate.go.txt": testBoilerplate})
			_, err := run(filepath.Join(repo, "generated.txt"), repo, tree, false, false)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want an error with %q, have %v", tc.wantErr, err)
			}
		})
	}
}

func TestReadManifestRefuses(t *testing.T) {
	for name, manifest := range map[string]string{
		"no file":              "import a .\n",
		"file without package": "file a b\n",
		"rename of a non-name": "file a b c\nrename a-b c\n",
		"an unknown directive": "file a b c\ncopy a b\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "generated.txt")
			filetree.Write(t, filepath.Dir(path), map[string]string{"generated.txt": manifest})
			if _, err := readManifest(path); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
