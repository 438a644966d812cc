// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dra-failfast/dra-failfast/cmd/dra-failfast-check/drivercheck"
	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// demoClaim creates a ResourceClaim in ns with the spec of the demo's claim
// template name (demo/<name>.yaml), for driver d instead of the default
// driver, and allocates device to it as the scheduler would, for no pod.
func demoClaim(t *testing.T, ns, name string, d *e2eframework.Driver, device string) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "demo", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl *resourceapi.ResourceClaimTemplate
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err == nil {
			if found, ok := obj.(*resourceapi.ResourceClaimTemplate); ok {
				tmpl = found
			}
		}
	}
	if tmpl == nil {
		t.Fatalf("demo/%s.yaml has no ResourceClaimTemplate", name)
	}
	spec := tmpl.Spec.Spec
	var configs []resourceapi.DeviceAllocationConfiguration
	for i := range spec.Devices.Requests {
		spec.Devices.Requests[i].Exactly.DeviceClassName = d.DeviceClass()
	}
	for i := range spec.Devices.Config {
		spec.Devices.Config[i].Opaque.Driver = d.Name()
		configs = append(configs, resourceapi.DeviceAllocationConfiguration{
			Source: resourceapi.AllocationConfigSourceClaim, Requests: spec.Devices.Config[i].Requests, DeviceConfiguration: spec.Devices.Config[i].DeviceConfiguration,
		})
	}
	claim, err := client.ResourceV1().ResourceClaims(ns).Create(t.Context(), &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: spec.Devices.Requests[0].Name, Driver: d.Name(), Pool: cluster.NodeName(), Device: device}},
		Config:  configs,
	}}
	if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(t.Context(), claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
}

// runCheck runs the dra-failfast-check binary of make build.
func runCheck(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	binary, err := localcluster.OutputPath("bin", "dra-failfast-check")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), binary, append([]string{"-kubeconfig", cluster.Kubeconfig()}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// dra-failfast-check on the demo's three claims: what the driver answered,
// the raw error_type bytes, the fork's decision, and nothing left prepared.
func TestCheckTool(t *testing.T) {
	t.Parallel()
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "check.dra-failfast.test", Devices: 4})
	ns := namespaceFor(t)
	for i, name := range []string{"healthy", "permanent", "transient"} {
		demoClaim(t, ns, name, d, fmt.Sprintf("dev-%d", i))
	}
	args := []string{"-driver", d.Name(), "-socket", d.DRASocketPath(), ns + "/healthy", ns + "/permanent", ns + "/transient"}

	// The text form, for people, on the first call: the transient claim
	// fails once (demo/transient.yaml).
	text, stderr, err := runCheck(t, args...)
	if err != nil {
		t.Fatalf("dra-failfast-check: %v\n%s%s", err, text, stderr)
	}
	t.Logf("dra-failfast-check output:\n%s", text)
	for _, line := range []string{
		"ResourceClaim " + ns + "/healthy", "the fork decides:   prepared:",
		"ResourceClaim " + ns + "/permanent", "field 3 on the wire: 1801 -> error_type ERROR_TYPE_PERMANENT", "the fork decides:   permanent:",
		"ResourceClaim " + ns + "/transient", "the fork decides:   transient:", "field 3 on the wire: none -> error_type absent (ERROR_TYPE_UNKNOWN)",
		"unprepared:         ok",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("text output lacks %q", line)
		}
	}

	// JSON, on the second call: the transient claim's one failure is spent.
	out, stderr, err := runCheck(t, append([]string{"-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("dra-failfast-check: %v\n%s%s", err, out, stderr)
	}
	var report drivercheck.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, out)
	}
	want := map[string]struct{ decision, bytes, errorType string }{
		"healthy":   {drivercheck.DecisionPrepared, "", "absent (ERROR_TYPE_UNKNOWN)"},
		"permanent": {drivercheck.DecisionPermanent, "1801", "ERROR_TYPE_PERMANENT"},
		"transient": {drivercheck.DecisionPrepared, "", "absent (ERROR_TYPE_UNKNOWN)"},
	}
	if len(report.Claims) != len(want) {
		t.Fatalf("%d claims reported, want %d: %+v", len(report.Claims), len(want), report)
	}
	for _, c := range report.Claims {
		w := want[c.Name]
		if c.Decision != w.decision || c.ErrorTypeBytes != w.bytes || c.ErrorType != w.errorType || c.Unprepared != "ok" {
			t.Errorf("%s: %+v\nwant decision %s, field 3 %q (%s), unprepared ok", c.Name, c, w.decision, w.bytes, w.errorType)
		}
		if (c.Decision == drivercheck.DecisionPrepared) != (len(c.CDIDevices) > 0) || (c.Decision == drivercheck.DecisionPrepared) == (c.Error != "") {
			t.Errorf("%s: error %q with CDI devices %v", c.Name, c.Error, c.CDIDevices)
		}
	}
	// The driver saw exactly the kubelet's calls: two checks, each one
	// prepare and one unprepare per claim, and nothing stays prepared.
	stats, err := d.Client.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		claim, ok := stats.Claim(ns, name)
		if !ok || claim.PrepareCalls != 2 || claim.UnprepareCalls != 2 || claim.Prepared {
			t.Errorf("driver's view of %s: %+v, want 2 prepare, 2 unprepare, not prepared", name, claim)
		}
	}
	for _, c := range report.Claims {
		if _, err := os.Stat(testdriver.CDISpecPath(cluster.CDISpecDir(), d.Name(), types.UID(c.UID))); !os.IsNotExist(err) {
			t.Errorf("%s: CDI spec left behind (stat: %v)", c.Name, err)
		}
	}

	// Claims it must not touch are refused, by name, and the driver is not called.
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(t.Context(), &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unallocated"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: d.DeviceClass()},
		}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runCheck(t, "-driver", d.Name(), "-socket", d.DRASocketPath(), ns+"/unallocated", ns+"/missing")
	if err == nil || !strings.Contains(stderr, ns+"/unallocated: not allocated") || !strings.Contains(stderr, ns+"/missing") {
		t.Errorf("unallocated and missing claims: err %v, stderr %s", err, stderr)
	}
	if after, _ := d.Client.Stats(t.Context()); len(after.Claims) != len(stats.Claims) {
		t.Errorf("the driver was called for refused claims: %d claims seen, before %d", len(after.Claims), len(stats.Claims))
	}
}

