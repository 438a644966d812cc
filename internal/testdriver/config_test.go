// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

func TestParsePrepareBehavior(t *testing.T) {
	for name, tc := range map[string]struct {
		raw          string
		wantPrepare  Prepare
		wantFailures int64 // -1: nil
		wantErr      []string
	}{
		"succeed": {
			raw:          `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed"}`,
			wantPrepare:  PrepareSucceed,
			wantFailures: -1,
		},
		"prepare defaults to Succeed": {
			raw:          `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior"}`,
			wantPrepare:  PrepareSucceed,
			wantFailures: -1,
		},
		"permanent with message": {
			raw:          ` {"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"boom"} `,
			wantPrepare:  PreparePermanent,
			wantFailures: -1,
		},
		"transient": {
			raw:          `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":2}`,
			wantPrepare:  PrepareTransient,
			wantFailures: 2,
		},
		"transient forever": {
			raw:          `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":0}`,
			wantPrepare:  PrepareTransient,
			wantFailures: 0,
		},
		"empty": {
			raw:     ``,
			wantErr: []string{"parameters are empty"},
		},
		"null": {
			raw:     `null`,
			wantErr: []string{"parameters are empty"},
		},
		"not an object": {
			raw:     `["Permanent"]`,
			wantErr: []string{"not a JSON object"},
		},
		"bad JSON": {
			raw:     `{"apiVersion":"dra-failfast.test/v1",`,
			wantErr: []string{"not a valid PrepareBehavior"},
		},
		"wrong type": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":"2"}`,
			wantErr: []string{"not a valid PrepareBehavior", "failures"},
		},
		"fractional failures": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1.5}`,
			wantErr: []string{"not a valid PrepareBehavior", "failures"},
		},
		"unknown field": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed","color":"red"}`,
			wantErr: []string{`unknown field "color"`},
		},
		"field with wrong case": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","Prepare":"Permanent"}`,
			wantErr: []string{`unknown field "Prepare"`},
		},
		"duplicate field": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed","prepare":"Permanent"}`,
			wantErr: []string{`duplicate field "prepare"`},
		},
		"unknown apiVersion": {
			raw:     `{"apiVersion":"dra-failfast.test/v2","kind":"PrepareBehavior"}`,
			wantErr: []string{`apiVersion "dra-failfast.test/v2" is not supported`},
		},
		"missing apiVersion and kind": {
			raw:     `{"prepare":"Permanent"}`,
			wantErr: []string{`apiVersion "" is not supported`, `kind "" is not supported`},
		},
		"unknown kind": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"Behavior"}`,
			wantErr: []string{`kind "Behavior" is not supported, want "PrepareBehavior"`},
		},
		"unknown prepare": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`,
			wantErr: []string{`prepare "Sometimes" is not one of`},
		},
		"prepare with wrong case": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"permanent"}`,
			wantErr: []string{`prepare "permanent" is not one of`},
		},
		"negative failures": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":-1}`,
			wantErr: []string{"failures must not be negative, got -1"},
		},
		"failures without Transient": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","failures":1}`,
			wantErr: []string{`failures is only valid with prepare "Transient"`},
		},
		"all new fields": {
			raw: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"m","messageRepeat":100000,"unprepareFailures":3,` +
				`"wire":{"errorType":-5,"rawFields":"GAEYAQ==","extraClaimUID":"ghost"}}`,
			wantPrepare:  PreparePermanent,
			wantFailures: -1,
		},
		"unprepare failures with Succeed": {
			raw:          `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":0}`,
			wantPrepare:  PrepareSucceed,
			wantFailures: -1,
		},
		"grpc code": {
			raw:          `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1,"wire":{"grpcCode":"ResourceExhausted"}}`,
			wantPrepare:  PrepareTransient,
			wantFailures: 1,
		},
		"negative unprepare failures": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":-2}`,
			wantErr: []string{"unprepareFailures must not be negative, got -2"},
		},
		"negative message repeat": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","messageRepeat":-1}`,
			wantErr: []string{"messageRepeat must be between 0 and 100000, got -1"},
		},
		"message repeated too often": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","messageRepeat":100001}`,
			wantErr: []string{"messageRepeat must be between 0 and 100000, got 100001"},
		},
		"repeated message too long": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"` + strings.Repeat("x", 200) + `","messageRepeat":100000}`,
			wantErr: []string{"message repeated messageRepeat times is 20000000 bytes, more than 16777216"},
		},
		"wire with Succeed": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","wire":{"omitClaim":true}}`,
			wantErr: []string{`wire is only valid with prepare "Permanent" or "Transient", got prepare "Succeed"`},
		},
		"errorType and errorTypeAbsent": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"errorType":1,"errorTypeAbsent":true}}`,
			wantErr: []string{"errorType and errorTypeAbsent are mutually exclusive"},
		},
		"rawFields not base64": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"rawFields":"GA-B"}}`,
			wantErr: []string{"rawFields is not standard base64"},
		},
		"omitClaim with rewrites": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"omitClaim":true,"errorTypeAbsent":true}}`,
			wantErr: []string{"omitClaim removes the claim's result"},
		},
		"unknown grpc code": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"grpcCode":"UNAVAILABLE"}}`,
			wantErr: []string{`grpcCode "UNAVAILABLE" is not one of Canceled, Unknown, InvalidArgument`},
		},
		"grpc code OK": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"grpcCode":"OK"}}`,
			wantErr: []string{`grpcCode "OK" is not one of`},
		},
		"grpc code with other wire fields": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"grpcCode":"Internal","extraClaimUID":"x"}}`,
			wantErr: []string{"grpcCode fails the whole call"},
		},
		"unknown wire field": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":{"ErrorType":1}}`,
			wantErr: []string{`unknown field "wire.ErrorType"`},
		},
		"wire not an object": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","wire":"omit"}`,
			wantErr: []string{"not a valid PrepareBehavior"},
		},
		"duplicate new field": {
			raw:     `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","unprepareFailures":1,"unprepareFailures":2}`,
			wantErr: []string{`duplicate field "unprepareFailures"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			behavior, err := ParsePrepareBehavior([]byte(tc.raw))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got %+v, want error containing %q", behavior, tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if behavior.Prepare != tc.wantPrepare {
				t.Errorf("prepare = %q, want %q", behavior.Prepare, tc.wantPrepare)
			}
			switch {
			case tc.wantFailures < 0 && behavior.Failures != nil:
				t.Errorf("failures = %d, want none", *behavior.Failures)
			case tc.wantFailures >= 0 && (behavior.Failures == nil || *behavior.Failures != tc.wantFailures):
				t.Errorf("failures = %v, want %d", behavior.Failures, tc.wantFailures)
			}
		})
	}
}

func TestParseBehaviorSpec(t *testing.T) {
	for name, tc := range map[string]struct {
		raw     string
		want    BehaviorSpec
		wantErr string
	}{
		"empty object means Succeed": {raw: `{}`, want: BehaviorSpec{Prepare: PrepareSucceed}},
		"permanent with wire": {
			raw:  `{"prepare":"Permanent","message":"m","wire":{"errorTypeAbsent":true}}`,
			want: BehaviorSpec{Prepare: PreparePermanent, Message: "m", Wire: &WireSpec{ErrorTypeAbsent: true}},
		},
		"apiVersion is no field of a spec": {raw: `{"apiVersion":"dra-failfast.test/v1","prepare":"Permanent"}`, wantErr: `unknown field "apiVersion"`},
		"invalid":                          {raw: `{"prepare":"Succeed","failures":1}`, wantErr: `failures is only valid with prepare "Transient"`},
		"empty":                            {raw: ` `, wantErr: "behavior is empty"},
		"not an object":                    {raw: `"Permanent"`, wantErr: "behavior is not a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBehaviorSpec([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestInvalidConfigIsPermanent: every invalid config fails the claim
// permanently, with an error naming the claim, the requests the config
// applies to and the problem.
func TestInvalidConfigIsPermanent(t *testing.T) {
	const valid = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed"}`
	twoRequests := []resourceapi.DeviceRequestAllocationResult{result("gpu", "dev-0"), result("nic", "dev-1")}
	for name, tc := range map[string]struct {
		results []resourceapi.DeviceRequestAllocationResult
		configs []resourceapi.DeviceAllocationConfiguration
		want    []string
	}{
		"bad JSON for one request": {
			results: twoRequests,
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"prepare":`, "gpu")},
			want:    []string{`request "gpu"`, "not a valid PrepareBehavior", "source ResourceClaim"},
		},
		"unknown field for two requests": {
			results: twoRequests,
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","fail":true}`, "gpu", "nic")},
			want:    []string{`requests "gpu", "nic"`, `unknown field "fail"`},
		},
		"unknown kind for all requests": {
			results: twoRequests,
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"Other"}`)},
			want:    []string{"all requests", `kind "Other" is not supported`},
		},
		"unknown apiVersion from the class": {
			results: oneDevice("dev-0"),
			configs: []resourceapi.DeviceAllocationConfiguration{opaqueConfig(testDriver, resourceapi.AllocationConfigSourceClass, `{"apiVersion":"v1","kind":"PrepareBehavior"}`, "dev")},
			want:    []string{"config #0 (source DeviceClass test-class)", `apiVersion "v1" is not supported`},
		},
		"unknown prepare value": {
			results: oneDevice("dev-0"),
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`, "dev")},
			want:    []string{`request "dev"`, `prepare "Sometimes"`},
		},
		"negative failures": {
			results: oneDevice("dev-0"),
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":-3}`, "dev")},
			want:    []string{`request "dev"`, "failures must not be negative, got -3"},
		},
		"second of two configs invalid, both reported": {
			results: oneDevice("dev-0"),
			configs: []resourceapi.DeviceAllocationConfiguration{
				claimConfig(`{"apiVersion":"x","kind":"PrepareBehavior"}`, "dev"),
				claimConfig(valid, "dev"),
				claimConfig(`[]`, "dev"),
			},
			want: []string{"config #0", `apiVersion "x"`, "config #2", "not a JSON object"},
		},
		"invalid config wins over a broken device": {
			results: oneDevice("dev-1"),
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{}`, "dev")},
			want:    []string{`apiVersion "" is not supported`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDriver(t, Config{BrokenDevices: []string{"dev-1"}})
			claim := newClaim("my-claim", tc.results, tc.configs...)
			got, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{claim})
			if err != nil {
				t.Fatal(err)
			}
			claimErr := got[claim.UID].Err
			if claimErr == nil {
				t.Fatal("prepare succeeded, want a permanent error")
			}
			if !failfastplugin.IsPermanent(claimErr) {
				t.Errorf("error is not permanent: %v", claimErr)
			}
			// The driver is named by the kubelet; with two entries, their
			// brackets are cut before it.
			for _, want := range append([]string{"ResourceClaim ns/my-claim: invalid opaque device config #"}, tc.want...) {
				if !strings.Contains(claimErr.Error(), want) {
					t.Errorf("error %q does not contain %q", claimErr, want)
				}
			}
			if len(got[claim.UID].Devices) != 0 {
				t.Errorf("devices returned with an error: %v", got[claim.UID].Devices)
			}
			stats := d.Stats().Claims[string(claim.UID)]
			if !stats.Permanent || stats.LastError != claimErr.Error() || stats.Prepared {
				t.Errorf("stats = %+v, want the permanent error", stats)
			}
		})
	}
}

// TestConfigsOfOtherDrivers: configs of other drivers and configs without
// opaque parameters are not ours to judge.
func TestConfigsOfOtherDrivers(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	claim := newClaim("other", oneDevice("dev-0"),
		opaqueConfig("gpu.other.test", resourceapi.AllocationConfigSourceClaim, `not json at all`),
		resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClass},
	)
	got, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatal(err)
	}
	if err := got[claim.UID].Err; err != nil {
		t.Fatalf("prepare failed: %v", err)
	}
}

func TestCombinedBehavior(t *testing.T) {
	const (
		permanent  = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"dead"}`
		succeed    = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed"}`
		transient1 = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1}`
		transient3 = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":3}`
		forever    = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient"}`
	)
	for name, tc := range map[string]struct {
		configs []string
		want    effectiveBehavior
	}{
		"none":                           {want: effectiveBehavior{prepare: PrepareSucceed}},
		"succeed":                        {configs: []string{succeed}, want: effectiveBehavior{prepare: PrepareSucceed}},
		"permanent wins over transient":  {configs: []string{transient1, permanent, succeed}, want: effectiveBehavior{prepare: PreparePermanent, message: "dead"}},
		"most failures win":              {configs: []string{transient3, transient1}, want: effectiveBehavior{prepare: PrepareTransient, failures: 3}},
		"most failures win, other order": {configs: []string{transient1, transient3}, want: effectiveBehavior{prepare: PrepareTransient, failures: 3}},
		"forever wins":                   {configs: []string{transient3, forever, transient1}, want: effectiveBehavior{prepare: PrepareTransient}},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDriver(t, Config{})
			var configs []resourceapi.DeviceAllocationConfiguration
			for _, config := range tc.configs {
				configs = append(configs, claimConfig(config))
			}
			got, err := d.claimBehavior(t.Context(), newClaim("c", oneDevice("dev-0"), configs...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
