// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command typecheck type-checks packages, their tests and everything they
// import from source, in one process, without compiling or linking: the
// compile errors a build would report, in a fraction of a cold build's time.
// make test runs it on the patched tree of every Kubernetes version but the
// default (hack/test-versions.sh typecheck), where a cold compile of the
// kubelet's graph would cost ten minutes per version.
//
// Usage, in the module or workspace to check:
//
//	typecheck [-tags TAGS] [-test] PACKAGE...
//
// It prints one line per error, names each package at fault, and exits 1
// when there is any; otherwise it prints how many packages it checked.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"golang.org/x/tools/go/packages"
)

func main() {
	tags := flag.String("tags", "", "comma-separated build tags, as go build takes them")
	tests := flag.Bool("test", false, "also check the packages' tests")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: typecheck [-tags TAGS] [-test] PACKAGE...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	checked, problems, err := check("", *tags, *tests, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "typecheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("typecheck: %d error(s) in %d package(s) checked\n", len(problems), checked)
		os.Exit(1)
	}
	fmt.Printf("typecheck: %d packages checked from source, no errors (%.0fs)\n", checked, time.Since(start).Seconds())
}

// check loads the packages matching patterns in dir (the current directory if
// empty) and all their dependencies from source, and returns how many packages
// it checked and every error, sorted.
func check(dir, tags string, tests bool, patterns []string) (int, []string, error) {
	cfg := &packages.Config{
		Dir: dir,
		// NeedSyntax with NeedDeps makes go/packages type-check every
		// dependency from source; without NeedExportFile it never asks go
		// list to compile one.
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
			packages.NeedImports | packages.NeedDeps | packages.NeedTypes | packages.NeedSyntax,
		Tests: tests,
	}
	if tags != "" {
		cfg.BuildFlags = []string{"-tags=" + tags}
	}
	roots, err := packages.Load(cfg, patterns...)
	if err != nil {
		return 0, nil, fmt.Errorf("loading %v: %w", patterns, err)
	}
	if len(roots) == 0 {
		return 0, nil, fmt.Errorf("no package matches %v", patterns)
	}
	checked := 0
	seen := map[string]bool{}
	var problems []string
	packages.Visit(roots, nil, func(p *packages.Package) {
		checked++
		for _, e := range p.Errors {
			line := fmt.Sprintf("%s: %s", p.ID, e)
			if !seen[line] {
				seen[line] = true
				problems = append(problems, line)
			}
		}
	})
	sort.Strings(problems)
	return checked, problems, nil
}
