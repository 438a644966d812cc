// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command wirecheck proves that two .proto fields are declared alike: the
// same field number, type and cardinality and, for enums, the same values
// (numbers and names; names matter to JSON and text encodings).
// hack/upstream.sh verify runs it on the fork's error_type extension
// (api/draplugin/v1alpha) and the upstream-shaped series' error_type in
// k8s.io/kubelet's dra/v1 API, so that the two can never disagree.
//
// Usage: wirecheck ROOT:FILE:MESSAGE.FIELD ROOT:FILE:MESSAGE.FIELD
// where FILE is relative to ROOT and MESSAGE is the message's full name.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: wirecheck ROOT:FILE:MESSAGE.FIELD ROOT:FILE:MESSAGE.FIELD")
		os.Exit(2)
	}
	summary, err := compare(context.Background(), os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "wirecheck:", err)
		os.Exit(1)
	}
	fmt.Println(summary)
}

func compare(ctx context.Context, specA, specB string) (string, error) {
	a, err := lookup(ctx, specA)
	if err != nil {
		return "", err
	}
	b, err := lookup(ctx, specB)
	if err != nil {
		return "", err
	}
	if wa, wb := wire(a), wire(b); wa != wb {
		return "", fmt.Errorf("the fields are declared differently:\n  %s: %s\n  %s: %s", specA, wa, specB, wb)
	}
	return fmt.Sprintf("declared alike: %s", wire(a)), nil
}

// wire describes f's declaration: what it puts on the wire, and its enum's values.
func wire(f protoreflect.FieldDescriptor) string {
	s := fmt.Sprintf("field %d, %s %s", f.Number(), f.Cardinality(), f.Kind())
	if f.Kind() == protoreflect.EnumKind {
		values := f.Enum().Values()
		var parts []string
		for i := range values.Len() {
			v := values.Get(i)
			parts = append(parts, fmt.Sprintf("%d=%s", v.Number(), v.Name()))
		}
		s += " {" + strings.Join(parts, ", ") + "}"
	}
	return s
}

func lookup(ctx context.Context, spec string) (protoreflect.FieldDescriptor, error) {
	root, rest, ok1 := strings.Cut(spec, ":")
	file, path, ok2 := strings.Cut(rest, ":")
	dot := strings.LastIndex(path, ".")
	if !ok1 || !ok2 || dot < 0 {
		return nil, fmt.Errorf("%q: want ROOT:FILE:MESSAGE.FIELD", spec)
	}
	compiler := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}})}
	files, err := compiler.Compile(ctx, file)
	if err != nil {
		return nil, err
	}
	message := files[0].FindDescriptorByName(protoreflect.FullName(path[:dot]))
	md, ok := message.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s: no message %s in %s", spec, path[:dot], file)
	}
	field := md.Fields().ByName(protoreflect.Name(path[dot+1:]))
	if field == nil {
		return nil, fmt.Errorf("%s: message %s has no field %s", spec, path[:dot], path[dot+1:])
	}
	return field, nil
}
