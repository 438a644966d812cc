// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command protoc stands in for protoc 23.4, the compiler that Kubernetes'
// hack/update-codegen.sh protobindings requires, where that release cannot be
// downloaded (its binaries are only on GitHub) and its container image cannot
// be pulled. It accepts the flags hack/lib/protoc.sh passes (--proto_path,
// --NAME_out, --NAME_opt, --plugin, --version), compiles the files with
// github.com/bufbuild/protocompile, and runs each protoc-gen-NAME plugin over
// the plugin protocol with the request protoc 23.4 sends: every file in
// dependency order with json_name and source info, compiler_version 4.23.4.
// hack/upstream.sh verify proves the stand-in: regenerated from v1.37.1's own
// .proto files, the generated Go files are byte for byte the ones v1.37.1
// ships. Unlike protoc, it writes each plugin's files as soon as that plugin
// answers, and it sends source info for dependencies too (plugins ignore it).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// The protoc release stood in for: what --version prints and what plugins
// are told (protoc-gen-go writes it into each file's header).
const (
	protocVersion = "23.4"
	major, minor  = 4, 23
	patch         = 4
)

type plugin struct {
	name, out, path string
	params          []string
}

type invocation struct {
	protoPaths []string
	plugins    []*plugin
	files      []string
}

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "protoc:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("libprotoc " + protocVersion)
		return nil
	}
	inv, err := parseArgs(args)
	if err != nil {
		return err
	}
	names, err := inv.virtualNames()
	if err != nil {
		return err
	}
	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: inv.protoPaths}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := compiler.Compile(ctx, names...)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate:  names,
		CompilerVersion: &pluginpb.Version{Major: proto.Int32(major), Minor: proto.Int32(minor), Patch: proto.Int32(patch), Suffix: proto.String("")},
	}
	seen := map[string]bool{}
	for _, f := range compiled {
		addWithDependencies(f, seen, req)
	}
	for _, p := range inv.plugins {
		if err := p.generate(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

func parseArgs(args []string) (*invocation, error) {
	inv := &invocation{}
	byName := map[string]*plugin{}
	get := func(name string) *plugin {
		if byName[name] == nil {
			byName[name] = &plugin{name: name}
			inv.plugins = append(inv.plugins, byName[name])
		}
		return byName[name]
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") {
			inv.files = append(inv.files, arg)
			continue
		}
		key, value, hasValue := strings.Cut(arg, "=")
		if !hasValue && (key == "-I" || key == "--proto_path") && i+1 < len(args) {
			i++
			value, hasValue = args[i], true
		}
		if strings.HasPrefix(key, "-I") && key != "-I" {
			key, value, hasValue = "-I", strings.TrimPrefix(arg, "-I"), true
		}
		if !hasValue {
			return nil, fmt.Errorf("flag %s: missing value (only the flags of Kubernetes' hack/lib/protoc.sh are known)", arg)
		}
		switch {
		case key == "-I" || key == "--proto_path":
			inv.protoPaths = append(inv.protoPaths, filepath.SplitList(value)...)
		case key == "--plugin":
			name, path, ok := strings.Cut(value, "=")
			if !ok || !strings.HasPrefix(name, "protoc-gen-") {
				return nil, fmt.Errorf("--plugin=%s: want protoc-gen-NAME=PATH", value)
			}
			get(strings.TrimPrefix(name, "protoc-gen-")).path = path
		case strings.HasSuffix(key, "_out") && strings.HasPrefix(key, "--"):
			p := get(strings.TrimSuffix(strings.TrimPrefix(key, "--"), "_out"))
			if params, dir, ok := strings.Cut(value, ":"); ok {
				p.params, value = append(p.params, params), dir
			}
			p.out = value
		case strings.HasSuffix(key, "_opt") && strings.HasPrefix(key, "--"):
			p := get(strings.TrimSuffix(strings.TrimPrefix(key, "--"), "_opt"))
			p.params = append(p.params, value)
		default:
			return nil, fmt.Errorf("flag %s is not supported (only the flags of Kubernetes' hack/lib/protoc.sh are known)", key)
		}
	}
	switch {
	case len(inv.files) == 0:
		return nil, errors.New("no input files")
	case len(inv.protoPaths) == 0:
		inv.protoPaths = []string{"."}
	}
	for _, p := range inv.plugins {
		if p.out == "" {
			return nil, fmt.Errorf("--%s_opt without --%s_out", p.name, p.name)
		}
	}
	return inv, nil
}

// virtualNames maps each input file to its name relative to the first
// proto path that contains it, as protoc does.
func (inv *invocation) virtualNames() ([]string, error) {
	var names []string
	for _, file := range inv.files {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		name := ""
		for _, root := range inv.protoPaths {
			rootAbs, err := filepath.Abs(root)
			if err != nil {
				return nil, err
			}
			if rel, err := filepath.Rel(rootAbs, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				name = filepath.ToSlash(rel)
				break
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%s: file does not reside within any path specified using --proto_path", file)
		}
		names = append(names, name)
	}
	return names, nil
}

// fileProto is f as protoc describes it to plugins: with source info and a
// json_name on every field.
func fileProto(f protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
	var fdp *descriptorpb.FileDescriptorProto
	if res, ok := f.(linker.Result); ok {
		fdp = proto.Clone(res.FileDescriptorProto()).(*descriptorpb.FileDescriptorProto)
	} else {
		fdp = protodesc.ToFileDescriptorProto(f)
	}
	setJSONNames(fdp.GetMessageType(), f.Messages())
	for i, ext := range fdp.GetExtension() {
		ext.JsonName = proto.String(f.Extensions().Get(i).JSONName())
	}
	return fdp
}

func setJSONNames(messages []*descriptorpb.DescriptorProto, descs protoreflect.MessageDescriptors) {
	for i, m := range messages {
		d := descs.Get(i)
		for j, field := range m.GetField() {
			field.JsonName = proto.String(d.Fields().Get(j).JSONName())
		}
		for j, ext := range m.GetExtension() {
			ext.JsonName = proto.String(d.Extensions().Get(j).JSONName())
		}
		setJSONNames(m.GetNestedType(), d.Messages())
	}
}

func addWithDependencies(f protoreflect.FileDescriptor, seen map[string]bool, req *pluginpb.CodeGeneratorRequest) {
	if seen[f.Path()] {
		return
	}
	seen[f.Path()] = true
	imports := f.Imports()
	for i := range imports.Len() {
		addWithDependencies(imports.Get(i).FileDescriptor, seen, req)
	}
	req.ProtoFile = append(req.ProtoFile, fileProto(f))
}

func (p *plugin) generate(ctx context.Context, req *pluginpb.CodeGeneratorRequest) error {
	req = proto.Clone(req).(*pluginpb.CodeGeneratorRequest)
	if len(p.params) > 0 {
		req.Parameter = proto.String(strings.Join(p.params, ","))
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	path := p.path
	if path == "" {
		if path, err = exec.LookPath("protoc-gen-" + p.name); err != nil {
			return fmt.Errorf("--%s_out: %w", p.name, err)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, stderr.String())
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return fmt.Errorf("%s: response: %w", path, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("--%s_out: %s", p.name, resp.GetError())
	}
	for _, f := range resp.GetFile() {
		if f.GetInsertionPoint() != "" || f.GetName() == "" {
			return fmt.Errorf("--%s_out: file %q: insertion points and unnamed files are not supported", p.name, f.GetName())
		}
		target := filepath.Join(p.out, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
