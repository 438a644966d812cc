// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command upstreamgen writes the files of the upstream-shaped series
// (upstream/) that come from this repository's packages, so that the fork and
// the series run the same code (docs/upstream.md, "One source of truth").
//
// Usage: upstreamgen [-check] [-existing] -manifest FILE -repo DIR -tree DIR
//
// The manifest (upstream/generated.txt) has one directive per line:
//
//	file SOURCE TARGET PACKAGE   SOURCE (in -repo) becomes TARGET (in -tree), package PACKAGE
//	import PATH .                PATH's identifiers are the target package's own: the
//	                             import goes, its qualifier is dropped
//	import PATH NEWPATH          the import is rewritten to NEWPATH, its local name kept
//	rename OLD NEW               the top-level identifier OLD is NEW in the target
//
// Every generated file starts with the tree's hack/boilerplate/boilerplate.go.txt
// instead of this repository's license header, and is gofmt'ed. An import of
// this repository that no directive maps is an error, as is a source that does
// not parse. With -check nothing is written: every target that differs from
// what would be written is reported and the exit status is 1. With -existing
// only targets that exist in the tree are considered (hack/upstream.sh runs it
// after each commit of the series, where a file exists from the commit that
// adds it on).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ownModulePrefix: imports below it must be mapped by the manifest.
const ownModulePrefix = "github.com/dra-failfast/"

type fileRule struct{ source, target, pkg string }

type manifest struct {
	files   []fileRule
	imports map[string]string // import path -> "." or a new path
	renames map[string]string
}

func main() {
	check := flag.Bool("check", false, "report targets that differ from what would be written, write nothing")
	existing := flag.Bool("existing", false, "only targets that exist in the tree")
	manifestPath := flag.String("manifest", "", "the manifest (upstream/generated.txt)")
	repo := flag.String("repo", ".", "this repository's root")
	tree := flag.String("tree", "", "the Kubernetes tree to write into")
	flag.Parse()
	if *manifestPath == "" || *tree == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: upstreamgen [-check] [-existing] -manifest FILE -repo DIR -tree DIR")
		os.Exit(2)
	}
	differ, err := run(*manifestPath, *repo, *tree, *check, *existing)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamgen:", err)
		os.Exit(1)
	}
	if len(differ) > 0 {
		fmt.Fprintf(os.Stderr, "upstreamgen: %d file(s) of the series are not what this repository's sources generate (make upstream-series):\n", len(differ))
		for _, d := range differ {
			fmt.Fprintln(os.Stderr, "  "+d)
		}
		os.Exit(1)
	}
}

