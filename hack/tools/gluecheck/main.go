// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gluecheck proves that two patches guard a piece of upstream glue
// with the same predicate. The fork's staging-patches/ 0006 and the
// upstream-shaped series' optional 0009 both make the pod worker reuse the
// status of a step that left nothing of the pod in the runtime; that glue is
// written in each tree's idiom (it cannot be rendered from this repository's
// packages), so hack/upstream.sh verify runs this check on it, the way
// wirecheck checks error_type's two declarations, and the two can never
// disagree.
//
// Usage: gluecheck FILE VAR PATCH PATCH
//
// In the lines each PATCH adds to FILE it finds the condition of the if
// statement that assigns VAR (VAR = ..., not nil) and the case clause whose body reads
// VAR (... = VAR), and compares them as sets of && conjuncts after two
// normalizations: the feature gate's spelling in each tree (gateSpellings),
// and len(a)+len(b) == 0 written as len(a) == 0 && len(b) == 0.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"slices"
	"strings"
)

// gateSpellings are the ways the two trees ask whether KEP-5322's gate is on:
// the fork through its package, the series through upstream's feature list.
var gateSpellings = map[string]bool{
	"failfastdra.Enabled()": true,
	"utilfeature.DefaultFeatureGate.Enabled(features.DRAHandlePermanentDriverFailures)": true,
}

const gate = "<DRAHandlePermanentDriverFailures on>"

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: gluecheck FILE VAR PATCH PATCH")
		os.Exit(2)
	}
	summary, err := compare(os.Args[1], os.Args[2], os.Args[3], os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gluecheck:", err)
		os.Exit(1)
	}
	fmt.Println(summary)
}

func compare(file, variable, patchA, patchB string) (string, error) {
	a, err := guards(file, variable, patchA)
	if err != nil {
		return "", err
	}
	b, err := guards(file, variable, patchB)
	if err != nil {
		return "", err
	}
	for _, g := range []struct {
		what   string
		ca, cb []string
	}{
		{"the condition that sets " + variable, a.set, b.set},
		{"the case that reads " + variable, a.use, b.use},
	} {
		if !slices.Equal(g.ca, g.cb) {
			return "", fmt.Errorf("%s differs:\n  %s: %s\n  %s: %s", g.what, patchA, strings.Join(g.ca, " && "), patchB, strings.Join(g.cb, " && "))
		}
	}
	return fmt.Sprintf("%s in %s is guarded alike: set when %s; read when %s", variable, file,
		strings.Join(a.set, " && "), strings.Join(a.use, " && ")), nil
}

// guard is a patch's two conditions, each as its sorted, normalized conjuncts.
type guard struct{ set, use []string }

func guards(file, variable, patch string) (guard, error) {
	data, err := os.ReadFile(patch)
	if err != nil {
		return guard{}, err
	}
	lines := addedLines(string(data), file)
	if len(lines) == 0 {
		return guard{}, fmt.Errorf("%s adds no line to %s", patch, file)
	}
	setAt := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, variable+" = ") && l != variable+" = nil" })
	useAt := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, " = "+variable) })
	if setAt < 0 || useAt < 0 {
		return guard{}, fmt.Errorf("%s: no assignment of %s or no read of it in the lines it adds to %s", patch, variable, file)
	}
	var g guard
	if g.set, err = conjuncts(enclosing(lines[:setAt], "if ", " {")); err != nil {
		return guard{}, fmt.Errorf("%s: the condition that sets %s: %w", patch, variable, err)
	}
	if g.use, err = conjuncts(enclosing(lines[:useAt], "case ", ":")); err != nil {
		return guard{}, fmt.Errorf("%s: the case that reads %s: %w", patch, variable, err)
	}
	return g, nil
}

// addedLines returns the trimmed lines that patch adds to file, comments left out.
func addedLines(patch, file string) []string {
	var lines []string
	inFile := false
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			inFile = strings.HasSuffix(l, " b/"+file)
		case inFile && strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
			if t := strings.TrimSpace(l[1:]); t != "" && !strings.HasPrefix(t, "//") {
				lines = append(lines, t)
			}
		}
	}
	return lines
}

// enclosing returns the condition of the last statement in lines that begins
// with open, up to the line that ends with end (a condition may span lines).
func enclosing(lines []string, open, end string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.HasPrefix(lines[i], open) {
			continue
		}
		var b strings.Builder
		for _, l := range lines[i:] {
			b.WriteString(l + " ")
			if strings.HasSuffix(l, end) {
				break
			}
		}
		return strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(b.String(), open)), end)
	}
	return ""
}

func conjuncts(condition string) ([]string, error) {
	if condition == "" {
		return nil, fmt.Errorf("not found")
	}
	expr, err := parser.ParseExpr(condition)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", condition, err)
	}
	var out []string
	var walk func(ast.Expr)
	walk = func(e ast.Expr) {
		inner := ast.Unparen(e)
		if b, ok := inner.(*ast.BinaryExpr); ok && b.Op == token.LAND {
			walk(b.X)
			walk(b.Y)
			return
		}
		if lens, ok := sumOfLensIsZero(inner); ok {
			for _, l := range lens {
				out = append(out, source(l)+" == 0")
			}
			return
		}
		s := source(e)
		if gateSpellings[s] {
			s = gate
		}
		out = append(out, s)
	}
	walk(expr)
	slices.Sort(out)
	return out, nil
}

// sumOfLensIsZero recognises len(a)+len(b)+... == 0 and returns the len calls.
func sumOfLensIsZero(e ast.Expr) ([]ast.Expr, bool) {
	b, ok := e.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return nil, false
	}
	if zero, ok := b.Y.(*ast.BasicLit); !ok || zero.Value != "0" {
		return nil, false
	}
	var lens []ast.Expr
	var collect func(ast.Expr) bool
	collect = func(x ast.Expr) bool {
		x = ast.Unparen(x)
		if sum, ok := x.(*ast.BinaryExpr); ok && sum.Op == token.ADD {
			return collect(sum.X) && collect(sum.Y)
		}
		if call, ok := x.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "len" {
				lens = append(lens, call)
				return true
			}
		}
		return false
	}
	if !collect(b.X) || len(lens) < 2 {
		return nil, false
	}
	return lens, true
}

func source(e ast.Expr) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, token.NewFileSet(), e)
	return b.String()
}
