// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// DeviceID names one device of the driver: its pool and its name in the
// pool, as in the allocation result of a claim
// (DeviceRequestAllocationResult.Pool and .Device). Device names are only
// unique within a pool, and a driver may publish several pools.
type DeviceID struct {
	Pool   string
	Device string
}

// String returns "pool/device".
func (id DeviceID) String() string { return id.Pool + "/" + id.Device }

func compareDeviceIDs(a, b DeviceID) int {
	return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Device, b.Device))
}

// DeviceFault reports that preparing a claim failed because devices are
// broken. Return it as the claim's PrepareResult.Err:
//
//	return kubeletplugin.PrepareResult{Err: failfastplugin.DeviceFault(err, failfastplugin.DeviceID{Pool: pool, Device: device})}
//
// The error is permanent (see Permanent) and its text is err's. A driver
// started with StartWithDeviceFaults (or wrapped by DeviceFaults.Wrap) taints
// each device with a DeviceTaintRule, stored by the API server before the
// kubelet gets the answer, so that the scheduler gives the
// replacement pod other devices instead of failing it the same way. When that
// does not work, the claim still fails permanently, and the message says that
// the devices were not tainted. DeviceFault(nil, ...) is nil.
//
// The devices survive wrapping with %w and errors.Join, like the permanent
// mark; a claim whose error joins several device faults taints all their
// devices.
func DeviceFault(err error, devices ...DeviceID) error {
	return DeviceFaultClass("", err, devices...)
}

// DeviceFaultClass is DeviceFault with the class of the fault: a short word
// of the driver's own ("ecc", "xid-79", "thermal"), the value of the
// devices' taints, so that the DeviceTaintRule says why without the error's
// text (which stays in the pod's status and Event). A class that is no label
// value is made into one (at most 63 letters, digits, '-', '_', '.');
// DeviceFaultConfig.TaintValue, when set, wins.
func DeviceFaultClass(class string, err error, devices ...DeviceID) error {
	if err == nil {
		return nil
	}
	return Permanent(&deviceFaultError{err: err, class: class, devices: slices.Clone(devices)})
}

// FaultDevices returns the devices of all DeviceFault errors in err's tree,
// each once, in the order in which they were reported; nil if there are none.
func FaultDevices(err error) []DeviceID {
	var devices []DeviceID
	collectFaultDevices(err, &devices, map[DeviceID]string{})
	return devices
}

// faultClasses returns the devices of all DeviceFault errors in err's tree,
// each with the class of the first fault that names it.
func faultClasses(err error) ([]DeviceID, map[DeviceID]string) {
	var devices []DeviceID
	classes := map[DeviceID]string{}
	collectFaultDevices(err, &devices, classes)
	return devices, classes
}

func collectFaultDevices(err error, devices *[]DeviceID, classes map[DeviceID]string) {
	for err != nil {
		if fault, ok := err.(*deviceFaultError); ok {
			for _, device := range fault.devices {
				if !slices.Contains(*devices, device) {
					*devices = append(*devices, device)
					classes[device] = fault.class
				}
			}
		}
		switch wrapped := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range wrapped.Unwrap() {
				collectFaultDevices(inner, devices, classes)
			}
			return
		case interface{ Unwrap() error }:
			err = wrapped.Unwrap()
		default:
			return
		}
	}
}

// deviceFaultError carries the devices of a DeviceFault without changing the
// text of the error.
type deviceFaultError struct {
	err     error
	class   string
	devices []DeviceID
}

func (e *deviceFaultError) Error() string { return e.err.Error() }
func (e *deviceFaultError) Unwrap() error { return e.err }

// maxNoteLen bounds the note that devices were not tainted, so that most of
// the driver's own message survives next to it within what the kubelet keeps
// (v1alpha.MaxErrorBytes).
const maxNoteLen = 128

// notTaintedError is a device fault whose devices could not all be tainted:
// the claim still fails permanently, and its message ends with why the
// devices were not tainted. The driver's text is cut when the whole would not
// fit into what the kubelet keeps.
type notTaintedError struct {
	err   error
	cause error
}

func (e *notTaintedError) Error() string {
	note := " (" + v1alpha.Truncate(e.cause.Error(), maxNoteLen) + ")"
	return v1alpha.Truncate(e.err.Error(), v1alpha.MaxErrorBytes-len(note)) + note
}

func (e *notTaintedError) Unwrap() []error { return []error{e.err, e.cause} }

// notTainted describes why devices were not tainted, one clause per reason:
// "device p/d-1 not tainted: ...; devices p/d-2, p/d-3 not tainted: ...".
func notTainted(devices []DeviceID, failures map[DeviceID]*taintFailure) error {
	var (
		texts    []string
		byReason = map[string][]string{}
	)
	for _, device := range devices {
		failure := failures[device]
		if failure == nil {
			continue
		}
		text := failure.err.Error()
		if _, ok := byReason[text]; !ok {
			texts = append(texts, text)
		}
		byReason[text] = append(byReason[text], device.String())
	}
	if len(texts) == 0 {
		return nil
	}
	clauses := make([]string, 0, len(texts))
	for _, text := range texts {
		names := byReason[text]
		noun := "device"
		if len(names) > 1 {
			noun = "devices"
		}
		clauses = append(clauses, fmt.Sprintf("%s %s not tainted: %s", noun, strings.Join(names, ", "), text))
	}
	return fmt.Errorf("%s", strings.Join(clauses, "; "))
}

// defaultTaintValue is the taint value of a fault without a class, or one
// that cannot be turned into a label value.
const defaultTaintValue = "device-fault"

// taintValue turns the class of a fault into the value of its taint: a label
// value, that is at most 63 letters, digits, '-', '_' and '.', starting and
// ending with a letter or digit. Everything else becomes a '-', runs of them
// one.
func taintValue(text string) string {
	var b strings.Builder
	dash := false
	for _, r := range text {
		if b.Len() >= content.LabelValueMaxLength {
			break
		}
		if r >= utf8.RuneSelf || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.') {
			dash = true
			continue
		}
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = false
		b.WriteRune(r)
	}
	value := b.String()
	if len(value) > content.LabelValueMaxLength {
		value = value[:content.LabelValueMaxLength]
	}
	value = strings.Trim(value, "-_.")
	if value == "" {
		return defaultTaintValue
	}
	return value
}
