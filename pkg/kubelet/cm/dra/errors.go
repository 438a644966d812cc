// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// maxErrorLen bounds the text of the errors below: the kubelet logs
	// them and puts them into Events after a prefix of its own ("Failed to
	// prepare dynamic resources: prepare dynamic resources: ").
	maxErrorLen = 900
	// maxDevicesNamed is how many devices of a claim a text names; the rest
	// are counted.
	maxDevicesNamed = 3
	// maxDeviceNameLen bounds one "pool/device" (a pool name alone may have
	// 253 bytes).
	maxDeviceNameLen = 96
	// maxPodMessageLen bounds PodMessage: the API limits an Event's message
	// to 1024 bytes, and the kubelet may put a short prefix of its own
	// before the text.
	maxPodMessageLen = 1000
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
	return e.head(true) + e.detail()
}

// head names the claim and its driver: the part of a claim's text that is
// never cut. withUID adds the claim's UID.
func (e *PermanentError) head(withUID bool) string {
	if withUID {
		return fmt.Sprintf("ResourceClaim %s (UID %s): driver %s failed permanently", e.Claim, sanitize(string(e.Claim.UID), maxNameLen), sanitize(e.Driver, maxNameLen))
	}
	return fmt.Sprintf("ResourceClaim %s: driver %s failed permanently", e.Claim, sanitize(e.Driver, maxNameLen))
}

