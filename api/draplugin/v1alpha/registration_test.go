// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// The wire extension registers its file under its Go import path: another generated file named
// api.proto (most are, each in its own directory) linked into the same driver binary registers
// beside it. Under a bare "api.proto", the second registration fails, and generated code panics
// at init on that.
func TestRegisteredUnderItsImportPath(t *testing.T) {
	const want = "github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha/api.proto"
	if got := v1alpha.File_github_com_dra_failfast_dra_failfast_api_draplugin_v1alpha_api_proto.Path(); got != want {
		t.Fatalf("registered as %q, want %q", got, want)
	}
	if _, err := protoregistry.GlobalFiles.FindFileByPath(want); err != nil {
		t.Fatalf("not in the global registry: %v", err)
	}
	// What a bare api.proto of another package does when it is linked in.
	other, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("api.proto"),
		Package: proto.String("another.driver.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Request"),
		}},
	}, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(other); err != nil {
		t.Errorf("another api.proto cannot register beside the wire extension: %v", err)
	}
}
