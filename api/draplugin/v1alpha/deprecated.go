// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

// ErrorType is the first name of NodePrepareResourceResponseErrorType, kept
// so that code written against it still builds.
//
// Deprecated: use NodePrepareResourceResponseErrorType (KEP-5322's name).
type ErrorType = NodePrepareResourceResponseErrorType

const (
	// Deprecated: use NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN.
	ErrorType_Unknown = NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
	// Deprecated: use NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT.
	ErrorType_Permanent = NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT
)

// The value names of KEP-5322's review thread (Unknown, Permanent), renamed to
// the kubelet APIs' convention before any release of the upstream API; the wire
// values are unchanged.
const (
	// Deprecated: use NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN.
	NodePrepareResourceResponseErrorType_Unknown = NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
	// Deprecated: use NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT.
	NodePrepareResourceResponseErrorType_Permanent = NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT
)
