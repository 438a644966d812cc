// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package drivercheck asks a DRA driver to prepare claims exactly as the
// kubelet does, reports what the driver answered on the wire and what the
// dra-failfast kubelet would decide, and unprepares them again. It is the
// logic of cmd/dra-failfast-check.
package drivercheck

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// Options say which claims to check with which driver.
type Options struct {
	// Driver is the DRA driver name (as in ResourceSlices and allocation
	// results).
	Driver string
	// Socket is the driver's DRA gRPC socket, e.g.
	// /var/lib/kubelet/plugins/<driver>/dra.sock.
	Socket string
	// Claims are namespace/name of ResourceClaims allocated to Driver and
	// reserved for no pod.
	Claims []string
	// Timeout of each gRPC call. Default 45s.
	Timeout time.Duration
	// AllowTaint lets the driver taint devices during the check, as it
	// would for the kubelet: a driver built with
	// failfastplugin.StartWithDeviceFaults taints the device of a claim it
	// fails with DeviceFault, in the live cluster, until the driver clears
	// the fault. Without it, the prepare call asks the driver for no taint
	// (failfastplugin.NoTaintMetadataKey), which a driver on the library
	// honors, and Run fails (ErrTainted) when the driver tainted a device
	// anyway, after reporting which.
	AllowTaint bool
	// Policy is the node's DRA driver failure policy, which the decisions
	// follow (nil: the default, every Permanent answer honored).
	Policy *decision.DriverFailurePolicy
}

// ErrTainted: the driver tainted devices during the check and AllowTaint
// was not set.
var ErrTainted = errors.New("the driver tainted devices during the check")

// ErrRefused: a claim cannot be checked (not found, not allocated to the
// driver, or in use by a pod).
var ErrRefused = errors.New("claim refused")

// Report is what one check found.
type Report struct {
	Driver string        `json:"driver"`
	Claims []ClaimReport `json:"claims"`
	// CallError is the error of the NodePrepareResources call as a whole.
	CallError string `json:"callError,omitempty"`
	// TaintedDevices are the taints that the claims' devices got during the
	// check: the driver reported them broken. They stay until the driver
	// clears them.
	TaintedDevices []DeviceTaint `json:"taintedDevices,omitempty"`
	// NodePolicy is the driver's rule in the node's DRA driver failure
	// policy and what it does with this answer.
	NodePolicy string `json:"nodePolicy"`
}

// DeviceTaint is a taint on one device of the driver.
type DeviceTaint struct {
	Pool   string `json:"pool"`
	Device string `json:"device"`
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

func (t DeviceTaint) String() string {
	return fmt.Sprintf("%s/%s %s=%s:%s", t.Pool, t.Device, t.Key, t.Value, t.Effect)
}

// ClaimReport is the driver's answer for one claim and the fork's decision.
type ClaimReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Error is the driver's error text, empty when it prepared the claim.
	Error string `json:"error,omitempty"`
	// CDIDevices are the devices the driver returned.
	CDIDevices []string `json:"cdiDevices,omitempty"`
	// ErrorTypeBytes are the raw bytes of field 3 (error_type), tag
	// included, in hex; empty when the driver did not send it.
	ErrorTypeBytes string `json:"errorTypeBytes"`
	// ErrorType is the decoded value, or why it was not accepted.
	ErrorType string `json:"errorType"`
	// Decision is prepared, transient or permanent: what the fork with
	// DRAHandlePermanentDriverFailures does for a pod that has not started
	// containers yet. Downgraded names the rule that kept a permanent-looking
	// answer transient.
	Decision   string `json:"decision"`
	Downgraded string `json:"downgraded,omitempty"`
	// Why explains the decision in a sentence.
	Why string `json:"why"`
	// Unprepared is the result of NodeUnprepareResources: "ok" or its error.
	Unprepared string `json:"unprepared"`
}

