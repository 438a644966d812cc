// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import "errors"

// upstreamErrPermanent is kubeletplugin.ErrPermanent, the marker KEP-5322
// proposes for k8s.io/dynamic-resource-allocation, when the library is built
// against a kubeletplugin that has it (build tag
// failfastplugin_upstream_errpermanent, upstream_errpermanent.go); nil
// otherwise. No kubeletplugin release has it yet, so the library cannot name
// it unconditionally.
var upstreamErrPermanent error

// permanentError marks an error as permanent without changing its text.
type permanentError struct {
	err error
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Is makes a Permanent error kubeletplugin's ErrPermanent too, where the
// library knows it: kubeletplugin then sends error_type Permanent itself.
func (e *permanentError) Is(target error) bool {
	return upstreamErrPermanent != nil && target == upstreamErrPermanent
}

// Permanent marks err as permanent: retrying the same request can never
// succeed (invalid opaque configuration, a device found broken). The text of
// the error is unchanged. Permanent(nil) is nil. Built against a
// kubeletplugin with ErrPermanent (build tag
// failfastplugin_upstream_errpermanent), errors.Is(Permanent(err),
// kubeletplugin.ErrPermanent) holds.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent, or, built against a kubeletplugin with ErrPermanent (build tag
// failfastplugin_upstream_errpermanent), with kubeletplugin's PermanentError
// or ErrPermanent.
func IsPermanent(err error) bool {
	var permanent *permanentError
	return errors.As(err, &permanent) || upstreamErrPermanent != nil && errors.Is(err, upstreamErrPermanent)
}