// detail is the driver's words, then the devices: when a text must be cut,
// the device list goes first, the driver's words after it.
func (e *PermanentError) detail() string {
	detail := ": " + sanitize(e.Message, maxDriverMessageLen)
	if len(e.Devices) == 0 {
		return detail
	}
	devices := make([]string, 0, maxDevicesNamed)
	for _, device := range e.Devices[:min(len(e.Devices), maxDevicesNamed)] {
		devices = append(devices, sanitize(device, maxDeviceNameLen))
	}
	detail += " (devices " + strings.Join(devices, ", ")
	if more := len(e.Devices) - len(devices); more > 0 {
		detail += fmt.Sprintf(" and %d more %s", more, plural(more, "device", "devices"))
	}
	return detail + ")"
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

// Error is bounded (maxErrorLen): the kubelet puts it into an Event and logs.
func (e *PermanentPodError) Error() string {
	const prefix = "permanent failure, will not retry: "
	msg := prefix + renderClaims(e.Permanent, maxErrorLen-len(prefix))
	if len(e.Transient) > 0 {
		if room := maxErrorLen - len(msg) - len(transientPrefix) - len(transientSuffix); room >= minTransientRoom {
			msg += transientPrefix + truncate(transientErrors(e.Transient).Error(), room) + transientSuffix
		}
	}
	return msg
}

// PodMessage is the pod status message and the Event message of a pod that
// the kubelet fails for e: it names every permanently failing claim within
// maxPodMessageLen bytes.
func (e *PermanentPodError) PodMessage() string {
	const prefix = "DRA driver failed permanently, will not retry: "
	return prefix + renderClaims(e.Permanent, maxPodMessageLen-len(prefix))
}

const (
	transientPrefix = " (also failed transiently: "
	transientSuffix = ")"
	// minTransientRoom: below this, the transient failures are left out of
	// the text rather than shown as a stub.
	minTransientRoom = 32
)

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

// DowngradedError is a permanent failure that the kubelet does not act on
// because the pod may have run. It is transient: IsPermanent is false, the
// pod is retried. Its text says why, and never "will not retry".
type DowngradedError struct {
	permanent *PermanentPodError
	// why the pod may have run, in words.
	why string
}

func (e *DowngradedError) Error() string {
	prefix := "permanent DRA failure, but " + e.why + ": not failing the pod, will retry: "
	return prefix + renderClaims(e.permanent.Permanent, maxErrorLen-len(prefix))
}

// renderClaims names every failing claim and its driver within budget bytes
// when that is at all possible. Priority, from what is cut last: claim and
// driver names, the driver's words, the device list. Only when even the
// names of all claims do not fit are the last ones counted instead of named.
func renderClaims(claims []*PermanentError, budget int) string {
	const sep = "; "
	details := make([]string, len(claims))
	for i, c := range claims {
		details[i] = c.detail()
	}
	for _, withUID := range []bool{true, false} {
		heads := make([]string, len(claims))
		total := len(sep) * max(len(claims)-1, 0)
		for i, c := range claims {
			heads[i] = c.head(withUID)
			total += len(heads[i])
		}
		if total > budget {
			continue
		}
		shares := fairShares(details, budget-total)
		parts := make([]string, len(claims))
		for i := range claims {
			parts[i] = heads[i] + truncate(details[i], shares[i])
		}
		return strings.Join(parts, sep)
	}
	// Too many claims to name them all: name as many as fit, count the rest.
	more := func(n int, first bool) string {
		note := fmt.Sprintf("and %d more %s", n, plural(n, "claim", "claims"))
		if first {
			return note
		}
		return sep + note
	}
	var b strings.Builder
	for i, c := range claims {
		head := c.head(false)
		if i > 0 {
			head = sep + head
		}
		need := len(head)
		if rest := len(claims) - i - 1; rest > 0 {
			need += len(more(rest, false)) // keep room to count what follows
		}
		if b.Len()+need > budget {
			b.WriteString(more(len(claims)-i, i == 0))
			break
		}
		b.WriteString(head)
	}
	return truncate(b.String(), budget)
}

// fairShares splits room among texts: each gets at most its length, and
// what short texts leave is shared by the longer ones.
func fairShares(texts []string, room int) []int {
	shares := make([]int, len(texts))
	left := make([]int, 0, len(texts))
	for i := range texts {
		left = append(left, i)
	}
	for len(left) > 0 && room > 0 {
		each := room / len(left)
		var still []int
		for _, i := range left {
			if len(texts[i]) <= each {
				shares[i] = len(texts[i])
				room -= shares[i]
			} else {
				still = append(still, i)
			}
		}
		if len(still) == len(left) {
			for _, i := range still {
				shares[i] = each
			}
			break
		}
		left = still
	}
	return shares
}

// prepareFailure is the error of one attempt to prepare a pod's claims from
// the classified answers of its drivers: a *PermanentPodError when any claim
// failed permanently, naming every such claim with the devices its driver
// was allocated (claims holds the pod's ResourceClaims by UID), else one
// error naming every transient failure; nil when nothing failed.
func prepareFailure(results []DriverResult, claims map[types.UID]*resourceapi.ResourceClaim) error {
	var permanent []*PermanentError
	var transient []error
	for _, result := range results {
		if result.Err != nil {
			transient = append(transient, fmt.Errorf("driver %s: %w", result.Driver, result.Err))
			continue
		}
		for _, claim := range result.Claims {
			switch claim.Outcome {
			case FailedPermanent:
				permanent = append(permanent, &PermanentError{
					Claim:   claim.Claim,
					Driver:  result.Driver,
					Devices: allocatedDevices(claims[claim.Claim.UID], result.Driver),
					Message: claim.Message,
				})
			case FailedTransient:
				transient = append(transient, fmt.Errorf("NodePrepareResources failed for ResourceClaim %s (driver %s): %s",
					claim.Claim, result.Driver, sanitize(claim.Message, maxDriverMessageLen)))
			}
		}
	}
	// Drivers are called in map order: sort so that the text is stable.
	slices.SortFunc(permanent, func(a, b *PermanentError) int {
		return strings.Compare(a.Claim.String()+"\x00"+a.Driver, b.Claim.String()+"\x00"+b.Driver)
	})
	slices.SortFunc(transient, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	switch {
	case len(permanent) > 0:
		return &PermanentPodError{Permanent: permanent, Transient: transient}
	case len(transient) > 0:
		return transientErrors(transient)
	}
	return nil
}

// allocatedDevices lists the devices allocated to claim from driver, as
// "pool/device".
func allocatedDevices(claim *resourceapi.ResourceClaim, driver string) []string {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	var devices []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == driver {
			devices = append(devices, r.Pool+"/"+r.Device)
		}
	}
	return devices
}

// transientErrors joins errors on one line, bounded: the text goes into an
// Event and the log.
type transientErrors []error

func (e transientErrors) Error() string {
	parts := make([]string, 0, len(e))
	for _, err := range e {
		parts = append(parts, err.Error())
	}
	return truncate(strings.Join(parts, "; "), maxErrorLen)
}

func (e transientErrors) Unwrap() []error { return e }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