// Decisions.
const (
	DecisionPrepared  = "prepared"
	DecisionTransient = "transient"
	DecisionPermanent = "permanent"
)

// Run checks the claims. The error is about the check itself (bad options,
// refused claims, no connection); what the driver answered is in the
// report.
func Run(ctx context.Context, client kubernetes.Interface, opts Options) (*Report, error) {
	if opts.Driver == "" || opts.Socket == "" || len(opts.Claims) == 0 {
		return nil, errors.New("a driver name, its socket and at least one claim are needed")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 45 * time.Second
	}
	sent, devices, err := lookUpClaims(ctx, client, opts.Driver, opts.Claims)
	if err != nil {
		return nil, err
	}
	taintsBefore, err := deviceTaints(ctx, client, opts.Driver, devices)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+opts.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("driver socket %s: %w", opts.Socket, err)
	}
	defer func() { _ = conn.Close() }()
	plugin := drapbv1.NewDRAPluginClient(conn)

	callCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	if !opts.AllowTaint {
		// A driver on the library then reports a device fault without
		// tainting the device: the check leaves the cluster as it was.
		callCtx = metadata.AppendToOutgoingContext(callCtx, failfastplugin.NoTaintMetadataKey, "true")
	}
	resp, callErr := plugin.NodePrepareResources(callCtx, &drapbv1.NodePrepareResourcesRequest{Claims: sent})
	cancel()
	report := &Report{Driver: opts.Driver}
	if callErr != nil {
		report.CallError = callErr.Error()
	}
	classified := decision.Classify(opts.Driver, sent, resp, callErr, true) // as the fork with its gate on
	policy := opts.Policy
	if policy == nil {
		policy = &decision.DriverFailurePolicy{}
	}
	report.NodePolicy = decision.PolicyDecision(policy, classified)
	results := underPolicy(policy, classified)
	for i, claim := range sent {
		report.Claims = append(report.Claims, describe(claim, resp.GetClaims()[claim.GetUid()], results[i]))
	}

	// Unprepare whatever the driver may have prepared, as the kubelet does
	// for a failed pod too: all claims, in one call. Not a claim that a pod
	// reserved since it was looked up: the kubelet owns its preparation now
	// (its prepare finds the claim prepared), and unpreparing it would break
	// that pod.
	unprepare, reservedNow := stillUnreserved(ctx, client, sent)
	var (
		unprep    *drapbv1.NodeUnprepareResourcesResponse
		unprepErr error
	)
	if len(unprepare) > 0 {
		callCtx, cancel = context.WithTimeout(ctx, opts.Timeout)
		unprep, unprepErr = plugin.NodeUnprepareResources(callCtx, &drapbv1.NodeUnprepareResourcesRequest{Claims: unprepare})
		cancel()
	}
	for i := range report.Claims {
		claim := &report.Claims[i]
		if consumer, reserved := reservedNow[claim.UID]; reserved {
			claim.Unprepared = "not unprepared: reserved for " + consumer + " since the check looked it up; the kubelet owns its preparation now"
			continue
		}
		switch result, ok := unprep.GetClaims()[claim.UID]; {
		case unprepErr != nil:
			claim.Unprepared = "NodeUnprepareResources failed: " + unprepErr.Error()
		case !ok:
			claim.Unprepared = "no result for the claim"
		case result.GetError() != "":
			claim.Unprepared = result.GetError()
		default:
			claim.Unprepared = "ok"
		}
	}
	var errs []error
	if unprepErr != nil {
		errs = append(errs, fmt.Errorf("NodeUnprepareResources: %w (the claims may still be prepared)", unprepErr))
	}
	taintsAfter, err := deviceTaints(ctx, client, opts.Driver, devices)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: the driver may have tainted devices, look at its ResourceSlices and DeviceTaintRules", err))
	}
	report.TaintedDevices = newTaints(taintsBefore, taintsAfter)
	if len(report.TaintedDevices) > 0 && !opts.AllowTaint {
		errs = append(errs, fmt.Errorf("%w although the check asked it not to (a driver not built on failfastplugin v0.1.0 or later; see the report); run with -allow-taint to accept that", ErrTainted))
	}
	return report, errors.Join(errs...)
}

