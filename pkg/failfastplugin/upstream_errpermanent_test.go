// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build failfastplugin_upstream_errpermanent

package failfastplugin_test

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// TestUpstreamErrPermanent runs only against a kubeletplugin with KEP-5322's
// ErrPermanent (the upstream-shaped series' tree, make verify-upstream): the
// library's marks and upstream's are one. Permanent and DeviceFault errors
// are kubeletplugin.ErrPermanent, errors marked by kubeletplugin count as
// permanent here, and a driver started with plain kubeletplugin.Start (no
// interceptor of this library) answers error_type Permanent, in the field
// k8s.io/kubelet declares, for a claim failed with failfastplugin.Permanent.
func TestUpstreamErrPermanent(t *testing.T) {
	base := errors.New("invalid opaque config")
	for name, tc := range map[string]struct {
		err             error
		wantUpstream    bool
		wantIsPermanent bool
	}{
		"failfastplugin.Permanent":         {err: failfastplugin.Permanent(base), wantUpstream: true, wantIsPermanent: true},
		"wrapped failfastplugin.Permanent": {err: fmt.Errorf("claim x: %w", failfastplugin.Permanent(base)), wantUpstream: true, wantIsPermanent: true},
		"failfastplugin.DeviceFault":       {err: failfastplugin.DeviceFault(base, failfastplugin.DeviceID{Pool: "p", Device: "d"}), wantUpstream: true, wantIsPermanent: true},
		"kubeletplugin.PermanentError":     {err: kubeletplugin.PermanentError(base), wantUpstream: true, wantIsPermanent: true},
		"wrapping kubeletplugin's marker":  {err: fmt.Errorf("invalid opaque config: %w", kubeletplugin.ErrPermanent), wantUpstream: true, wantIsPermanent: true},
		"plain":                            {err: base},
		"formatted with %v":                {err: fmt.Errorf("claim x: %v", failfastplugin.Permanent(base))},
	} {
		t.Run(name, func(t *testing.T) {
			if got := errors.Is(tc.err, kubeletplugin.ErrPermanent); got != tc.wantUpstream {
				t.Errorf("errors.Is(err, kubeletplugin.ErrPermanent) = %v, want %v", got, tc.wantUpstream)
			}
			if got := failfastplugin.IsPermanent(tc.err); got != tc.wantIsPermanent {
				t.Errorf("failfastplugin.IsPermanent = %v, want %v", got, tc.wantIsPermanent)
			}
		})
	}

	// kubeletplugin alone marks the wire.
	sent, resp := prepareThrough(t, kubeletplugin.Start)
	for _, claim := range sent {
		got := resp.Claims[claim.Uid]
		want := drapbv1.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
		if claim.Name == "permanent" {
			want = drapbv1.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT
		}
		if got.GetErrorType() != want || v1alpha.GetErrorType(got) != v1alpha.NodePrepareResourceResponseErrorType(want) {
			t.Errorf("claim %s: error_type %v (the library reads %v), want %v", claim.Name, got.GetErrorType(), v1alpha.GetErrorType(got), want)
		}
	}
}
