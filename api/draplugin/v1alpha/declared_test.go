// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// declaredResponse returns an empty NodePrepareResourceResponse of a k8s.io/kubelet that
// declares error_type as field 3 (the upstream-shaped series' dra/v1), built at run time: the
// k8s.io/kubelet this module builds against does not declare it yet.
func declaredResponse(t *testing.T, kind descriptorpb.FieldDescriptorProto_Type) protoreflect.Message {
	t.Helper()
	field := &descriptorpb.FieldDescriptorProto{
		Name: proto.String("error_type"), Number: proto.Int32(int32(ErrorTypeFieldNumber)),
		Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: kind.Enum(),
	}
	if kind == descriptorpb.FieldDescriptorProto_TYPE_ENUM {
		field.TypeName = proto.String(".declared.v1.NodePrepareResourceResponse.ErrorType")
	}
	file, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("declared/v1/api.proto"), Package: proto.String("declared.v1"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("NodePrepareResourceResponse"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("error"), Number: proto.Int32(2), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()},
				field,
			},
			EnumType: []*descriptorpb.EnumDescriptorProto{{
				Name: proto.String("ErrorType"),
				Value: []*descriptorpb.EnumValueDescriptorProto{
					{Name: proto.String("ERROR_TYPE_UNKNOWN"), Number: proto.Int32(0)},
					{Name: proto.String("ERROR_TYPE_PERMANENT"), Number: proto.Int32(1)},
				},
			}},
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dynamicpb.NewMessage(file.Messages().Get(0))
}

func TestDeclaredErrorType(t *testing.T) {
	for name, kind := range map[string]descriptorpb.FieldDescriptorProto_Type{
		"enum":  descriptorpb.FieldDescriptorProto_TYPE_ENUM,
		"int32": descriptorpb.FieldDescriptorProto_TYPE_INT32,
	} {
		t.Run(name, func(t *testing.T) {
			msg := declaredResponse(t, kind)
			if got, err := decodeMessage(msg); got != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN || err != nil {
				t.Errorf("unset: %v, %v, want Unknown", got, err)
			}
			setMessage(msg, NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
			if got, err := decodeMessage(msg); got != NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT || err != nil {
				t.Errorf("after setMessage: %v, %v, want Permanent", got, err)
			}
			if len(msg.GetUnknown()) != 0 {
				t.Errorf("setMessage wrote unknown fields %x: the field is declared", msg.GetUnknown())
			}
			// The bytes are the ones a stock v1 message carries as an unknown field.
			wire, err := proto.Marshal(msg.Interface())
			if err != nil {
				t.Fatal(err)
			}
			var stock drapbv1.NodePrepareResourceResponse
			if err := proto.Unmarshal(wire, &stock); err != nil {
				t.Fatal(err)
			}
			if got := GetErrorType(&stock); got != NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
				t.Errorf("a stock v1 message reads %v from the declared message's bytes, want Permanent", got)
			}
			// And the other way: a stock message's unknown field 3 is the declared field.
			other := declaredResponse(t, kind)
			stockWire, err := proto.Marshal(&stock)
			if err != nil {
				t.Fatal(err)
			}
			if err := proto.Unmarshal(stockWire, other.Interface()); err != nil {
				t.Fatal(err)
			}
			if got, err := decodeMessage(other); got != NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT || err != nil {
				t.Errorf("declared message from a stock message's bytes: %v, %v, want Permanent", got, err)
			}
			setMessage(msg, NodePrepareResourceResponseErrorType(7))
			if _, err := decodeMessage(msg); !errors.Is(err, ErrUnknownValue) {
				t.Errorf("value 7: %v, want ErrUnknownValue", err)
			}
			setMessage(msg, NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN)
			if msg.Has(msg.Descriptor().Fields().ByNumber(ErrorTypeFieldNumber)) {
				t.Error("Unknown left the field set: proto3 never sends a default")
			}
		})
	}
	t.Run("field 3 declared as something else", func(t *testing.T) {
		msg := declaredResponse(t, descriptorpb.FieldDescriptorProto_TYPE_STRING)
		if _, err := decodeMessage(msg); !errors.Is(err, ErrMalformed) {
			t.Errorf("string field 3: %v, want ErrMalformed naming the declaration", err)
		}
	})
}