// deviceRef is a device of the driver that a checked claim is allocated.
type deviceRef struct{ pool, device string }

// deviceTaints returns the taints of devices: those in the driver's
// ResourceSlices (the newest generation of each pool, which is what the
// scheduler uses) and those of the DeviceTaintRules that select them (how
// failfastplugin taints a device with a fault).
func deviceTaints(ctx context.Context, client kubernetes.Interface, driver string, devices []deviceRef) ([]DeviceTaint, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, driver).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the ResourceSlices of driver %s: %w", driver, err)
	}
	newest := map[string]int64{}
	for _, slice := range list.Items {
		newest[slice.Spec.Pool.Name] = max(newest[slice.Spec.Pool.Name], slice.Spec.Pool.Generation)
	}
	var taints []DeviceTaint
	add := func(device deviceRef, taint resourceapi.DeviceTaint) {
		taints = append(taints, DeviceTaint{Pool: device.pool, Device: device.device, Key: taint.Key, Value: taint.Value, Effect: string(taint.Effect)})
	}
	for _, slice := range list.Items {
		if slice.Spec.Pool.Generation != newest[slice.Spec.Pool.Name] {
			continue
		}
		for _, device := range slice.Spec.Devices {
			ref := deviceRef{pool: slice.Spec.Pool.Name, device: device.Name}
			if !slices.Contains(devices, ref) {
				continue
			}
			for _, taint := range device.Taints {
				add(ref, taint)
			}
		}
	}
	rules, err := ListDeviceTaintRules(ctx, client, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Not served by this API server: nothing can be tainted that way.
		return taints, nil
	case err != nil:
		return nil, fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	matches := func(value *string, want string) bool { return value == nil || *value == want }
	for _, rule := range rules {
		selector := rule.Spec.DeviceSelector
		if selector == nil || !matches(selector.Driver, driver) {
			continue
		}
		for _, device := range devices {
			if matches(selector.Pool, device.pool) && matches(selector.Device, device.device) {
				add(device, rule.Spec.Taint)
			}
		}
	}
	return taints, nil
}

// ListDeviceTaintRules lists the DeviceTaintRules that opts selects in
// resource.k8s.io/v1 (Kubernetes 1.37), else in v1beta2 (1.36), else in
// v1alpha3 (1.35): the first version the API server serves, where the driver
// library writes them. They are returned as v1 objects with their name,
// labels, selector and taint. NotFound: served in none.
func ListDeviceTaintRules(ctx context.Context, client kubernetes.Interface, opts metav1.ListOptions) ([]resourceapi.DeviceTaintRule, error) {
	list, err := client.ResourceV1().DeviceTaintRules().List(ctx, opts)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	v1beta2, err := client.ResourceV1beta2().DeviceTaintRules().List(ctx, opts)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return nil, err
		}
		return asV1Rules(v1beta2.Items)
	}
	v1alpha3, err := client.ResourceV1alpha3().DeviceTaintRules().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return asV1Rules(v1alpha3.Items)
}

// asV1Rules converts DeviceTaintRules of an older API version to v1 through
// their JSON form: the fields the check and the tests read (name, labels,
// selector by driver, pool and device, taint) are spelled the same in every
// version; what v1 lacks is dropped.
func asV1Rules(items any) ([]resourceapi.DeviceTaintRule, error) {
	data, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	var rules []resourceapi.DeviceTaintRule
	if err := json.Unmarshal(data, &rules); err != nil {
		return nil, fmt.Errorf("DeviceTaintRules as resource.k8s.io/v1: %w", err)
	}
	return rules, nil
}

