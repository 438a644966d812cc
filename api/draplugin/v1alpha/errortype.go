// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// ErrorTypeFieldNumber is the field number of error_type in
// k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourceResponse (KEP-5322).
const ErrorTypeFieldNumber protowire.Number = 3

var (
	// ErrMalformed: the bytes after the message's known fields do not parse
	// as protobuf fields (a gRPC client refuses such a message before that).
	ErrMalformed = errors.New("malformed error_type field")
	// ErrUnknownValue: field 3 holds a value this version does not know.
	ErrUnknownValue = errors.New("unknown error_type value")
)

// GetErrorType returns the error_type a driver set on a stock v1
// NodePrepareResourceResponse; a value other than Unknown and Permanent
// reads as Unknown: a driver has to be explicit to get a pod failed.
func GetErrorType(resp *drapbv1.NodePrepareResourceResponse) NodePrepareResourceResponseErrorType {
	errorType, err := DecodeErrorType(resp)
	if err != nil {
		return NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
	}
	return errorType
}

// DecodeErrorType is GetErrorType with the reason why a value was not
// accepted: ErrMalformed or ErrUnknownValue (checked with errors.Is). A nil
// response or an absent field is Unknown without error.
//
// Field 3 is read exactly as protobuf reads error_type in a v1 message that
// declares it (KEP-5322, the upstream-shaped series): by unmarshalling the
// unknown fields into NodePrepareResourceResponseExtension, which declares it
// the same way (hack/tools/wirecheck). So the last occurrence wins, the value
// is an int32 (a larger varint is truncated), and a field 3 of another wire
// type is not error_type: a kubelet of either kind reads every answer alike.
//
// Once k8s.io/kubelet declares error_type itself (KEP-5322 merged), field 3 is
// no longer an unknown field: DecodeErrorType then reads the declared field,
// and SetErrorType writes it, so a driver or kubelet built against either
// k8s.io/kubelet reads and writes the same bytes.
func DecodeErrorType(resp *drapbv1.NodePrepareResourceResponse) (NodePrepareResourceResponseErrorType, error) {
	if resp == nil {
		return NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, nil
	}
	return decodeMessage(resp.ProtoReflect())
}

// declaredErrorType returns msg's own field 3 if its type declares one, as
// error_type is declared: an enum or an int32.
func declaredErrorType(msg protoreflect.Message) (protoreflect.FieldDescriptor, error) {
	fd := msg.Descriptor().Fields().ByNumber(ErrorTypeFieldNumber)
	if fd == nil {
		return nil, nil
	}
	if fd.Cardinality() == protoreflect.Repeated || (fd.Kind() != protoreflect.EnumKind && fd.Kind() != protoreflect.Int32Kind) {
		return nil, fmt.Errorf("%w: %s declares field %d as %s %s, not as error_type", ErrMalformed, msg.Descriptor().FullName(), ErrorTypeFieldNumber, fd.Cardinality(), fd.Kind())
	}
	return fd, nil
}

// decodeMessage reads error_type from msg: its declared field 3, or its
// unknown fields when its type does not declare one.
func decodeMessage(msg protoreflect.Message) (NodePrepareResourceResponseErrorType, error) {
	fd, err := declaredErrorType(msg)
	switch {
	case err != nil:
		return NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, err
	case fd == nil:
		return decodeErrorType(msg.GetUnknown())
	case fd.Kind() == protoreflect.EnumKind:
		return checkErrorType(NodePrepareResourceResponseErrorType(msg.Get(fd).Enum()))
	default:
		return checkErrorType(NodePrepareResourceResponseErrorType(msg.Get(fd).Int()))
	}
}

func decodeErrorType(unknown []byte) (NodePrepareResourceResponseErrorType, error) {
	var ext NodePrepareResourceResponseExtension
	if err := proto.Unmarshal(unknown, &ext); err != nil {
		return NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return checkErrorType(ext.GetErrorType())
}

func checkErrorType(value NodePrepareResourceResponseErrorType) (NodePrepareResourceResponseErrorType, error) {
	switch value {
	case NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT:
		return value, nil
	default:
		return NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, fmt.Errorf("%w: %d", ErrUnknownValue, int32(value))
	}
}

// SetErrorType sets error_type on a stock v1 NodePrepareResourceResponse,
// replacing any previous value and keeping other unknown fields. Unknown
// removes the field, as proto3 never sends a default value.
func SetErrorType(resp *drapbv1.NodePrepareResourceResponse, errorType NodePrepareResourceResponseErrorType) {
	setMessage(resp.ProtoReflect(), errorType)
}

// setMessage writes error_type into msg: its declared field 3 (the unknown
// fields then lose any occurrence), or its unknown fields.
func setMessage(msg protoreflect.Message, errorType NodePrepareResourceResponseErrorType) {
	kept := WithoutField(msg.GetUnknown(), ErrorTypeFieldNumber)
	if fd, err := declaredErrorType(msg); err == nil && fd != nil {
		switch {
		case errorType == NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN:
			msg.Clear(fd)
		case fd.Kind() == protoreflect.EnumKind:
			msg.Set(fd, protoreflect.ValueOfEnum(protoreflect.EnumNumber(errorType)))
		default:
			msg.Set(fd, protoreflect.ValueOfInt32(int32(errorType)))
		}
		msg.SetUnknown(kept)
		return
	}
	if errorType != NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
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
