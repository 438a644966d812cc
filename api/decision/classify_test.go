// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/decision/decisiontest"
	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

const testDriver = "driver.dra-failfast.test"

// The requests and answers the tests classify.
var (
	sentClaims  = decisiontest.SentClaims
	claimResp   = decisiontest.ClaimResponse
	withUnknown = decisiontest.WithUnknown
)

// outcome is the part of ClaimResult a test case spells out.
type outcome struct {
	Outcome    Outcome
	Message    string
	Downgraded string
}

func TestClassify(t *testing.T) {
	permanent, transient := v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT, v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
	cases := map[string]struct {
		disabled bool
		sent     []string
		resp     map[string]*drapbv1.NodePrepareResourceResponse
		callErr  error
		want     []outcome
		wantErr  bool
	}{
		"all prepared": {
			sent: []string{"a", "b"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": {}, "b": {}},
			want: []outcome{{Outcome: Prepared}, {Outcome: Prepared}},
		},
		"one of each": {
			sent: []string{"a", "b", "c"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{
				"a": {}, "b": claimResp("busy", transient), "c": claimResp("bad config", permanent),
			},
			want: []outcome{
				{Outcome: Prepared},
				{Outcome: FailedTransient, Message: "busy"},
				{Outcome: FailedPermanent, Message: "bad config"},
			},
		},
		"gate off: permanent is transient": {
			disabled: true,
			sent:     []string{"a"},
			resp:     map[string]*drapbv1.NodePrepareResourceResponse{"a": claimResp("bad config", permanent)},
			want:     []outcome{{Outcome: FailedTransient, Message: "bad config", Downgraded: DowngradeFeatureDisabled}},
		},
		"empty error with permanent is success": {
			sent: []string{"a"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": claimResp("", permanent)},
			want: []outcome{{Outcome: Prepared, Downgraded: DowngradeEmptyError}},
		},
		"unknown enum value": {
			sent: []string{"a"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": withUnknown(&drapbv1.NodePrepareResourceResponse{Error: "x"}, []byte{0x18, 0x02})},
			want: []outcome{{Outcome: FailedTransient, Message: "x", Downgraded: DowngradeUnknownErrorType}},
		},
		"field twice, the last one Permanent: protobuf's rule": {
			sent: []string{"a"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": withUnknown(&drapbv1.NodePrepareResourceResponse{Error: "x"}, []byte{0x18, 0x00, 0x18, 0x01})},
			want: []outcome{{Outcome: FailedPermanent, Message: "x"}},
		},
		"field twice, the last one Unknown: protobuf's rule": {
			sent: []string{"a"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": withUnknown(&drapbv1.NodePrepareResourceResponse{Error: "x"}, []byte{0x18, 0x01, 0x18, 0x00})},
			want: []outcome{{Outcome: FailedTransient, Message: "x"}},
		},
		"malformed field": {
			sent: []string{"a"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": withUnknown(&drapbv1.NodePrepareResourceResponse{Error: "x"}, []byte{0x18})},
			want: []outcome{{Outcome: FailedTransient, Message: "x", Downgraded: DowngradeMalformedErrorType}},
		},
		"result for a claim not sent: nothing is permanent": {
			sent: []string{"a"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{
				"a": claimResp("bad config", permanent), "zzz": {},
			},
			want: []outcome{{
				Outcome:    FailedTransient,
				Message:    `NodePrepareResources returned results for 1 unknown claim UID, first "zzz"`,
				Downgraded: DowngradeUnknownClaim,
			}},
			wantErr: true,
		},
		"missing result": {
			sent: []string{"a", "b"},
			resp: map[string]*drapbv1.NodePrepareResourceResponse{"a": {}},
			want: []outcome{{Outcome: Prepared}, {Outcome: FailedTransient, Message: "NodePrepareResources returned no result for the claim"}},
		},
		"gRPC error": {
			sent:    []string{"a", "b"},
			callErr: errors.New("connection refused"),
			want: []outcome{
				{Outcome: FailedTransient, Message: "NodePrepareResources: connection refused"},
				{Outcome: FailedTransient, Message: "NodePrepareResources: connection refused"},
			},
			wantErr: true,
		},
		"nil response": {
			sent:    []string{"a"},
			want:    []outcome{{Outcome: FailedTransient, Message: "NodePrepareResources: empty response"}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var resp *drapbv1.NodePrepareResourcesResponse
			if tc.resp != nil {
				resp = &drapbv1.NodePrepareResourcesResponse{Claims: tc.resp}
			}
			result := Classify(testDriver, sentClaims(tc.sent...), resp, tc.callErr, !tc.disabled)
			if (result.Err != nil) != tc.wantErr {
				t.Errorf("Err = %v, want error: %v", result.Err, tc.wantErr)
			}
			var got []outcome
			for i, c := range result.Claims {
				if c.Driver != testDriver || string(c.Claim.UID) != tc.sent[i] || c.Claim.Name != "claim-"+tc.sent[i] {
					t.Errorf("claim %d is %+v, want UID %s of driver %s", i, c, tc.sent[i], testDriver)
				}
				got = append(got, outcome{Outcome: c.Outcome, Message: c.Message, Downgraded: c.Downgraded})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			wantFailed := tc.wantErr
			for _, o := range tc.want {
				wantFailed = wantFailed || o.Outcome != Prepared
			}
			if result.Failed() != wantFailed {
				t.Errorf("Failed() = %v, want %v", result.Failed(), wantFailed)
			}
		})
	}
}
