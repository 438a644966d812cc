package dra

import (
	"errors"
	"fmt"
	"strings"
)

// PermanentError is one claim that one driver failed to prepare permanently.
type PermanentError struct {
	Claim  ClaimRef
	Driver string
	// Devices allocated to the claim from this driver, as "pool/device".
	Devices []string
	// Message is the driver's error text as received. Error() and the pod
	// status show it sanitized and bounded.
	Message string
}

func (e *PermanentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ResourceClaim %s (UID %s): driver %s failed permanently", e.Claim, e.Claim.UID, e.Driver)
	if len(e.Devices) > 0 {
		fmt.Fprintf(&b, " (devices %s)", strings.Join(e.Devices, ", "))
	}
	b.WriteString(": ")
	b.WriteString(sanitize(e.Message, maxDriverMessageLen))
	return b.String()
}

// PermanentPodError is the error of PrepareResources when at least one claim
// of the pod failed permanently. It names every permanently failing claim,
// sorted by claim and driver; claims that failed transiently in the same
// attempt are kept in Transient (they do not change the outcome: the pod can
// never start).
type PermanentPodError struct {
	Permanent []*PermanentError
	Transient []error
}

func (e *PermanentPodError) Error() string {
	parts := make([]string, 0, len(e.Permanent))
	for _, p := range e.Permanent {
		parts = append(parts, p.Error())
	}
	msg := "permanent failure, will not retry: " + strings.Join(parts, "; ")
	if len(e.Transient) > 0 {
		msg += fmt.Sprintf(" (also failed transiently: %v)", transientErrors(e.Transient))
	}
	return msg
}

// Unwrap gives errors.Is and errors.As access to every claim's error.
func (e *PermanentPodError) Unwrap() []error {
	errs := make([]error, 0, len(e.Permanent)+len(e.Transient))
	for _, p := range e.Permanent {
		errs = append(errs, p)
	}
	return append(errs, e.Transient...)
}

// IsPermanent reports whether err, anywhere in its chain, is a
// PermanentPodError: the pod must be failed.
func IsPermanent(err error) bool {
	var permanent *PermanentPodError
	return errors.As(err, &permanent)
}
