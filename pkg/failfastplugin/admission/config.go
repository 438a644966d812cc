// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// Kind is the kind of an object that holds opaque device configuration.
type Kind string

const (
	// KindResourceClaim holds configs in spec.devices.config.
	KindResourceClaim Kind = "ResourceClaim"
	// KindResourceClaimTemplate holds configs in spec.spec.devices.config.
	KindResourceClaimTemplate Kind = "ResourceClaimTemplate"
	// KindDeviceClass holds configs in spec.config.
	KindDeviceClass Kind = "DeviceClass"
)

// ObjectRef names an object.
type ObjectRef struct {
	Kind Kind
	// Namespace is empty for a DeviceClass.
	Namespace string
	Name      string
}

// String returns "Kind namespace/name", or "Kind name" without a namespace.
func (r ObjectRef) String() string {
	return string(r.Kind) + " " + klog.KRef(r.Namespace, r.Name).String()
}

// OpaqueConfig is one opaque device configuration entry of the driver, as
// the validator gets it, at admission and at prepare time alike.
type OpaqueConfig struct {
	// Driver is the driver of the entry: always the driver name the
	// validator was registered for.
	Driver string
	// Parameters are the entry's opaque parameters as the API has them
	// (Raw holds JSON). The validator decodes them.
	Parameters runtime.RawExtension
	// Requests are the requests the entry applies to; empty means all
	// requests (for a DeviceClass: all requests that use the class). At
	// prepare time, the entries of a class name the requests that use it.
	Requests []string

	// Object is what is being validated: the ResourceClaim,
	// ResourceClaimTemplate or DeviceClass at admission, the
	// ResourceClaim being prepared at prepare time.
	Object ObjectRef
	// Source is the object that the entry is written in: Object at
	// admission; at prepare time Object for an entry of the claim, or the
	// DeviceClass that a request of the claim uses. Source.Name is empty
	// when the class could not be found from the claim's requests.
	Source ObjectRef
	// Index is the position of the entry in Source's list of configs
	// (spec.devices.config, spec.spec.devices.config or spec.config), -1
	// when it could not be found at prepare time.
	Index int

	// AllocationSource is the source recorded in the claim's allocation
	// at prepare time, empty at admission.
	AllocationSource resourceapi.AllocationConfigSource
	// AllocationIndex is the position of the entry in
	// status.allocation.devices.config at prepare time, -1 at admission.
	AllocationIndex int
}

// ConfigValidator checks the parameters of one opaque configuration entry
// of the driver. A non-nil error means that the entry can never work: the
// webhook denies the object with it, and at prepare time it fails the claim
// permanently. Say what is wrong and what to change; the library adds which
// object, entry and requests it is about.
//
// The same function runs in the webhook and in the kubelet plugin, so it
// must only look at cfg: no node-local state, no devices. Errors caused by
// ctx ending are not treated as a verdict on the entry.
type ConfigValidator func(ctx context.Context, cfg OpaqueConfig) error

// minTextBytes is how much of the validator's text a message keeps even when
// the object and entry it names are long: the validator's words say what to
// change, the rest only where.
const minTextBytes = 96

// InvalidConfigError is a validator's verdict on one entry. Its text is the
// same at admission and at prepare time for the same entry (see Message):
//
//	<validator's text> [ResourceClaim ns/gpu: invalid opaque device config #0 (source ResourceClaim) for request "gpu" of driver gpu.example.com]
type InvalidConfigError struct {
	Config OpaqueConfig
	Err    error
}

func (e *InvalidConfigError) Error() string {
	return Message(e.Config, e.Err)
}

func (e *InvalidConfigError) Unwrap() error { return e.Err }

// Message formats the validator's error err for the entry cfg. It is the
// one function behind the denial of the webhook and the error at prepare
// time. The validator's words come first, then, in brackets, the object, the
// entry and the requests they are about; the whole fits into what the kubelet
// keeps of a claim's error (v1alpha.MaxErrorBytes), cutting the validator's
// text first (never below minTextBytes), then the end of the brackets.
func Message(cfg OpaqueConfig, err error) string {
	return message(cfg, err, v1alpha.MaxErrorBytes)
}

func message(cfg OpaqueConfig, err error, budget int) string {
	text := "invalid"
	if err != nil {
		text = err.Error()
	}
	where := fmt.Sprintf(" [%s: invalid opaque device config %s (source %s) for %s of driver %s]",
		cfg.Object, entry(cfg), source(cfg), describeRequests(cfg), cfg.Driver)
	text = v1alpha.Truncate(text, max(budget-len(where), minTextBytes))
	return v1alpha.Truncate(text+where, budget)
}

