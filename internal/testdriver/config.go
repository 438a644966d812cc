// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

const (
	// ConfigAPIVersion is the apiVersion of the opaque device configuration.
	ConfigAPIVersion = "dra-failfast.test/v1"
	// ConfigKind is the kind of the opaque device configuration.
	ConfigKind = "PrepareBehavior"

	// MaxMessageRepeat is the largest messageRepeat.
	MaxMessageRepeat = 100000
	// MaxMessageBytes bounds message × messageRepeat, so that a typo
	// cannot make the driver allocate gigabytes.
	MaxMessageBytes = 16 << 20
)

// Prepare is what a prepare call of a claim does.
type Prepare string

const (
	// PrepareSucceed prepares the claim normally. It is also the behavior
	// of claims without a configuration for the driver.
	PrepareSucceed Prepare = "Succeed"
	// PreparePermanent fails every prepare call with a permanent error.
	PreparePermanent Prepare = "Permanent"
	// PrepareTransient fails the first Failures prepare calls with a plain
	// error, then succeeds. Failures = 0 fails forever.
	PrepareTransient Prepare = "Transient"
)

// BehaviorSpec holds every behavior field of a claim. It is the body of
// PrepareBehavior (the opaque config, encoded by Parameters) and of PUT
// /behavior (the namespace override), so that both have the same fields.
type BehaviorSpec struct {
	// Prepare defaults to Succeed.
	Prepare Prepare `json:"prepare,omitempty"`
	// Failures is the number of failing prepare calls with Transient
	// (0: all). Only valid with Transient.
	Failures *int64 `json:"failures,omitempty"`
	// Message is the text of the injected error. Optional. Control
	// characters are sent as they are.
	Message string `json:"message,omitempty"`
	// MessageRepeat repeats the message (or the default text) this many
	// times in the injected prepare error and in a gRPC status error of
	// Wire.GRPCCode, to produce oversized messages (opaque parameters are
	// limited to 10 KiB in the API). 0 and 1 both mean once.
	MessageRepeat int `json:"messageRepeat,omitempty"`
	// UnprepareFailures is the number of NodeUnprepareResources calls of
	// the claim that fail with a plain error before one succeeds (0 or
	// unset: none fails). The driver remembers it from the last prepare
	// call of the claim; a namespace override takes precedence.
	UnprepareFailures *int64 `json:"unprepareFailures,omitempty"`
	// Wire, only valid with Permanent or Transient, rewrites the gRPC answer
	// of the prepare calls that fail with the injected error.
	Wire *WireSpec `json:"wire,omitempty"`
}

// WireSpec are hostile or malformed answers to NodePrepareResources. They are
// applied on the gRPC wire after pkg/failfastplugin has set error_type (field
// 3 of NodePrepareResourceResponse), to the result of the claim whose
// behavior asks for them. On the v1beta1 service they are applied to the
// v1beta1 messages in the same way.
type WireSpec struct {
	// ErrorType replaces field 3 of the claim's result with this varint
	// (negative values are encoded as protobuf encodes int32 enums, sign
	// extended to 64 bits).
	ErrorType *int64 `json:"errorType,omitempty"`
	// ErrorTypeAbsent removes field 3 from the claim's result.
	ErrorTypeAbsent bool `json:"errorTypeAbsent,omitempty"`
	// RawFields (base64, standard encoding) are raw protobuf bytes appended
	// to the unknown fields of the claim's result, after field 3 if that is
	// still there: duplicated, wrong-wire-type, truncated or malformed
	// encodings.
	RawFields string `json:"rawFields,omitempty"`
	// ExtraClaimUID adds a result for a claim UID that was not sent: the
	// claim's error text with error_type = Permanent.
	ExtraClaimUID string `json:"extraClaimUID,omitempty"`
	// OmitClaim removes the claim's result from the response.
	OmitClaim bool `json:"omitClaim,omitempty"`
	// GRPCCode makes the whole call fail with a gRPC status of this code
	// (a google.golang.org/grpc/codes name such as "Unavailable",
	// "InvalidArgument", "ResourceExhausted") and the claim's error text,
	// instead of answering.
	GRPCCode string `json:"grpcCode,omitempty"`
}

// PrepareBehavior is the opaque device configuration of the driver, in the
// parameters of an opaque config whose driver is the test driver:
//
//	{"apiVersion": "dra-failfast.test/v1", "kind": "PrepareBehavior", "prepare": "Transient", "failures": 2}
//
// Decoding is strict: unknown or duplicated fields and fields spelled with
// another case are errors. A missing prepare means Succeed.
type PrepareBehavior struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	BehaviorSpec
}

// Parameters returns the opaque parameters of a claim that make the driver
// behave as s: a PrepareBehavior with this API version and kind. The one
// encoding of a behavior, used by the tests, the benchmarks and the demo.
func (s BehaviorSpec) Parameters() []byte {
	raw, err := json.Marshal(PrepareBehavior{APIVersion: ConfigAPIVersion, Kind: ConfigKind, BehaviorSpec: s})
	if err != nil { // plain strings, numbers and pointers to them always encode
		panic(fmt.Sprintf("encode PrepareBehavior: %v", err))
	}
	return raw
}

