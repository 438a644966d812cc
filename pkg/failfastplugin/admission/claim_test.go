// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

func TestValidateClaim(t *testing.T) {
	gpuClassInvalid := opaque(testDriver, invalidParams)
	for name, tc := range map[string]struct {
		claim *resourceapi.ResourceClaim
		// want is the whole message, empty for no error.
		want string
	}{
		"not allocated": {claim: testClaim(claimEntry(testDriver, invalidParams))},
		"no config":     {claim: allocatedClaim()},
		"valid":         {claim: allocatedClaim(claimEntry(testDriver, validParams, "gpu"))},
		"invalid, one request": {
			claim: allocatedClaim(claimEntry(testDriver, invalidParams, "gpu")),
			want:  invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for request "gpu" of driver gpu.example.com]`,
		},
		"invalid, all requests": {
			claim: allocatedClaim(claimEntry(testDriver, invalidParams)),
			want:  invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for all requests of driver gpu.example.com]`,
		},
		"invalid, two requests, not JSON": {
			claim: allocatedClaim(claimEntry(testDriver, `{"partitions":`, "gpu", "nic")),
			want:  `not a GPUConfig: unexpected end of JSON input [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for requests "gpu", "nic" of driver gpu.example.com]`,
		},
		"other driver's invalid config is not ours": {
			claim: allocatedClaim(claimEntry(otherDriver, `not json`, "nic"), claimEntry(testDriver, validParams, "gpu")),
		},
		"config without opaque parameters": {
			claim: allocate(testClaim(), resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim}),
		},
		"all invalid entries, in order, spec indexes": {
			claim: allocatedClaim(
				claimEntry(testDriver, invalidParams, "gpu"),
				claimEntry(otherDriver, invalidParams),
				claimEntry(testDriver, validParams, "nic"),
				claimEntry(testDriver, `{"partitions":0}`, "nic"),
			),
			// Two entries share what the kubelet keeps: each keeps the
			// validator's words, the brackets are cut.
			want: invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for ...` +
				`; partitions must be between 1 and 7, got 0 [ResourceClaim ns/gpu: invalid opaque device config #3 (source ResourceClaim) for ...`,
		},
		// The scheduler puts the class configs first and leaves out claim
		// configs for subrequests it did not pick: the message still
		// names the entry's position in the claim's spec.
		"claim entry after class entries and a left out one": {
			claim: allocate(testClaim(
				claimEntry(testDriver, validParams, "any/big"),
				claimEntry(testDriver, invalidParams, "any/small"),
			),
				classEntry(opaque(otherDriver, `{}`), "gpu"),
				fromClaim(claimEntry(testDriver, invalidParams, "any/small")),
			),
			want: invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #1 (source ResourceClaim) for request "any/small" of driver gpu.example.com]`,
		},
		"re-encoded parameters still match the spec": {
			claim: allocate(testClaim(claimEntry(testDriver, `{ "partitions" : 9 }`, "gpu")),
				fromClaim(claimEntry(testDriver, invalidParams, "gpu"))),
			want: invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for request "gpu" of driver gpu.example.com]`,
		},
		"claim entry not in the spec": {
			claim: allocate(testClaim(), classEntry(opaque(otherDriver, `{}`), "gpu"), fromClaim(claimEntry(testDriver, invalidParams, "gpu"))),
			want:  invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config status.allocation.devices.config[1] (source ResourceClaim) for request "gpu" of driver gpu.example.com]`,
		},
		"class entries: index in the class": {
			claim: allocate(testClaim(),
				// gpu-class has three configs, used by "gpu" and "any/small".
				classEntry(opaque(otherDriver, `{}`), "gpu", "any/small"),
				classEntry(opaque(testDriver, validParams), "gpu", "any/small"),
				classEntry(gpuClassInvalid, "gpu", "any/small"),
				// nic-class has one.
				classEntry(gpuClassInvalid, "nic"),
			),
			want: invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #2 (source DeviceClass gpu-cla...` +
				`; ` + invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #0 (source DeviceClass nic-cla...`,
		},
		"class of a subrequest": {
			claim: allocate(testClaim(), classEntry(gpuClassInvalid, "any/big")),
			want:  invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #0 (source DeviceClass big-class) for request "any/big" of driver gpu.example.com]`,
		},
		"class not found": {
			claim: allocate(testClaim(), classEntry(opaque(otherDriver, `{}`), "gone"), classEntry(gpuClassInvalid, "gone")),
			want:  invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config status.allocation.devices.config[1] (source DeviceClass) for request "gone" of driver gpu.example.com]`,
		},
		"unknown source": {
			claim: allocate(testClaim(), resourceapi.DeviceAllocationConfiguration{Source: "FromSomewhere", DeviceConfiguration: gpuClassInvalid}),
			want:  invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config status.allocation.devices.config[0] (source FromSomewhere) for all requests of driver gpu.example.com]`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateClaim(t.Context(), testDriver, tc.claim, testValidate)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
			if !failfastplugin.IsPermanent(err) {
				t.Error("error is not permanent")
			}
			var invalid *InvalidConfigError
			if !errors.As(err, &invalid) || invalid.Config.Driver != testDriver || invalid.Config.AllocationIndex < 0 {
				t.Errorf("no InvalidConfigError with the entry in %#v", err)
			}
		})
	}
}