func entry(cfg OpaqueConfig) string {
	if cfg.Index >= 0 {
		return "#" + strconv.Itoa(cfg.Index)
	}
	// The claim's spec does not show where it came from: point at the
	// allocation, which does.
	return fmt.Sprintf("status.allocation.devices.config[%d]", cfg.AllocationIndex)
}

func source(cfg OpaqueConfig) string {
	if cfg.Source == cfg.Object || cfg.Source.Name == "" {
		return string(cfg.Source.Kind)
	}
	return cfg.Source.String()
}

func describeRequests(cfg OpaqueConfig) string {
	if len(cfg.Requests) == 0 {
		if cfg.Source.Kind == KindDeviceClass {
			return "all requests of the class"
		}
		return "all requests"
	}
	quoted := make([]string, len(cfg.Requests))
	for i, request := range cfg.Requests {
		quoted[i] = strconv.Quote(request)
	}
	if len(quoted) == 1 {
		return "request " + quoted[0]
	}
	return "requests " + strings.Join(quoted, ", ")
}

// InvalidConfigErrors are the verdicts on all invalid entries of one object,
// in the order of the entries, joined by "; " so that a denial and a pod's
// message stay on one line.
type InvalidConfigErrors []*InvalidConfigError

func (e InvalidConfigErrors) Error() string {
	// Each entry gets an equal share of what the kubelet keeps, so that the
	// validator's words on every entry get through.
	budget := (v1alpha.MaxErrorBytes - len(entrySeparator)*(len(e)-1)) / max(len(e), 1)
	texts := make([]string, len(e))
	for i, err := range e {
		texts[i] = message(err.Config, err.Err, budget)
	}
	return strings.Join(texts, entrySeparator)
}

const entrySeparator = "; "

// Unwrap lets errors.As find each InvalidConfigError.
func (e InvalidConfigErrors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, err := range e {
		errs[i] = err
	}
	return errs
}

// errValidatorFailed wraps what stopped a validator from giving a verdict:
// a panic, or ctx ending. Neither says anything about the entry.
var errValidatorFailed = errors.New("validator failed")

// validateAll runs validate on every entry and returns the invalid ones.
// The error is not nil when a validator could not give a verdict; the
// invalid entries found until then are returned with it.
func validateAll(ctx context.Context, validate ConfigValidator, configs []OpaqueConfig) (InvalidConfigErrors, error) {
	var invalid InvalidConfigErrors
	for i, cfg := range configs {
		// The request may have been answered (a timeout) or given up:
		// validate no further entry for nobody. The first is always
		// validated: a validator that ignores ctx still gives a verdict.
		if err := ctx.Err(); err != nil && i > 0 {
			return invalid, fmt.Errorf("%w: %w", errValidatorFailed, context.Cause(ctx))
		}
		err := safeValidate(ctx, validate, cfg)
		switch {
		case err == nil:
		case errors.Is(err, errValidatorFailed):
			return invalid, err
		default:
			invalid = append(invalid, &InvalidConfigError{Config: cfg, Err: err})
		}
	}
	return invalid, nil
}

// safeValidate calls validate, turning a panic and an error caused by ctx
// ending into errValidatorFailed: a bug in the validator or a deadline must
// neither crash the webhook or driver nor fail a claim for good.
func safeValidate(ctx context.Context, validate ConfigValidator, cfg OpaqueConfig) (err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Config validator panicked", "object", cfg.Object.String(), "index", cfg.Index, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: panic: %v", errValidatorFailed, r)
		}
	}()
	err = validate(ctx, cfg)
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%w: %w", errValidatorFailed, err)
	}
	return err
}

// sameConfig reports whether two entries have the same driver and the same
// parameters, comparing the parameters as JSON values when their bytes
// differ (the API may have re-encoded them).
func sameConfig(a, b resourceapi.DeviceConfiguration) bool {
	if (a.Opaque == nil) != (b.Opaque == nil) {
		return false
	}
	if a.Opaque == nil {
		return true
	}
	if a.Opaque.Driver != b.Opaque.Driver {
		return false
	}
	rawA, rawB := a.Opaque.Parameters.Raw, b.Opaque.Parameters.Raw
	if bytes.Equal(rawA, rawB) {
		return true
	}
	var compactA, compactB bytes.Buffer
	if json.Compact(&compactA, rawA) != nil || json.Compact(&compactB, rawB) != nil {
		return false
	}
	return bytes.Equal(compactA.Bytes(), compactB.Bytes())
}
