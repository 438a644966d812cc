// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"errors"
	"strings"
	"testing"
)

const policyHeader = "apiVersion: dra-failfast.io/v1alpha1\nkind: DriverFailurePolicy\n"

func TestParseDriverPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string // substring; "" for a valid policy
		want    string // String() of a valid policy
	}{
		{name: "empty policy: honor everything", yaml: policyHeader, want: "default: Honor"},
		{name: "per driver", yaml: policyHeader + `
default: {permanent: Honor}
drivers:
- driver: gpu.example.com
  permanent: Ignore
- driver: net.example.com
  retryBudget: {attempts: 3, duration: 5m}
`, want: "default: Honor; gpu.example.com: Ignore; net.example.com: Honor, retry budget 3 attempts or 5m0s"},
		{name: "default budget by time", yaml: policyHeader + "default: {retryBudget: {duration: 90s}}\n", want: "default: Honor, retry budget 1m30s"},
		{name: "unknown field", yaml: policyHeader + "drivers:\n- driver: a.example.com\n  permanant: Ignore\n", wantErr: `unknown field "drivers[0].permanant"`},
		{name: "duplicate key", yaml: policyHeader + "default: {permanent: Honor}\ndefault: {permanent: Ignore}\n", wantErr: `"default" already set`},
		{name: "wrong kind", yaml: "apiVersion: dra-failfast.io/v1alpha1\nkind: Policy\n", wantErr: `kind: Unsupported value: "Policy"`},
		{name: "no apiVersion", yaml: "kind: DriverFailurePolicy\n", wantErr: `apiVersion: Unsupported value: ""`},
		{name: "unknown action names the entry", yaml: policyHeader + "drivers:\n- driver: a.example.com\n- driver: b.example.com\n  permanent: Honour\n",
			wantErr: `drivers[1].permanent: Unsupported value: "Honour": supported values: "Honor", "Ignore"`},
		{name: "driver without name", yaml: policyHeader + "drivers:\n- permanent: Ignore\n", wantErr: "drivers[0].driver: Required value"},
		{name: "invalid driver name", yaml: policyHeader + "drivers:\n- driver: GPU_driver\n", wantErr: `drivers[0].driver: Invalid value: "GPU_driver"`},
		{name: "driver twice", yaml: policyHeader + "drivers:\n- driver: a.example.com\n- driver: a.example.com\n", wantErr: `drivers[1].driver: Duplicate value: "a.example.com (also drivers[0])"`},
		{name: "empty budget", yaml: policyHeader + "default: {retryBudget: {}}\n", wantErr: "default.retryBudget: Required value: attempts, duration or both"},
		{name: "negative attempts", yaml: policyHeader + "default: {retryBudget: {attempts: -1}}\n", wantErr: "default.retryBudget.attempts: Invalid value: -1"},
		{name: "too many attempts", yaml: policyHeader + "default: {retryBudget: {attempts: 5000}}\n", wantErr: "must be between 1 and 1000"},
		{name: "duration too short", yaml: policyHeader + "default: {retryBudget: {duration: 10ms}}\n", wantErr: "default.retryBudget.duration: Invalid value: \"10ms\": must be at least 1s"},
		{name: "not a duration", yaml: policyHeader + "default: {retryBudget: {duration: soon}}\n", wantErr: "decoding"},
		{name: "every error at once", yaml: "kind: x\ndrivers:\n- permanent: x\n", wantErr: "apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy, err := ParseDriverPolicy([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseDriverPolicy error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := policy.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRuleFor(t *testing.T) {
	policy, err := ParseDriverPolicy([]byte(policyHeader + "default: {permanent: Ignore}\ndrivers:\n- driver: a.example.com\n  permanent: Honor\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := policy.RuleFor("a.example.com").Action(); got != PermanentHonor {
		t.Errorf("listed driver: %s, want Honor", got)
	}
	if got := policy.RuleFor("b.example.com").Action(); got != PermanentIgnore {
		t.Errorf("unlisted driver: %s, want the default, Ignore", got)
	}
}

func TestPolicyDecision(t *testing.T) {
	policy, err := ParseDriverPolicy([]byte(policyHeader + "drivers:\n- driver: i.example.com\n  permanent: Ignore\n- driver: b.example.com\n  retryBudget: {attempts: 3}\n" +
		"- driver: ib.example.com\n  permanent: Ignore\n  retryBudget: {attempts: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	permanent := DriverResult{Claims: []ClaimResult{{Outcome: FailedPermanent}}}
	transient := DriverResult{Claims: []ClaimResult{{Outcome: FailedTransient}}}
	for _, tc := range []struct {
		driver string
		result DriverResult
		want   string
	}{
		{"h.example.com", permanent, "driver h.example.com: Honor; the Permanent answer is honored: the pod fails"},
		{"i.example.com", permanent, "driver i.example.com: Ignore; the Permanent answer is ignored: the pod is retried"},
		{"b.example.com", transient, "driver b.example.com: Honor, retry budget 3 attempts; the error counts against the retry budget (3 attempts): the pod fails when it runs out"},
		{"h.example.com", transient, "driver h.example.com: Honor; no retry budget: the pod is retried"},
		{"ib.example.com", permanent, "driver ib.example.com: Ignore, retry budget 3 attempts; the Permanent answer is ignored and counts against the retry budget (3 attempts): the pod fails when it runs out"},
		{"b.example.com", DriverResult{Err: errors.New("unavailable"), Claims: transient.Claims}, "driver b.example.com: Honor, retry budget 3 attempts"},
	} {
		tc.result.Driver = tc.driver
		if got := PolicyDecision(policy, tc.result); got != tc.want {
			t.Errorf("PolicyDecision(%s) =\n%q\nwant\n%q", tc.driver, got, tc.want)
		}
	}
}