// run generates every target of the manifest; with check it returns the
// targets that differ instead of writing them.
func run(manifestPath, repo, tree string, check, existing bool) (differ []string, err error) {
	m, err := readManifest(manifestPath)
	if err != nil {
		return nil, err
	}
	boilerplate, err := os.ReadFile(filepath.Join(tree, "hack", "boilerplate", "boilerplate.go.txt"))
	if err != nil {
		return nil, fmt.Errorf("the tree's license boilerplate: %w", err)
	}
	sources := make([][]byte, len(m.files))
	fields := map[string]bool{} // struct field names declared in any source
	for i, f := range m.files {
		if sources[i], err = os.ReadFile(filepath.Join(repo, f.source)); err != nil {
			return nil, err
		}
		if file, err := parser.ParseFile(token.NewFileSet(), f.source, sources[i], parser.SkipObjectResolution); err == nil {
			ast.Inspect(file, func(n ast.Node) bool {
				if st, ok := n.(*ast.StructType); ok {
					for _, field := range st.Fields.List {
						for _, name := range field.Names {
							fields[name.Name] = true
						}
					}
				}
				return true
			})
		}
	}
	for i, f := range m.files {
		targetPath := filepath.Join(tree, f.target)
		current, readErr := os.ReadFile(targetPath)
		if errors.Is(readErr, os.ErrNotExist) && existing {
			continue
		}
		out, err := generate(f.source, sources[i], f.pkg, m, boilerplate, fields)
		if err != nil {
			return nil, err
		}
		switch {
		case check && readErr != nil:
			differ = append(differ, f.target+": missing (from "+f.source+"; add it to the commit it belongs to)")
		case check && !bytes.Equal(current, out):
			differ = append(differ, f.target+": differs from "+f.source+"'s rendering")
		case !check:
			if err := os.MkdirAll(filepath.Dir(targetPath), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(targetPath, out, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return differ, nil
}

func readManifest(name string) (*manifest, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	m := &manifest{imports: map[string]string{}, renames: map[string]string{}}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; scanner.Scan(); line++ {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		bad := func(want string) error {
			return fmt.Errorf("%s:%d: want %q, have %q", name, line, want, scanner.Text())
		}
		switch fields[0] {
		case "file":
			if len(fields) != 4 {
				return nil, bad("file SOURCE TARGET PACKAGE")
			}
			m.files = append(m.files, fileRule{source: fields[1], target: fields[2], pkg: fields[3]})
		case "import":
			if len(fields) != 3 {
				return nil, bad("import PATH . | import PATH NEWPATH")
			}
			m.imports[fields[1]] = fields[2]
		case "rename":
			if len(fields) != 3 || !token.IsIdentifier(fields[1]) || !token.IsIdentifier(fields[2]) {
				return nil, bad("rename OLD NEW")
			}
			m.renames[fields[1]] = fields[2]
		default:
			return nil, fmt.Errorf("%s:%d: unknown directive %q", name, line, fields[0])
		}
	}
	if len(m.files) == 0 {
		return nil, fmt.Errorf("%s: no file directive", name)
	}
	return m, scanner.Err()
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// apply makes the edits, which must not overlap, except that an edit inside
// a removed range (text "") goes with it.
func apply(src []byte, edits []edit) ([]byte, error) {
	slices.SortStableFunc(edits, func(a, b edit) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end // the enclosing edit first
	})
	var out []byte
	pos := 0
	for i, e := range edits {
		if e.start < pos {
			if enclosing := edits[i-1]; enclosing.text == "" && e.end <= enclosing.end {
				continue
			}
			return nil, fmt.Errorf("overlapping edits at byte %d", e.start)
		}
		out = append(append(out, src[pos:e.start]...), e.text...)
		pos = e.end
	}
	return append(out, src[pos:]...), nil
}

// generate renders one source file as the series' file: header, package
// clause, imports and identifiers rewritten, gofmt'ed.
func generate(name string, src []byte, pkg string, m *manifest, boilerplate []byte, fields map[string]bool) ([]byte, error) {
	fset := token.NewFileSet()
	// With object resolution: an identifier declared in this file has an
	// Obj, a use of a name declared elsewhere in the package has none.
	file, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	offset := func(p token.Pos) int { return fset.Position(p).Offset }
	var edits []edit

	// The license header (the comment group that holds the SPDX line) gives
	// way to the tree's boilerplate; the package clause takes the target's name.
	header := -1
	for i, group := range file.Comments {
		if group.Pos() < file.Package && strings.Contains(group.Text(), "SPDX-License-Identifier") {
			header = i
		}
	}
	if header < 0 {
		return nil, fmt.Errorf("%s: no license header", name)
	}
	group := file.Comments[header]
	end := offset(group.End())
	for end < len(src) && src[end] == '\n' {
		end++
	}
	edits = append(edits,
		edit{offset(group.Pos()), end, strings.TrimRight(string(boilerplate), "\n") + "\n\n"},
		edit{offset(file.Name.Pos()), offset(file.Name.End()), pkg})

	// Imports: this repository's packages are mapped or refused; an import
	// declaration left with no import goes as a whole.
	dropped := map[string]bool{} // local names whose qualifier goes
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.IMPORT {
			continue
		}
		var specEdits []edit
		kept := 0
		for _, s := range gen.Specs {
			spec := s.(*ast.ImportSpec)
			importPath, _ := strconv.Unquote(spec.Path.Value)
			target, mapped := m.imports[importPath]
			if !mapped {
				if strings.HasPrefix(importPath, ownModulePrefix) {
					return nil, fmt.Errorf("%s: imports %s, which upstream/generated.txt does not map", name, importPath)
				}
				kept++
				continue
			}
			local := path.Base(importPath)
			if spec.Name != nil {
				local = spec.Name.Name
			} else if majorVersion.MatchString(local) {
				return nil, fmt.Errorf("%s: name the import of %s: its package name is not its path's last element", name, importPath)
			}
			if target == "." {
				dropped[local] = true
				specEdits = append(specEdits, edit{offset(spec.Pos()), offset(spec.End()), ""})
				continue
			}
			kept++
			text := strconv.Quote(target)
			if path.Base(target) != local {
				text = local + " " + text
			}
			specEdits = append(specEdits, edit{offset(spec.Pos()), offset(spec.End()), text})
		}
		if kept == 0 {
			specEdits = []edit{{offset(gen.Pos()), offset(gen.End()), ""}}
		}
		edits = append(edits, specEdits...)
	}

	// Identifiers: qualifiers of dropped imports go; renames apply to the
	// package's own top-level names wherever they are used (a dropped
	// qualifier's selector included), never to a field, a method or a
	// selector of another package.
	notRenamed := map[*ast.Ident]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			if !ok || !dropped[x.Name] {
				notRenamed[n.Sel] = true
				break
			}
			edits = append(edits, edit{offset(x.Pos()), offset(n.Sel.Pos()), ""})
			notRenamed[x] = true
		case *ast.StructType:
			markNames(n.Fields, notRenamed)
		case *ast.InterfaceType:
			markNames(n.Methods, notRenamed)
		case *ast.FuncDecl:
			if n.Recv != nil {
				notRenamed[n.Name] = true
			}
		case *ast.CompositeLit:
			// A key is a field name unless the literal is a map, slice or
			// array, or the name is no field's (a named map type's keys).
			switch n.Type.(type) {
			case *ast.MapType, *ast.ArrayType:
				break
			default:
				for _, elt := range n.Elts {
					if kv, ok := elt.(*ast.KeyValueExpr); ok {
						if key, ok := kv.Key.(*ast.Ident); ok && fields[key.Name] {
							notRenamed[key] = true
						}
					}
				}
			}
		}
		return true
	})
	newNames := map[string]bool{}
	for _, newName := range m.renames {
		newNames[newName] = true
	}
	var captured error
	ast.Inspect(file, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok || id == file.Name || notRenamed[id] {
			return true
		}
		// A use of a new name declared elsewhere is meant: the target
		// package declares it (a rename's result). One declared here would
		// capture the renamed uses.
		if newNames[id.Name] && id.Obj != nil && captured == nil {
			captured = fmt.Errorf("%s:%d: %s is declared here; a rename to it would be captured", name, fset.Position(id.Pos()).Line, id.Name)
		}
		if newName, ok := m.renames[id.Name]; ok {
			edits = append(edits, edit{offset(id.Pos()), offset(id.End()), newName})
		}
		return true
	})
	if captured != nil {
		return nil, captured
	}
	// Comments speak of the target's names: dropped qualifiers go, and the
	// renamed identifiers are renamed in one pass, except in the comments of
	// fields and methods and where a word follows a dot (a field or method
	// of something). Nothing may name this repository.
	ownComments := map[*ast.CommentGroup]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			ownComments[n.Doc], ownComments[n.Comment] = true, true
		case *ast.FuncDecl:
			if n.Recv != nil {
				ownComments[n.Doc] = true
			}
		}
		return true
	})
	qualifiers := alternation(slices.Collect(maps.Keys(dropped)), `\.`)
	renames := alternation(slices.Collect(maps.Keys(m.renames)), `\b`)
	for i, group := range file.Comments {
		if i == header {
			continue
		}
		for _, c := range group.List {
			text := c.Text
			if strings.Contains(text, "dra-failfast") {
				return nil, fmt.Errorf("%s:%d: a comment names this repository", name, fset.Position(c.Pos()).Line)
			}
			if qualifiers != nil {
				text = qualifiers.ReplaceAllString(text, "")
			}
			if renames != nil && !ownComments[group] {
				var b strings.Builder
				last := 0
				for _, match := range renames.FindAllStringIndex(text, -1) {
					if match[0] > 0 && text[match[0]-1] == '.' {
						continue
					}
					b.WriteString(text[last:match[0]])
					b.WriteString(m.renames[text[match[0]:match[1]]])
					last = match[1]
				}
				text = b.String() + text[last:]
			}
			if text != c.Text {
				edits = append(edits, edit{offset(c.Pos()), offset(c.End()), text})
			}
		}
	}

	rendered, err := apply(src, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out, err := format.Source(rendered)
	if err != nil {
		return nil, fmt.Errorf("%s: the rendering does not parse: %w", name, err)
	}
	return out, nil
}

// majorVersion matches a major version suffix of a module path ("v2").
var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// alternation matches any of words as a whole word followed by end (a
// regular expression), longest first; nil for no words.
func alternation(words []string, end string) *regexp.Regexp {
	if len(words) == 0 {
		return nil
	}
	slices.SortFunc(words, func(a, b string) int { return len(b) - len(a) })
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = regexp.QuoteMeta(w)
	}
	return regexp.MustCompile(`\b(?:` + strings.Join(quoted, "|") + `)` + end)
}

// markNames adds the names declared in fields (struct fields, interface
// methods) to names.
func markNames(fields *ast.FieldList, names map[*ast.Ident]bool) {
	if fields == nil {
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			names[n] = true
		}
	}
}
