// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

func varintField(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func TestDecodeErrorType(t *testing.T) {
	otherField := protowire.AppendString(protowire.AppendTag(nil, 7, protowire.BytesType), "future")
	cases := map[string]struct {
		unknown []byte
		want    ErrorType
		wantErr error
	}{
		"absent":               {},
		"permanent":            {unknown: varintField(3, 1), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"explicit unknown":     {unknown: varintField(3, 0), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN},
		"next to other fields": {unknown: append(append([]byte{}, otherField...), varintField(3, 1)...), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"unknown value 2":      {unknown: varintField(3, 2), wantErr: ErrUnknownValue},
		"negative value":       {unknown: varintField(3, uint64(0xffffffffffffffff)), wantErr: ErrUnknownValue},
		// As protobuf reads an int32: truncated to its low 32 bits.
		"value 2^32+1": {unknown: varintField(3, 1<<32+1), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"value 2^33":   {unknown: varintField(3, 1<<33), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN},
		// As protobuf reads a field that occurs twice: the last one wins.
		"twice":             {unknown: append(varintField(3, 1), varintField(3, 1)...), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"Permanent, then 0": {unknown: append(varintField(3, 1), varintField(3, 0)...), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN},
		"2, then Permanent": {unknown: append(varintField(3, 2), varintField(3, 1)...), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"Permanent, then 2": {unknown: append(varintField(3, 1), varintField(3, 2)...), wantErr: ErrUnknownValue},
		// As protobuf reads a field 3 of another wire type: not error_type.
		"wrong wire type":                 {unknown: protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "\x01")},
		"wrong wire type, then Permanent": {unknown: append(protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "\x01"), varintField(3, 1)...), want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"truncated varint":                {unknown: []byte{0x18, 0x80}, wantErr: ErrMalformed},
		"truncated tag":                   {unknown: []byte{0x80}, wantErr: ErrMalformed},
		"broken other field":              {unknown: []byte{0x3a, 0x05, 'a'}, wantErr: ErrMalformed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := &drapbv1.NodePrepareResourceResponse{Error: "boom"}
			resp.ProtoReflect().SetUnknown(tc.unknown)
			got, err := DecodeErrorType(resp)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("DecodeErrorType error = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("DecodeErrorType = %v, want %v", got, tc.want)
			}
			if tc.wantErr != nil && GetErrorType(resp) != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
				t.Errorf("GetErrorType = %v for invalid input, want Unknown", GetErrorType(resp))
			}
		})
	}
}

func TestGetErrorTypeNil(t *testing.T) {
	if got := GetErrorType(nil); got != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
		t.Errorf("GetErrorType(nil) = %v, want Unknown", got)
	}
}

// TestWireRoundTrip marshals a stock v1 response carrying error_type, as a
// driver sends it, and decodes it as a kubelet does.
func TestWireRoundTrip(t *testing.T) {
	cases := map[string]struct {
		set  ErrorType
		want ErrorType
	}{
		"permanent": {set: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT, want: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT},
		"unknown":   {set: NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, want: NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sent := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{
				"uid-1": {Error: "invalid config"},
			}}
			SetErrorType(sent.Claims["uid-1"], NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
			SetErrorType(sent.Claims["uid-1"], tc.set) // replaces, never duplicates
			data, err := proto.Marshal(sent)
			if err != nil {
				t.Fatal(err)
			}
			var received drapbv1.NodePrepareResourcesResponse
			if err := proto.Unmarshal(data, &received); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeErrorType(received.Claims["uid-1"])
			if err != nil || got != tc.want {
				t.Errorf("DecodeErrorType = %v, %v; want %v", got, err, tc.want)
			}
			if received.Claims["uid-1"].GetError() != "invalid config" {
				t.Errorf("error text changed: %q", received.Claims["uid-1"].GetError())
			}
		})
	}
}

// TestMirrorMessage checks that the documented mirror message encodes
// exactly what SetErrorType puts on the stock message.
func TestMirrorMessage(t *testing.T) {
	mirror, err := proto.Marshal(&NodePrepareResourceResponseExtension{ErrorType: NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT})
	if err != nil {
		t.Fatal(err)
	}
	resp := &drapbv1.NodePrepareResourceResponse{}
	SetErrorType(resp, NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
	if got := resp.ProtoReflect().GetUnknown(); string(got) != string(mirror) {
		t.Errorf("SetErrorType bytes %x, mirror message bytes %x", got, mirror)
	}
}

func TestSetErrorTypeKeepsOtherUnknownFields(t *testing.T) {
	other := protowire.AppendString(protowire.AppendTag(nil, 9, protowire.BytesType), "keep me")
	resp := &drapbv1.NodePrepareResourceResponse{Error: "x"}
	resp.ProtoReflect().SetUnknown(append(append([]byte{}, other...), varintField(3, 2)...))
	SetErrorType(resp, NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
	want := append(append([]byte{}, other...), varintField(3, 1)...)
	if got := resp.ProtoReflect().GetUnknown(); string(got) != string(want) {
		t.Errorf("unknown fields = %x, want %x", got, want)
	}
	SetErrorType(resp, NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN)
	if got := resp.ProtoReflect().GetUnknown(); string(got) != string(other) {
		t.Errorf("after clearing: unknown fields = %x, want %x", got, other)
	}
}

// FuzzDecodeErrorType: any bytes decode without panicking, and Permanent is
// returned only for bytes holding exactly one well-formed field 3 = 1.
func FuzzDecodeErrorType(f *testing.F) {
	f.Add(varintField(3, 1))
	f.Add(append(varintField(3, 1), varintField(3, 1)...))
	f.Add([]byte{0x18, 0x80})
	f.Add(varintField(3, 2))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, unknown []byte) {
		resp := &drapbv1.NodePrepareResourceResponse{}
		resp.ProtoReflect().SetUnknown(unknown)
		got, err := DecodeErrorType(resp)
		if err != nil && got != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
			t.Fatalf("error %v with type %v", err, got)
		}
		if got != GetErrorType(resp) {
			t.Fatalf("GetErrorType disagrees with DecodeErrorType")
		}
		if got != NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
			return
		}
		// Cross-check with an independent parse, by protobuf's rules: the
		// last varint field 3, as an int32, is 1.
		var last int32
		found := false
		for b := unknown; len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("Permanent from unparsable bytes %x", unknown)
			}
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				t.Fatalf("Permanent from unparsable bytes %x", unknown)
			}
			if num == 3 && typ == protowire.VarintType {
				v, _ := protowire.ConsumeVarint(b[n:])
				last, found = int32(v), true
			}
			b = b[n+m:]
		}
		if !found || last != 1 {
			t.Fatalf("Permanent from bytes %x whose last varint field 3 is %d (found %t)", unknown, last, found)
		}
		// What a driver writes, a kubelet reads back.
		again := &drapbv1.NodePrepareResourceResponse{}
		SetErrorType(again, got)
		if GetErrorType(again) != got {
			t.Fatalf("SetErrorType/GetErrorType round trip failed")
		}
	})
}

