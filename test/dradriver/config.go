package dradriver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
)

const (
	// ConfigAPIVersion is the apiVersion of the opaque device configuration.
	ConfigAPIVersion = "dra-failfast.test/v1"
	// ConfigKind is the kind of the opaque device configuration.
	ConfigKind = "PrepareBehavior"
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

// PrepareBehavior is the opaque device configuration of the driver, in the
// parameters of an opaque config whose driver is the test driver:
//
//	{"apiVersion": "dra-failfast.test/v1", "kind": "PrepareBehavior", "prepare": "Transient", "failures": 2}
//
// Decoding is strict: unknown or duplicated fields and fields spelled with
// another case are errors. A missing prepare means Succeed.
type PrepareBehavior struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Prepare    Prepare `json:"prepare,omitempty"`
	// Failures is the number of failing prepare calls with Transient
	// (0: all). Only valid with Transient.
	Failures *int64 `json:"failures,omitempty"`
	// Message is the text of the injected error. Optional.
	Message string `json:"message,omitempty"`
}

// ParsePrepareBehavior decodes and validates the parameters of one opaque
// configuration. All problems found are joined in the error, which does not
// name the claim yet (see claimBehavior).
func ParsePrepareBehavior(raw []byte) (*PrepareBehavior, error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil, errors.New("parameters are empty, want a PrepareBehavior object")
	}
	if !strings.HasPrefix(trimmed, "{") {
		return nil, fmt.Errorf("parameters are not a JSON object: %s", abbreviate(trimmed))
	}
	var behavior PrepareBehavior
	strictErrs, err := kjson.UnmarshalStrict([]byte(trimmed), &behavior)
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
	switch behavior.Prepare {
	case "":
		behavior.Prepare = PrepareSucceed
	case PrepareSucceed, PreparePermanent, PrepareTransient:
	default:
		problems = append(problems, fmt.Sprintf("prepare %q is not one of %q, %q, %q", behavior.Prepare, PrepareSucceed, PreparePermanent, PrepareTransient))
	}
	if behavior.Failures != nil {
		if *behavior.Failures < 0 {
			problems = append(problems, fmt.Sprintf("failures must not be negative, got %d", *behavior.Failures))
		}
		if behavior.Prepare != PrepareTransient {
			problems = append(problems, fmt.Sprintf("failures is only valid with prepare %q, got prepare %q", PrepareTransient, behavior.Prepare))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &behavior, nil
}

// effectiveBehavior is what the configurations of the driver in one claim
// ask for.
type effectiveBehavior struct {
	prepare Prepare
	// failures with Transient: 0 = forever.
	failures int64
	message  string
}

// claimBehavior parses all opaque configurations of the driver in the
// allocation of claim. An invalid configuration is an error (which the
// caller marks as permanent) that names the claim, the configuration, the
// requests it applies to and the problem; all invalid configurations are
// reported, not only the first.
//
// The configurations are combined: Permanent wins over Transient, which wins
// over Succeed; of several Transient configurations the one with the most
// failures wins, "forever" (0) counting as most.
func (d *Driver) claimBehavior(claim *resourceapi.ResourceClaim) (effectiveBehavior, error) {
	result := effectiveBehavior{prepare: PrepareSucceed}
	if claim.Status.Allocation == nil {
		return result, nil
	}
	var errs []error
	for i, config := range claim.Status.Allocation.Devices.Config {
		if config.Opaque == nil || config.Opaque.Driver != d.driverName {
			continue
		}
		behavior, err := ParsePrepareBehavior(config.Opaque.Parameters.Raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("claim %s: invalid opaque device config #%d (source %s) for %s of driver %s: %w",
				klog.KObj(claim), i, configSource(config.Source), describeRequests(config.Requests), d.driverName, err))
			continue
		}
		switch behavior.Prepare {
		case PreparePermanent:
			if result.prepare != PreparePermanent {
				result = effectiveBehavior{prepare: PreparePermanent, message: behavior.Message}
			}
		case PrepareTransient:
			failures := int64(0)
			if behavior.Failures != nil {
				failures = *behavior.Failures
			}
			switch {
			case result.prepare == PreparePermanent:
			case result.prepare == PrepareSucceed,
				result.failures != 0 && (failures == 0 || failures > result.failures):
				result = effectiveBehavior{prepare: PrepareTransient, failures: failures, message: behavior.Message}
			}
		}
	}
	if len(errs) > 0 {
		return effectiveBehavior{}, errors.Join(errs...)
	}
	return result, nil
}

func configSource(source resourceapi.AllocationConfigSource) string {
	switch source {
	case resourceapi.AllocationConfigSourceClass:
		return "DeviceClass"
	case resourceapi.AllocationConfigSourceClaim:
		return "ResourceClaim"
	default:
		return strconv.Quote(string(source))
	}
}

func describeRequests(requests []string) string {
	if len(requests) == 0 {
		return "all requests"
	}
	quoted := make([]string, len(requests))
	for i, request := range requests {
		quoted[i] = strconv.Quote(request)
	}
	if len(quoted) == 1 {
		return "request " + quoted[0]
	}
	return "requests " + strings.Join(quoted, ", ")
}

func abbreviate(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return strconv.Quote(s)
}
