// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha

// ErrorType is the first name of NodePrepareResourceResponseErrorType, kept
// so that code written against it still builds.
//
// Deprecated: use NodePrepareResourceResponseErrorType (KEP-5322's name).
type ErrorType = NodePrepareResourceResponseErrorType

const (
	// Deprecated: use NodePrepareResourceResponseErrorType_Unknown.
	ErrorType_Unknown = NodePrepareResourceResponseErrorType_Unknown
	// Deprecated: use NodePrepareResourceResponseErrorType_Permanent.
	ErrorType_Permanent = NodePrepareResourceResponseErrorType_Permanent
)
