// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// manyDevices returns n "pool/device" names with a 63-byte pool name.
func manyDevices(n int) []string {
	pool := strings.Repeat("p", 63)
	devices := make([]string, n)
	for i := range devices {
		devices[i] = fmt.Sprintf("%s/gpu-%02d", pool, i)
	}
	return devices
}

func claimError(ns, name, driver, message string, devices []string) *PermanentError {
	return &PermanentError{
		Claim:   ClaimRef{Namespace: ns, Name: name, UID: types.UID(name + "-0123456789abcdef0123456789abcdef")},
		Driver:  driver,
		Devices: devices,
		Message: message,
	}
}

// Every failing claim is named, with its driver, whatever the device count
// and name lengths (as long as the names alone fit: TestPodMessageBounded
// covers more claims than that); the driver's words come before the
// devices, and the devices are counted beyond a few.
// maxEventMessageLen is the API's limit on an Event's message.
const maxEventMessageLen = 1024

func TestMessagesNameEveryClaim(t *testing.T) {
	longWords := strings.Repeat("the partition layout is invalid; ", 20) // > maxDriverMessageLen
	cases := map[string]struct {
		claims        []*PermanentError
		transient     []error
		wantWords     []string // driver words that must appear whole
		wantTruncated bool     // some detail of the pod message had to be cut
	}{
		"2 claims x 12 devices, 63-byte pool names": {
			claims: []*PermanentError{
				claimError("team-a", "gpu-claim-one", "gpu.example.com", "invalid sharing strategy", manyDevices(12)),
				claimError("team-a", "gpu-claim-two", "gpu.example.com", "device gpu-3 failed its health check", manyDevices(12)),
			},
			wantWords: []string{"invalid sharing strategy", "device gpu-3 failed its health check"},
		},
		"2 claims x 12 devices, long driver words and transient failures": {
			claims: []*PermanentError{
				claimError("team-a", "gpu-claim-one", "gpu.example.com", longWords, manyDevices(12)),
				claimError("team-b", "nic-claim", "nic.example.com", "short", manyDevices(12)),
			},
			transient:     []error{errors.New(strings.Repeat("busy ", 400))},
			wantWords:     []string{"short"},
			wantTruncated: true,
		},
		"3 claims with the longest names and long words": {
			claims: func() []*PermanentError {
				var claims []*PermanentError
				for i := range 3 {
					claims = append(claims, claimError(strings.Repeat("n", 63), fmt.Sprintf("%s-%d", strings.Repeat("c", 60), i), strings.Repeat("d", 63), longWords, manyDevices(12)))
				}
				return claims
			}(),
			wantTruncated: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := &PermanentPodError{Permanent: tc.claims, Transient: tc.transient}
			texts := map[string]struct {
				text  string
				limit int
			}{
				"pod message":      {e.PodMessage(), maxPodMessageLen},
				"rejected message": {rejectedPrefix + e.PodMessage(), maxEventMessageLen},
				"error":            {e.Error(), maxErrorLen},
				"downgraded error": {(&DowngradedError{permanent: e}).Error(), maxErrorLen},
			}
			for what, text := range texts {
				if len(text.text) > text.limit {
					t.Errorf("%s is %d bytes, limit %d: %q", what, len(text.text), text.limit, text.text)
				}
				if !utf8.ValidString(text.text) {
					t.Errorf("%s is not valid UTF-8", what)
				}
				for _, c := range tc.claims {
					if want := "ResourceClaim " + c.Claim.String(); !strings.Contains(text.text, want) {
						t.Errorf("%s does not name %q: %q", what, want, text.text)
					}
					if want := "driver " + c.Driver + " failed permanently"; !strings.Contains(text.text, want) {
						t.Errorf("%s does not name the driver (%q): %q", what, want, text.text)
					}
				}
				if strings.Contains(text.text, "; and") || strings.Contains(text.text, "more claims") {
					t.Errorf("%s counts claims instead of naming them: %q", what, text.text)
				}
				for _, words := range tc.wantWords {
					if !strings.Contains(text.text, words) {
						t.Errorf("%s lost the driver's words %q: %q", what, words, text.text)
					}
				}
				if got := strings.Contains(text.text, v1alpha.TruncatedMark); what == "pod message" && got != tc.wantTruncated {
					t.Errorf("%s: truncated = %v, want %v: %q", what, got, tc.wantTruncated, text.text)
				}
			}
			// Devices: a few named, the rest counted, after the driver's words.
			full := tc.claims[0].Error()
			if !strings.Contains(full, " and 9 more devices)") {
				t.Errorf("claim text does not count the devices beyond %d: %q", maxDevicesNamed, full)
			}
			if words, devices := strings.Index(full, ": "+tc.claims[0].Message[:10]), strings.Index(full, "(devices "); words < 0 || devices < words {
				t.Errorf("driver's words must come before the devices: %q", full)
			}
		})
	}
}

// Texts from a driver's answer, not only per-claim messages, are bounded and
// sanitized before they reach an Event or the log.
func TestDriverTextsBounded(t *testing.T) {
	enableFeature(t, true)
	huge := strings.Repeat("\x1b[31mX\n", 10000)
	failures := (&Manager{}).NewPrepareFailures(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "bounded"}}, nil)
	failures.Record(t.Context(), "d1", sentClaims("a"), nil, errors.New("rpc error: code = Unavailable desc = "+huge))
	failures.Record(t.Context(), "d2", sentClaims("b"), &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{
		"b": claimResp("x", 0), huge: claimResp("y", 0),
	}}, nil)
	err := failures.Err(t.Context())
	if err == nil {
		t.Fatal("no error")
	}
	if len(err.Error()) > maxErrorLen || strings.ContainsAny(err.Error(), "\x1b\n") {
		t.Errorf("error text is %d bytes (limit %d) or has control characters: %q", len(err.Error()), maxErrorLen, err.Error())
	}
	for _, want := range []string{"driver d1: NodePrepareResources: rpc error: code = Unavailable", "driver d2: NodePrepareResources returned results for 1 unknown claim UID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error text does not contain %q: %q", want, err.Error())
		}
	}
}