// newTaints returns the taints in after that are not in before.
func newTaints(before, after []DeviceTaint) []DeviceTaint {
	var added []DeviceTaint
	for _, taint := range after {
		if !slices.Contains(before, taint) {
			added = append(added, taint)
		}
	}
	return added
}

// lookUpClaims reads the claims from the API and builds the request the
// kubelet would send. It refuses claims it must not touch.
func lookUpClaims(ctx context.Context, client kubernetes.Interface, driver string, refs []string) ([]*drapbv1.Claim, []deviceRef, error) {
	var (
		sent    []*drapbv1.Claim
		devices []deviceRef
		errs    []error
	)
	for _, ref := range refs {
		namespace, name, ok := strings.Cut(ref, "/")
		if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("%w: %q is not namespace/name", ErrRefused, ref))
			continue
		}
		claim, err := client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: ResourceClaim %s: %w", ErrRefused, ref, err))
			continue
		}
		if err := checkable(claim, driver); err != nil {
			errs = append(errs, fmt.Errorf("%w: ResourceClaim %s: %w", ErrRefused, ref, err))
			continue
		}
		sent = append(sent, &drapbv1.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)})
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.Driver == driver {
				devices = append(devices, deviceRef{pool: result.Pool, device: result.Device})
			}
		}
	}
	return sent, devices, errors.Join(errs...)
}

// stillUnreserved returns the claims of sent that no pod reserved since
// lookUpClaims, and for the others by UID the consumer that reserved them.
// A claim that cannot be read again (gone, an API error) is unprepared all
// the same: nothing else can own it, or it was free a moment ago, and a
// prepared device must not leak.
func stillUnreserved(ctx context.Context, client kubernetes.Interface, sent []*drapbv1.Claim) ([]*drapbv1.Claim, map[string]string) {
	var free []*drapbv1.Claim
	reserved := map[string]string{}
	for _, sentClaim := range sent {
		claim, err := client.ResourceV1().ResourceClaims(sentClaim.GetNamespace()).Get(ctx, sentClaim.GetName(), metav1.GetOptions{})
		if err == nil && string(claim.UID) == sentClaim.GetUid() && len(claim.Status.ReservedFor) > 0 {
			consumer := claim.Status.ReservedFor[0]
			reserved[sentClaim.GetUid()] = consumer.Resource + " " + consumer.Name
			continue
		}
		free = append(free, sentClaim)
	}
	return free, reserved
}

// checkable tells why claim cannot be checked with driver, if it cannot.
func checkable(claim *resourceapi.ResourceClaim, driver string) error {
	if claim.Status.Allocation == nil {
		return errors.New("not allocated: the kubelet prepares only allocated claims")
	}
	ours := false
	for _, result := range claim.Status.Allocation.Devices.Results {
		ours = ours || result.Driver == driver
	}
	if !ours {
		return fmt.Errorf("no device of driver %s is allocated to it", driver)
	}
	if len(claim.Status.ReservedFor) > 0 {
		consumer := claim.Status.ReservedFor[0]
		return fmt.Errorf("reserved for %s %s: the kubelet owns its preparation, and unpreparing it here would break that pod", consumer.Resource, consumer.Name)
	}
	return nil
}

