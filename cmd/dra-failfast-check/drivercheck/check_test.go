// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package drivercheck

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

const driver = "driver.example.com"

func claim(name string, allocatedTo string, reservedFor ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	if allocatedTo != "" {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "dev", Driver: allocatedTo, Pool: "node", Device: "dev-0"}},
		}}
	}
	for _, pod := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: "pod-uid"})
	}
	return c
}

func TestLookUpClaims(t *testing.T) {
	client := fake.NewClientset(
		claim("ok", driver),
		claim("unallocated", ""),
		claim("other-driver", "other.example.com"),
		claim("in-use", driver, "app"),
	)
	sent, _, err := lookUpClaims(t.Context(), client, driver, []string{"ns/ok"})
	if err != nil || len(sent) != 1 || sent[0].GetUid() != "uid-ok" || sent[0].GetNamespace() != "ns" || sent[0].GetName() != "ok" {
		t.Fatalf("lookUpClaims(ns/ok) = %v, %v", sent, err)
	}
	for ref, want := range map[string]string{
		"ns/unallocated":  "not allocated",
		"ns/other-driver": "no device of driver " + driver,
		"ns/in-use":       "reserved for pods app",
		"ns/missing":      "not found",
		"just-a-name":     `"just-a-name" is not namespace/name`,
		"ns/a/b":          "is not namespace/name",
	} {
		t.Run(ref, func(t *testing.T) {
			sent, _, err := lookUpClaims(t.Context(), client, driver, []string{"ns/ok", ref})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want ErrRefused with %q", err, want)
			}
			if len(sent) != 1 {
				t.Errorf("the good claim was dropped: %v", sent)
			}
		})
	}
}

// TestStillUnreserved: a claim that a pod reserved after the lookup is not
// unprepared; an unchanged claim, a deleted one and a new claim of the same
// name (another UID) are.
func TestStillUnreserved(t *testing.T) {
	sent := []*drapbv1.Claim{
		{Namespace: "ns", Name: "free", Uid: "uid-free"},
		{Namespace: "ns", Name: "taken", Uid: "uid-taken"},
		{Namespace: "ns", Name: "gone", Uid: "uid-gone"},
		{Namespace: "ns", Name: "recreated", Uid: "uid-recreated-before"},
	}
	client := fake.NewClientset(claim("free", driver), claim("taken", driver, "app"), claim("recreated", driver, "other-app"))
	free, reserved := stillUnreserved(t.Context(), client, sent)
	var names []string
	for _, c := range free {
		names = append(names, c.GetName())
	}
	if got, want := strings.Join(names, ","), "free,gone,recreated"; got != want {
		t.Errorf("unprepared %s, want %s", got, want)
	}
	if len(reserved) != 1 || reserved["uid-taken"] != "pods app" {
		t.Errorf("reserved since the lookup: %v, want uid-taken by pods app", reserved)
	}
}

func response(errText string, field []byte) *drapbv1.NodePrepareResourceResponse {
	resp := &drapbv1.NodePrepareResourceResponse{Error: errText}
	if errText == "" {
		resp.Devices = []*drapbv1.Device{{RequestNames: []string{"dev"}, PoolName: "node", DeviceName: "dev-0", CdiDeviceIds: []string{"example.com/dev=dev-0"}}}
	}
	resp.ProtoReflect().SetUnknown(field)
	return resp
}

func TestDescribe(t *testing.T) {
	permanent := protowire.AppendVarint(protowire.AppendTag(nil, v1alpha.ErrorTypeFieldNumber, protowire.VarintType), 1)
	unknownValue := protowire.AppendVarint(protowire.AppendTag(nil, v1alpha.ErrorTypeFieldNumber, protowire.VarintType), 9)
	sent := &drapbv1.Claim{Namespace: "ns", Name: "c", Uid: "uid-c"}
	for name, tc := range map[string]struct {
		resp                     *drapbv1.NodePrepareResourceResponse
		decision, bytes, errType string
		downgraded               string
	}{
		"prepared":          {response("", nil), DecisionPrepared, "", "absent (ERROR_TYPE_UNKNOWN)", ""},
		"permanent":         {response("bad config", permanent), DecisionPermanent, "1801", "ERROR_TYPE_PERMANENT", ""},
		"transient":         {response("busy", nil), DecisionTransient, "", "absent (ERROR_TYPE_UNKNOWN)", ""},
		"unknown value":     {response("busy", unknownValue), DecisionTransient, "1809", "unknown error_type value: 9", decision.DowngradeUnknownErrorType},
		"permanent, no err": {response("", permanent), DecisionPrepared, "1801", "ERROR_TYPE_PERMANENT", decision.DowngradeEmptyError},
		"truncated":         {response("busy", []byte{0x18}), DecisionTransient, "18", "malformed", decision.DowngradeMalformedErrorType},
	} {
		t.Run(name, func(t *testing.T) {
			resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{"uid-c": tc.resp}}
			result := decision.Classify(driver, []*drapbv1.Claim{sent}, resp, nil, true)
			got := describe(sent, tc.resp, result.Claims[0])
			if got.Decision != tc.decision || got.ErrorTypeBytes != tc.bytes || !strings.Contains(got.ErrorType, tc.errType) || got.Downgraded != tc.downgraded {
				t.Errorf("describe = %+v\nwant decision %s, bytes %q, error_type %q, downgraded %q", got, tc.decision, tc.bytes, tc.errType, tc.downgraded)
			}
			if got.Why == "" {
				t.Error("no reason given")
			}
		})
	}
}