// ParsePrepareBehavior decodes and validates the parameters of one opaque
// configuration. All problems found are joined in the error, which does not
// name the claim yet (see claimBehavior).
func ParsePrepareBehavior(raw []byte) (*PrepareBehavior, error) {
	trimmed, err := jsonObject(raw, "parameters are", "a PrepareBehavior")
	if err != nil {
		return nil, err
	}
	var behavior PrepareBehavior
	strictErrs, err := kjson.UnmarshalStrict(trimmed, &behavior)
	if err != nil {
		return nil, fmt.Errorf("parameters are not a valid PrepareBehavior: %w", err)
	}
	var problems []string
	for _, strictErr := range strictErrs {
		problems = append(problems, strictErr.Error())
	}
	if behavior.APIVersion != ConfigAPIVersion {
		problems = append(problems, fmt.Sprintf("apiVersion %q is not supported, want %q", behavior.APIVersion, ConfigAPIVersion))
	}
	if behavior.Kind != ConfigKind {
		problems = append(problems, fmt.Sprintf("kind %q is not supported, want %q", behavior.Kind, ConfigKind))
	}
	problems = append(problems, behavior.BehaviorSpec.validate()...)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &behavior, nil
}

// ParseBehaviorSpec decodes and validates a BehaviorSpec without apiVersion
// and kind (the body of PUT /behavior) as strictly as ParsePrepareBehavior.
func ParseBehaviorSpec(raw []byte) (*BehaviorSpec, error) {
	trimmed, err := jsonObject(raw, "behavior is", "a behavior")
	if err != nil {
		return nil, err
	}
	var spec BehaviorSpec
	strictErrs, err := kjson.UnmarshalStrict(trimmed, &spec)
	if err != nil {
		return nil, fmt.Errorf("not a valid behavior: %w", err)
	}
	var problems []string
	for _, strictErr := range strictErrs {
		problems = append(problems, strictErr.Error())
	}
	problems = append(problems, spec.validate()...)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &spec, nil
}

func jsonObject(raw []byte, subject, want string) ([]byte, error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil, fmt.Errorf("%s empty, want %s object", subject, want)
	}
	if !strings.HasPrefix(trimmed, "{") {
		return nil, fmt.Errorf("%s not a JSON object: %s", subject, abbreviate(trimmed))
	}
	return []byte(trimmed), nil
}

// Validate checks spec as ParsePrepareBehavior does; it does not default
// Prepare.
func (s BehaviorSpec) Validate() error {
	if problems := s.validate(); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// validate returns the problems of s and defaults an empty Prepare to
// Succeed.
func (s *BehaviorSpec) validate() []string {
	var problems []string
	switch s.Prepare {
	case "":
		s.Prepare = PrepareSucceed
	case PrepareSucceed, PreparePermanent, PrepareTransient:
	default:
		problems = append(problems, fmt.Sprintf("prepare %q is not one of %q, %q, %q", s.Prepare, PrepareSucceed, PreparePermanent, PrepareTransient))
	}
	if s.Failures != nil {
		if *s.Failures < 0 {
			problems = append(problems, fmt.Sprintf("failures must not be negative, got %d", *s.Failures))
		}
		if s.Prepare != PrepareTransient {
			problems = append(problems, fmt.Sprintf("failures is only valid with prepare %q, got prepare %q", PrepareTransient, s.Prepare))
		}
	}
	if s.UnprepareFailures != nil && *s.UnprepareFailures < 0 {
		problems = append(problems, fmt.Sprintf("unprepareFailures must not be negative, got %d", *s.UnprepareFailures))
	}
	if s.MessageRepeat < 0 || s.MessageRepeat > MaxMessageRepeat {
		problems = append(problems, fmt.Sprintf("messageRepeat must be between 0 and %d, got %d", MaxMessageRepeat, s.MessageRepeat))
	} else if size := len(s.Message) * max(s.MessageRepeat, 1); size > MaxMessageBytes {
		problems = append(problems, fmt.Sprintf("message repeated messageRepeat times is %d bytes, more than %d", size, MaxMessageBytes))
	}
	if s.Wire != nil {
		if s.Prepare != PreparePermanent && s.Prepare != PrepareTransient {
			problems = append(problems, fmt.Sprintf("wire is only valid with prepare %q or %q, got prepare %q", PreparePermanent, PrepareTransient, s.Prepare))
		}
		problems = append(problems, s.Wire.validate()...)
	}
	return problems
}

func (w *WireSpec) validate() []string {
	var problems []string
	if w.ErrorType != nil && w.ErrorTypeAbsent {
		problems = append(problems, "wire: errorType and errorTypeAbsent are mutually exclusive")
	}
	if _, err := base64.StdEncoding.DecodeString(w.RawFields); err != nil {
		problems = append(problems, fmt.Sprintf("wire: rawFields is not standard base64: %v", err))
	}
	rewrites := w.ErrorType != nil || w.ErrorTypeAbsent || w.RawFields != ""
	if w.OmitClaim && rewrites {
		problems = append(problems, "wire: omitClaim removes the claim's result, errorType, errorTypeAbsent and rawFields would not be sent")
	}
	if w.GRPCCode != "" {
		if _, err := ParseGRPCCode(w.GRPCCode); err != nil {
			problems = append(problems, "wire: "+err.Error())
		}
		if rewrites || w.OmitClaim || w.ExtraClaimUID != "" {
			problems = append(problems, "wire: grpcCode fails the whole call, it cannot be combined with errorType, errorTypeAbsent, rawFields, extraClaimUID or omitClaim")
		}
	}
	return problems
}

// ParseGRPCCode returns the gRPC code with the name name as
// codes.Code.String spells it ("Unavailable", "InvalidArgument", ...). OK
// is no error code and is rejected.
func ParseGRPCCode(name string) (codes.Code, error) {
	var names []string
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		if code.String() == name {
			return code, nil
		}
		names = append(names, code.String())
	}
	return codes.OK, fmt.Errorf("grpcCode %q is not one of %s", name, strings.Join(names, ", "))
}