// dra-failfast-check on a claim whose device the driver finds broken: by
// default the check asks the driver for no taint, and a driver started with
// StartWithDeviceFaults fails the claim permanently without tainting (the
// cluster stays as it was, exit 0); with -allow-taint the driver taints the
// device in the live cluster as for the kubelet, and the check names the
// tainted device and how to clear it.
func TestCheckToolDeviceFault(t *testing.T) {
	t.Parallel()
	d := startDriver(t, e2eframework.DriverOptions{DriverName: "checktaint.dra-failfast.test", Devices: 2, TaintBroken: true})
	ns := namespaceFor(t)
	demoClaim(t, ns, "healthy", d, "dev-1")
	broken := cluster.NodeName() + "/dev-1 " + failfastplugin.DefaultDeviceFaultTaintKey + "="
	args := []string{"-driver", d.Name(), "-socket", d.DRASocketPath(), ns + "/healthy"}
	setBroken := func(on bool) {
		t.Helper()
		if err := d.Client.SetBroken(t.Context(), "dev-1", on); err != nil {
			t.Fatalf("set dev-1 broken=%v: %v", on, err)
		}
	}

	setBroken(true)
	out, stderr, err := runCheck(t, args...)
	if err != nil {
		t.Fatalf("without -allow-taint: %v, want exit 0\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"permanent", "not tainted: the caller asked for no taint"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "The driver tainted devices during the check") {
		t.Errorf("output reports tainted devices:\n%s", out)
	}
	if !strings.Contains(stderr, "asked not to taint") {
		t.Errorf("stderr does not say the driver is asked not to taint:\n%s", stderr)
	}
	if taints := deviceTaints(t, d); len(taints) != 0 {
		t.Errorf("the check without -allow-taint left taints: %v", taints)
	}

	// With -allow-taint: tainted, reported, exit 0; then repaired.
	setBroken(true)
	out, stderr, err = runCheck(t, append([]string{"-allow-taint"}, args...)...)
	if err != nil || !strings.Contains(out, broken) {
		t.Errorf("with -allow-taint: %v, want exit 0 and %q reported\n%s%s", err, broken, out, stderr)
	}
	setBroken(false)
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(deviceTaints(t, d)) == 0, nil
	}); err != nil {
		t.Errorf("taint not cleared after the repair: %v", deviceTaints(t, d))
	}
}
