// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// ErrorTypeFieldNumber is the field number of error_type in
// k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourceResponse (KEP-5322).
const ErrorTypeFieldNumber protowire.Number = 3

var (
	// ErrMalformed: the bytes of field 3 cannot be decoded as a varint.
	ErrMalformed = errors.New("malformed error_type field")
	// ErrDuplicated: field 3 occurs more than once. Protobuf would take the last
	// value; we refuse to guess which one the driver meant.
	ErrDuplicated = errors.New("duplicated error_type field")
	// ErrUnknownValue: field 3 holds a value this version does not know.
	ErrUnknownValue = errors.New("unknown error_type value")
)

// GetErrorType returns the error_type a driver set on a stock v1
// NodePrepareResourceResponse. Anything but a single, well-formed Permanent
// value reads as Unknown: a driver has to be explicit to get a pod failed.
func GetErrorType(resp *drapbv1.NodePrepareResourceResponse) NodePrepareResourceResponseErrorType {
	errorType, err := DecodeErrorType(resp)
	if err != nil {
		return NodePrepareResourceResponseErrorType_Unknown
	}
	return errorType
}

// DecodeErrorType is GetErrorType with the reason why a value was not
// accepted: ErrMalformed, ErrDuplicated or ErrUnknownValue (checked with
// errors.Is). A nil response or an absent field is Unknown without error.
func DecodeErrorType(resp *drapbv1.NodePrepareResourceResponse) (NodePrepareResourceResponseErrorType, error) {
	if resp == nil {
		return NodePrepareResourceResponseErrorType_Unknown, nil
	}
	return decodeErrorType(resp.ProtoReflect().GetUnknown())
}

func decodeErrorType(unknown []byte) (NodePrepareResourceResponseErrorType, error) {
	var (
		value uint64
		found bool
	)
	for len(unknown) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(unknown)
		if tagLen < 0 {
			return NodePrepareResourceResponseErrorType_Unknown, fmt.Errorf("%w: %w", ErrMalformed, protowire.ParseError(tagLen))
		}
		if num != ErrorTypeFieldNumber {
			// Another unknown field, perhaps from a newer API: skip it.
			fieldLen := protowire.ConsumeFieldValue(num, typ, unknown[tagLen:])
			if fieldLen < 0 {
				return NodePrepareResourceResponseErrorType_Unknown, fmt.Errorf("%w: field %d: %w", ErrMalformed, num, protowire.ParseError(fieldLen))
			}
			unknown = unknown[tagLen+fieldLen:]
			continue
		}
		if typ != protowire.VarintType {
			return NodePrepareResourceResponseErrorType_Unknown, fmt.Errorf("%w: wire type %d, want varint", ErrMalformed, typ)
		}
		if found {
			return NodePrepareResourceResponseErrorType_Unknown, ErrDuplicated
		}
		v, valueLen := protowire.ConsumeVarint(unknown[tagLen:])
		if valueLen < 0 {
			return NodePrepareResourceResponseErrorType_Unknown, fmt.Errorf("%w: %w", ErrMalformed, protowire.ParseError(valueLen))
		}
		value, found = v, true
		unknown = unknown[tagLen+valueLen:]
	}
	if !found {
		return NodePrepareResourceResponseErrorType_Unknown, nil
	}
	switch value {
	case uint64(NodePrepareResourceResponseErrorType_Unknown), uint64(NodePrepareResourceResponseErrorType_Permanent):
		return NodePrepareResourceResponseErrorType(value), nil
	}
	// Enums are int32 on the wire, negative values sign-extended to 64 bits.
	return NodePrepareResourceResponseErrorType_Unknown, fmt.Errorf("%w: %d", ErrUnknownValue, int64(value))
}

// SetErrorType sets error_type on a stock v1 NodePrepareResourceResponse,
// replacing any previous value and keeping other unknown fields. Unknown
// removes the field, as proto3 never sends a default value.
func SetErrorType(resp *drapbv1.NodePrepareResourceResponse, errorType NodePrepareResourceResponseErrorType) {
	msg := resp.ProtoReflect()
	kept := WithoutField(msg.GetUnknown(), ErrorTypeFieldNumber)
	if errorType != NodePrepareResourceResponseErrorType_Unknown {
		kept = protowire.AppendTag(kept, ErrorTypeFieldNumber, protowire.VarintType)
		kept = protowire.AppendVarint(kept, uint64(int64(errorType)))
	}
	msg.SetUnknown(kept)
}

// WithoutField returns the raw protobuf fields (such as a message's unknown
// fields) without any occurrence of field num. Bytes that do not parse are
// dropped from that point on: they could not have been sent back out as a
// valid message anyway.
func WithoutField(raw []byte, num protowire.Number) []byte {
	kept, _ := splitField(raw, num)
	return kept
}

// OnlyField returns every occurrence of field num in raw, tag and value as
// sent (what a driver put on the wire as error_type, for example), and
// whether raw stopped parsing before its end; the bytes from there on are
// returned too, since they may be a malformed occurrence.
func OnlyField(raw []byte, num protowire.Number) (field []byte, malformed bool) {
	kept, field := splitField(raw, num)
	rest := len(raw) - len(kept) - len(field)
	if rest > 0 {
		return append(field, raw[len(raw)-rest:]...), true
	}
	return field, false
}

// splitField splits the parsable prefix of raw into the fields other than
// num and the occurrences of num.
func splitField(raw []byte, num protowire.Number) (others, field []byte) {
	for len(raw) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(raw)
		if tagLen < 0 {
			break
		}
		fieldLen := protowire.ConsumeFieldValue(n, typ, raw[tagLen:])
		if fieldLen < 0 {
			break
		}
		if n != num {
			others = append(others, raw[:tagLen+fieldLen]...)
		} else {
			field = append(field, raw[:tagLen+fieldLen]...)
		}
		raw = raw[tagLen+fieldLen:]
	}
	return others, field
}