// The names and numbers are KEP-5322's; the first Go names stay as aliases.
func TestKEPNames(t *testing.T) {
	enum := NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT.Descriptor()
	if got := string(enum.Name()); got != "NodePrepareResourceResponseErrorType" {
		t.Errorf("enum name %q", got)
	}
	for name, want := range map[string]int32{"ERROR_TYPE_UNKNOWN": 0, "ERROR_TYPE_PERMANENT": 1} {
		if v := enum.Values().ByName(protoreflect.Name(name)); v == nil || int32(v.Number()) != want {
			t.Errorf("enum value %s = %v, want %d", name, v, want)
		}
	}
	field := (&NodePrepareResourceResponseExtension{}).ProtoReflect().Descriptor().Fields().ByName("error_type")
	if field == nil || field.Number() != ErrorTypeFieldNumber || field.Enum() != enum {
		t.Errorf("error_type field %v, want number %d of the enum", field, ErrorTypeFieldNumber)
	}
	var deprecated ErrorType = ErrorType_Permanent // still compiles: an alias, not a new type
	if deprecated != NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT || ErrorType_Unknown != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN ||
		NodePrepareResourceResponseErrorType_Permanent != NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT ||
		NodePrepareResourceResponseErrorType_Unknown != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
		t.Error("deprecated aliases differ from the KEP names")
	}
}

func TestOnlyField(t *testing.T) {
	other := protowire.AppendString(protowire.AppendTag(nil, 7, protowire.BytesType), "x")
	permanent := protowire.AppendVarint(protowire.AppendTag(nil, ErrorTypeFieldNumber, protowire.VarintType), 1)
	for name, tc := range map[string]struct {
		raw, want []byte
		malformed bool
	}{
		"absent":              {raw: other},
		"one":                 {raw: append(slices.Clone(other), permanent...), want: permanent},
		"twice":               {raw: slices.Concat(permanent, other, permanent), want: slices.Concat(permanent, permanent)},
		"truncated varint":    {raw: slices.Concat(other, []byte{0x18, 0x80}), want: []byte{0x18, 0x80}, malformed: true},
		"garbage after field": {raw: slices.Concat(permanent, []byte{0xff}), want: slices.Concat(permanent, []byte{0xff}), malformed: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, malformed := OnlyField(tc.raw, ErrorTypeFieldNumber)
			if !bytes.Equal(got, tc.want) || malformed != tc.malformed {
				t.Errorf("OnlyField = % x, %v; want % x, %v", got, malformed, tc.want, tc.malformed)
			}
			if kept := WithoutField(tc.raw, ErrorTypeFieldNumber); !tc.malformed && len(kept)+len(got) != len(tc.raw) {
				t.Errorf("WithoutField and OnlyField split % x into % x and % x", tc.raw, kept, got)
			}
		})
	}
}