// effectiveBehavior is what the configurations of the driver in one claim
// (or the override of its namespace) ask for.
type effectiveBehavior struct {
	prepare Prepare
	// failures with Transient: 0 = forever.
	failures          int64
	message           string
	messageRepeat     int
	unprepareFailures int64
	wire              *WireSpec
}

// behaviorOf turns a validated spec into an effectiveBehavior.
func behaviorOf(spec *BehaviorSpec) effectiveBehavior {
	b := effectiveBehavior{
		prepare:       spec.Prepare,
		message:       spec.Message,
		messageRepeat: spec.MessageRepeat,
		wire:          spec.Wire,
	}
	if b.prepare == "" {
		b.prepare = PrepareSucceed
	}
	if spec.Failures != nil {
		b.failures = *spec.Failures
	}
	if spec.UnprepareFailures != nil {
		b.unprepareFailures = *spec.UnprepareFailures
	}
	return b
}

// errorText is the message of an injected error: message (or fallback)
// repeated messageRepeat times.
func (b effectiveBehavior) errorText(fallback string) string {
	return strings.Repeat(messageOr(b.message, fallback), max(b.messageRepeat, 1))
}

// ValidateConfig is the driver's one validation of its opaque config: the
// admission webhook (--webhook-address) runs it on ResourceClaims,
// ResourceClaimTemplates and DeviceClasses, and prepare runs it through
// admission.ValidateClaim, so that both reject the same configs with the
// same message.
func ValidateConfig(_ context.Context, cfg admission.OpaqueConfig) error {
	_, err := ParsePrepareBehavior(cfg.Parameters.Raw)
	return err
}

// claimBehavior validates and parses all opaque configurations of the driver
// in the allocation of claim. Invalid configurations fail the claim
// permanently (admission.ValidateClaim with ValidateConfig): the error names
// the claim, each invalid configuration, the requests it applies to and the
// problem, as the webhook does.
//
// The configurations are combined: Permanent wins over Transient, which wins
// over Succeed; of several Transient configurations the one with the most
// failures wins, "forever" (0) counting as most. The winning configuration
// brings its message, messageRepeat and wire; unprepareFailures is the
// largest of all configurations.
func (d *Driver) claimBehavior(ctx context.Context, claim *resourceapi.ResourceClaim) (effectiveBehavior, error) {
	result := effectiveBehavior{prepare: PrepareSucceed}
	if claim.Status.Allocation == nil {
		return result, nil
	}
	if err := admission.ValidateClaim(ctx, d.driverName, claim, ValidateConfig); err != nil {
		// Permanent unless the validation itself failed.
		return effectiveBehavior{}, err
	}
	var unprepareFailures int64
	for i, config := range claim.Status.Allocation.Devices.Config {
		if config.Opaque == nil || config.Opaque.Driver != d.driverName {
			continue
		}
		behavior, err := ParsePrepareBehavior(config.Opaque.Parameters.Raw)
		if err != nil {
			// ValidateConfig accepted it: only a parser that is not
			// deterministic gets here.
			return effectiveBehavior{}, failfastplugin.Permanent(fmt.Errorf("ResourceClaim %s: opaque device config status.allocation.devices.config[%d] of driver %s: %w",
				klog.KObj(claim), i, d.driverName, err))
		}
		candidate := behaviorOf(&behavior.BehaviorSpec)
		unprepareFailures = max(unprepareFailures, candidate.unprepareFailures)
		switch candidate.prepare {
		case PreparePermanent:
			if result.prepare != PreparePermanent {
				result = candidate
			}
		case PrepareTransient:
			switch {
			case result.prepare == PreparePermanent:
			case result.prepare == PrepareSucceed,
				result.failures != 0 && (candidate.failures == 0 || candidate.failures > result.failures):
				result = candidate
			}
		}
	}
	result.unprepareFailures = unprepareFailures
	return result, nil
}

func abbreviate(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return strconv.Quote(s)
}
