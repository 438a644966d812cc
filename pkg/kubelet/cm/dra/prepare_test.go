// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

type driverCall struct {
	driver  string
	sent    []string
	resp    map[string]*drapbv1.NodePrepareResourceResponse
	callErr error
}

func TestPrepareFailures(t *testing.T) {
	permanent, transient := v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT, v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
	cases := map[string]struct {
		disabled      bool
		calls         []driverCall
		wantRecorded  []bool
		wantPermanent bool
		wantErr       string
	}{
		"gate off: stock path, nothing recorded": {
			disabled: true,
			calls: []driverCall{{driver: "d1", sent: []string{"a"},
				resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": claimResp("bad", permanent)}}},
			wantRecorded: []bool{false},
		},
		"all prepared": {
			calls:        []driverCall{{driver: "d1", sent: []string{"a"}, resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": {}}}},
			wantRecorded: []bool{false},
		},
		"two drivers, every permanent claim named in stable order": {
			calls: []driverCall{
				{driver: "d2", sent: []string{"b", "a"}, resp: map[string]*drapbv1.NodePrepareResourceResponse{
					"b": claimResp("broken device", permanent), "a": claimResp("busy", transient)}},
				{driver: "d1", sent: []string{"c"}, resp: map[string]*drapbv1.NodePrepareResourceResponse{
					"c": claimResp("bad config", permanent)}},
			},
			wantRecorded:  []bool{true, true},
			wantPermanent: true,
			wantErr: "permanent failure, will not retry: " +
				"ResourceClaim ns/claim-b (UID b): driver d2 failed permanently: broken device (devices pool/dev-b); " +
				"ResourceClaim ns/claim-c (UID c): driver d1 failed permanently: bad config (devices pool/dev-c) " +
				"(also failed transiently: NodePrepareResources failed for ResourceClaim ns/claim-a (driver d2): busy)",
		},
		"permanent plus a gRPC error of another driver": {
			calls: []driverCall{
				{driver: "d1", sent: []string{"a"}, callErr: errors.New("unavailable")},
				{driver: "d2", sent: []string{"b"}, resp: map[string]*drapbv1.NodePrepareResourceResponse{"b": claimResp("bad", permanent)}},
			},
			wantRecorded:  []bool{true, true},
			wantPermanent: true,
			wantErr: "permanent failure, will not retry: ResourceClaim ns/claim-b (UID b): driver d2 failed permanently: bad (devices pool/dev-b) " +
				"(also failed transiently: driver d1: NodePrepareResources: unavailable)",
		},
		"only transient failures: one line naming all": {
			calls: []driverCall{
				{driver: "d1", sent: []string{"a", "b"}, resp: map[string]*drapbv1.NodePrepareResourceResponse{
					"a": claimResp("busy\nretry", transient), "b": claimResp("later", transient)}},
			},
			wantRecorded: []bool{true},
			wantErr: "NodePrepareResources failed for ResourceClaim ns/claim-a (driver d1): busy retry; " +
				"NodePrepareResources failed for ResourceClaim ns/claim-b (driver d1): later",
		},
		"unknown claim UID makes the permanent mark transient": {
			calls: []driverCall{{driver: "d1", sent: []string{"a"}, resp: map[string]*drapbv1.NodePrepareResourceResponse{
				"a": claimResp("bad", permanent), "x": {}}}},
			wantRecorded: []bool{true},
			wantErr:      `driver d1: NodePrepareResources returned results for 1 unknown claim UID, first "x"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			enableFeature(t, !tc.disabled)
			claims := map[types.UID]*resourceapi.ResourceClaim{}
			for _, uid := range []string{"a", "b", "c"} {
				claims[types.UID(uid)] = &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{
					Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
						{Driver: "other", Pool: "pool", Device: "not-this"},
						{Driver: "d1", Pool: "pool", Device: "dev-" + uid},
						{Driver: "d2", Pool: "pool", Device: "dev-" + uid},
					}}},
				}}
			}
			failures := (&Manager{}).NewPrepareFailures(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod"}}, claims)
			for i, call := range tc.calls {
				var resp *drapbv1.NodePrepareResourcesResponse
				if call.resp != nil {
					resp = &drapbv1.NodePrepareResourcesResponse{Claims: call.resp}
				}
				if got := failures.Record(t.Context(), call.driver, sentClaims(call.sent...), resp, call.callErr); got != tc.wantRecorded[i] {
					t.Errorf("Record(call %d) = %v, want %v", i, got, tc.wantRecorded[i])
				}
			}
			err := failures.Err(t.Context())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Err() = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Err() =\n%v\nwant\n%s", err, tc.wantErr)
			}
			if IsPermanent(err) != tc.wantPermanent {
				t.Errorf("IsPermanent = %v, want %v", IsPermanent(err), tc.wantPermanent)
			}
			var claimErr *PermanentError
			if errors.As(err, &claimErr) != tc.wantPermanent {
				t.Errorf("errors.As(*PermanentError) = %v, want %v", !tc.wantPermanent, tc.wantPermanent)
			}
		})
	}
}

func TestPermanentErrorSurvivesWrapping(t *testing.T) {
	err := error(&PermanentPodError{Permanent: []*PermanentError{{Claim: ClaimRef{Namespace: "ns", Name: "c", UID: "u"}, Driver: "d", Message: "m"}}})
	wrapped := errors.Join(errors.New("other"), errorsWrap(errorsWrap(err)))
	if !IsPermanent(wrapped) {
		t.Fatal("IsPermanent lost the error through %w wrapping")
	}
	var claimErr *PermanentError
	if !errors.As(wrapped, &claimErr) || claimErr.Driver != "d" || claimErr.Claim.UID != "u" {
		t.Fatalf("errors.As(*PermanentError) = %+v", claimErr)
	}
}

func errorsWrap(err error) error { return &wrapError{err} }

type wrapError struct{ err error }

func (w *wrapError) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapError) Unwrap() error { return w.err }

func TestDowngradeMetric(t *testing.T) {
	enableFeature(t, true)
	counter := permanentDowngrades.WithLabelValues("metric-driver", DowngradeUnknownClaim)
	before, err := testutil.GetCounterMetricValue(counter)
	if err != nil {
		t.Fatal(err)
	}
	failures := (&Manager{}).NewPrepareFailures(&v1.Pod{}, nil)
	failures.Record(t.Context(), "metric-driver", sentClaims("a"), &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{
		"a": claimResp("bad", v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT), "x": {},
	}}, nil)
	after, _ := testutil.GetCounterMetricValue(counter)
	if after-before != 1 {
		t.Errorf("downgrade counter grew by %v, want 1", after-before)
	}
	if strings.Contains(failures.Err(t.Context()).Error(), "permanent") {
		t.Errorf("downgraded failure reads as permanent: %v", failures.Err(t.Context()))
	}
}