func TestText(t *testing.T) {
	r := &Report{Driver: driver, Claims: []ClaimReport{
		{Namespace: "ns", Name: "ok", UID: "u1", CDIDevices: []string{"example.com/dev=dev-0"}, ErrorType: "absent (ERROR_TYPE_UNKNOWN)", Decision: DecisionPrepared, Why: "w", Unprepared: "ok"},
		{Namespace: "ns", Name: "bad", UID: "u2", Error: "bad config", ErrorTypeBytes: "1801", ErrorType: "ERROR_TYPE_PERMANENT", Decision: DecisionPermanent, Why: "w", Unprepared: "ok"},
	}}
	text := r.Text()
	for _, want := range []string{
		"ResourceClaim ns/ok (UID u1)", "prepared, CDI devices example.com/dev=dev-0", "field 3 on the wire: none -> error_type absent (ERROR_TYPE_UNKNOWN)",
		`error "bad config"`, "field 3 on the wire: 1801 -> error_type ERROR_TYPE_PERMANENT", "the fork decides:   permanent: w",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

// TestDeviceTaints: the check sees the taints of exactly the claims' devices,
// in the newest generation of their pool and in the DeviceTaintRules that
// select them, and reports those that the driver added during the check,
// with how to clear them.
func TestDeviceTaints(t *testing.T) {
	taint := resourceapi.DeviceTaint{Key: "dra-failfast.io/device-fault", Value: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	old := resourceapi.DeviceTaint{Key: "maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	slice := func(name string, generation int64, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, Pool: resourceapi.ResourcePool{Name: "node", Generation: generation, ResourceSliceCount: 1}, Devices: devices,
		}}
	}
	client := fake.NewClientset(
		slice("stale", 1, resourceapi.Device{Name: "dev-0", Taints: []resourceapi.DeviceTaint{taint, old}}),
		slice("current", 2,
			resourceapi.Device{Name: "dev-0", Taints: []resourceapi.DeviceTaint{old}},
			resourceapi.Device{Name: "dev-1", Taints: []resourceapi.DeviceTaint{taint}}),
	)
	devices := []deviceRef{{pool: "node", device: "dev-0"}}
	before, err := deviceTaints(t.Context(), client, driver, devices)
	if err != nil || len(before) != 1 || before[0].Key != "maintenance" {
		t.Fatalf("taints before = %v, %v; want the current slice's taint of dev-0 only", before, err)
	}
	rule := func(name, driverName, pool, device string) *resourceapi.DeviceTaintRule {
		return &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: &driverName, Pool: &pool, Device: &device}, Taint: taint}}
	}
	for _, r := range []*resourceapi.DeviceTaintRule{
		rule("fault", driver, "node", "dev-0"),
		rule("other-device", driver, "node", "dev-1"),
		rule("other-driver", "other.example.com", "node", "dev-0"),
	} {
		if _, err := client.ResourceV1().DeviceTaintRules().Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := deviceTaints(t.Context(), client, driver, devices)
	if err != nil {
		t.Fatal(err)
	}
	added := newTaints(before, after)
	if len(added) != 1 || added[0].String() != "node/dev-0 dra-failfast.io/device-fault=broken:NoSchedule" {
		t.Fatalf("new taints = %v", added)
	}
	text := (&Report{Driver: driver, TaintedDevices: added}).Text()
	for _, want := range []string{"The driver tainted devices during the check", "node/dev-0 dra-failfast.io/device-fault=broken:NoSchedule", "ClearDeviceFault", "kubectl get devicetaintrules -l dra-failfast.io/driver=" + driver} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestUnderPolicy(t *testing.T) {
	policy, err := decision.ParseDriverPolicy([]byte("apiVersion: dra-failfast.io/v1alpha1\nkind: DriverFailurePolicy\ndrivers:\n- driver: ignored.example.com\n  permanent: Ignore\n"))
	if err != nil {
		t.Fatal(err)
	}
	claims := []decision.ClaimResult{{Outcome: decision.FailedPermanent}, {Outcome: decision.Prepared}}
	for _, tc := range []struct {
		driver string
		want   decision.Outcome
	}{{"ignored.example.com", decision.FailedTransient}, {"honored.example.com", decision.FailedPermanent}} {
		got := underPolicy(policy, decision.DriverResult{Driver: tc.driver, Claims: claims})
		if got[0].Outcome != tc.want || got[1].Outcome != decision.Prepared {
			t.Errorf("%s: outcomes %v, %v; want %v, Prepared", tc.driver, got[0].Outcome, got[1].Outcome, tc.want)
		}
		if ignored := tc.want == decision.FailedTransient; ignored != (got[0].Downgraded == decision.DowngradePolicyIgnore) {
			t.Errorf("%s: downgraded %q", tc.driver, got[0].Downgraded)
		}
	}
	if claims[0].Outcome != decision.FailedPermanent {
		t.Error("underPolicy changed its input")
	}
}