// TestValidateClaimNoVerdict: a validator that panics or runs out of time
// says nothing about the config, so the claim must not fail for good.
func TestValidateClaimNoVerdict(t *testing.T) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	for name, tc := range map[string]struct {
		ctx    context.Context
		params string
		want   string
	}{
		"panic":    {ctx: t.Context(), params: `{"panic":true}`, want: "panic: validator bug"},
		"canceled": {ctx: canceled, params: `{"block":true}`, want: "gave up: context canceled"},
		"canceled, validator ignores it": {
			ctx: canceled, params: invalidParams, want: invalidText,
		},
	} {
		t.Run(name, func(t *testing.T) {
			claim := allocatedClaim(claimEntry(testDriver, tc.params, "gpu"))
			err := ValidateClaim(tc.ctx, testDriver, claim, testValidate)
			if err == nil {
				t.Fatal("no error")
			}
			if failfastplugin.IsPermanent(err) {
				t.Errorf("error is permanent: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "ResourceClaim ns/gpu: validating opaque device config of driver gpu.example.com: validator failed: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	// A validator error that wraps a deadline is no verdict either, even
	// with a live context.
	deadline := func(context.Context, OpaqueConfig) error {
		return context.DeadlineExceeded
	}
	if err := ValidateClaim(t.Context(), testDriver, allocatedClaim(claimEntry(testDriver, validParams)), deadline); err == nil || failfastplugin.IsPermanent(err) {
		t.Errorf("deadline: got %v, want a transient error", err)
	}
}

// classWhere is what Message says after the validator's words for entry #0
// of the class gpu-class at admission.
const classWhere = " [DeviceClass gpu-class: invalid opaque device config #0 (source DeviceClass) for all requests of the class of driver gpu.example.com]"

func TestMessage(t *testing.T) {
	longClaim := ObjectRef{Kind: KindResourceClaim, Namespace: "ns", Name: strings.Repeat("n", 253)}
	class := ObjectRef{Kind: KindDeviceClass, Name: "gpu-class"}
	template := ObjectRef{Kind: KindResourceClaimTemplate, Namespace: "ns", Name: "gpu-template"}
	for name, tc := range map[string]struct {
		cfg  OpaqueConfig
		err  error
		want string
	}{
		"class at admission": {
			cfg:  OpaqueConfig{Driver: testDriver, Object: class, Source: class, Index: 1, AllocationIndex: -1},
			err:  errors.New("bad"),
			want: "bad [DeviceClass gpu-class: invalid opaque device config #1 (source DeviceClass) for all requests of the class of driver gpu.example.com]",
		},
		"template at admission": {
			cfg:  OpaqueConfig{Driver: testDriver, Object: template, Source: template, Requests: []string{"a", "b/c"}, AllocationIndex: -1},
			err:  errors.New("bad"),
			want: `bad [ResourceClaimTemplate ns/gpu-template: invalid opaque device config #0 (source ResourceClaimTemplate) for requests "a", "b/c" of driver gpu.example.com]`,
		},
		"nil error": {
			cfg:  OpaqueConfig{Driver: testDriver, Object: template, Source: template, AllocationIndex: -1},
			want: `invalid [ResourceClaimTemplate ns/gpu-template: invalid opaque device config #0 (source ResourceClaimTemplate) for all requests of driver gpu.example.com]`,
		},
		"long text is cut to fit what the kubelet keeps": {
			cfg:  OpaqueConfig{Driver: testDriver, Object: class, Source: class, AllocationIndex: -1},
			err:  errors.New(strings.Repeat("é", 1024)),
			want: strings.Repeat("é", (v1alpha.MaxErrorBytes-len(classWhere)-len(v1alpha.TruncatedMark))/2) + v1alpha.TruncatedMark + classWhere,
		},
		"long names: the validator's words keep their minimum, the brackets are cut": {
			cfg:  OpaqueConfig{Driver: testDriver, Object: longClaim, Source: longClaim, AllocationIndex: -1},
			err:  errors.New(strings.Repeat("x", 200)),
			want: strings.Repeat("x", minTextBytes-len(v1alpha.TruncatedMark)) + v1alpha.TruncatedMark + " [ResourceClaim ns/" + strings.Repeat("n", v1alpha.MaxErrorBytes-minTextBytes-len(" [ResourceClaim ns/")-len(v1alpha.TruncatedMark)) + v1alpha.TruncatedMark,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Message(tc.cfg, tc.err); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if got := (&InvalidConfigError{Config: tc.cfg, Err: tc.err}).Error(); got != tc.want {
				t.Errorf("InvalidConfigError: got %s", got)
			}
		})
	}
}