// describe turns one claim's answer into its report.
func describe(claim *drapbv1.Claim, resp *drapbv1.NodePrepareResourceResponse, result decision.ClaimResult) ClaimReport {
	report := ClaimReport{Namespace: claim.GetNamespace(), Name: claim.GetName(), UID: claim.GetUid(), Error: resp.GetError(), Downgraded: result.Downgraded}
	for _, device := range resp.GetDevices() {
		report.CDIDevices = append(report.CDIDevices, device.GetCdiDeviceIds()...)
	}
	if resp != nil {
		field, _ := v1alpha.OnlyField(resp.ProtoReflect().GetUnknown(), v1alpha.ErrorTypeFieldNumber)
		report.ErrorTypeBytes = hex.EncodeToString(field)
	}
	switch errorType, err := v1alpha.DecodeErrorType(resp); {
	case err != nil:
		report.ErrorType = err.Error()
	case report.ErrorTypeBytes == "":
		report.ErrorType = "absent (ERROR_TYPE_UNKNOWN)"
	default:
		report.ErrorType = errorType.String()
	}
	switch result.Outcome {
	case decision.Prepared:
		report.Decision = DecisionPrepared
		report.Why = "the driver prepared the claim; the pod's containers can start"
		if result.Downgraded != "" {
			report.Why += fmt.Sprintf(" (error_type ERROR_TYPE_PERMANENT with an empty error means success: %s)", result.Downgraded)
		}
	case decision.FailedPermanent:
		report.Decision = DecisionPermanent
		report.Why = "the pod fails (reason " + decision.PodFailedReason + "), the driver is not asked again for it and its claims are unprepared; " +
			"for a pod that may have run (a sandbox, containers, or claims prepared for it before) the error is downgraded to transient and retried"
	default:
		report.Decision = DecisionTransient
		report.Why = "the kubelet retries at the pod's next resync (syncFrequency, 1m by default)"
		if result.Downgraded != "" {
			report.Why = fmt.Sprintf("not taken as permanent (%s); ", result.Downgraded) + report.Why
		}
	}
	return report
}

// underPolicy returns the claims' results as the node's policy leaves them
// for one attempt: a driver whose Permanent answers the policy ignores gets
// them back transient (a retry budget needs the attempts of a real pod, so
// the report only names it).
func underPolicy(policy *decision.DriverFailurePolicy, classified decision.DriverResult) []decision.ClaimResult {
	results := slices.Clone(classified.Claims)
	if policy.RuleFor(classified.Driver).Action() != decision.PermanentIgnore {
		return results
	}
	for i := range results {
		if results[i].Outcome == decision.FailedPermanent {
			results[i].Outcome, results[i].Downgraded = decision.FailedTransient, decision.DowngradePolicyIgnore
		}
	}
	return results
}

// Text renders the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "driver %s\n", r.Driver)
	if r.NodePolicy != "" {
		fmt.Fprintf(&b, "node policy: %s\n", r.NodePolicy)
	}
	if r.CallError != "" {
		fmt.Fprintf(&b, "NodePrepareResources failed as a whole: %s\n", r.CallError)
	}
	for _, c := range r.Claims {
		fmt.Fprintf(&b, "\nResourceClaim %s/%s (UID %s)\n", c.Namespace, c.Name, c.UID)
		if c.Error == "" {
			fmt.Fprintf(&b, "  driver answered:    prepared, CDI devices %s\n", strings.Join(c.CDIDevices, ", "))
		} else {
			fmt.Fprintf(&b, "  driver answered:    error %q\n", c.Error)
		}
		raw := c.ErrorTypeBytes
		if raw == "" {
			raw = "none"
		}
		fmt.Fprintf(&b, "  field 3 on the wire: %s -> error_type %s\n", raw, c.ErrorType)
		fmt.Fprintf(&b, "  the fork decides:   %s: %s\n", c.Decision, c.Why)
		fmt.Fprintf(&b, "  unprepared:         %s\n", c.Unprepared)
	}
	if len(r.TaintedDevices) > 0 {
		fmt.Fprintf(&b, "\nThe driver tainted devices during the check (it reported them broken):\n")
		for _, taint := range r.TaintedDevices {
			fmt.Fprintf(&b, "  %s\n", taint)
		}
		fmt.Fprintf(&b, "The scheduler avoids them until the fault is cleared: a driver built with failfastplugin\n"+
			"keeps each as a DeviceTaintRule (kubectl get devicetaintrules -l %s=%s), which outlives\n"+
			"the driver process and goes with ClearDeviceFault (once the device is repaired) or when an\n"+
			"operator deletes it.\n", failfastplugin.DeviceTaintRuleDriverLabel, r.Driver)
	}
	return b.String()
}
