// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"context"
	"errors"
	"io"
	"k8s.io/client-go/kubernetes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// TestRoundTrip starts the driver the way cmd/dra-test-driver does (Start:
// failfastplugin.StartWithDeviceFaults on unix sockets under a kubelet root
// dir in a temp dir) against a fake API server, and talks to it like the
// kubelet does with the stock v1 DRA gRPC client: only the permanently
// failing claims carry error_type = Permanent on the wire, and the broken
// device is tainted before its answer comes back.
func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	rootDir := t.TempDir()
	cdiDir := t.TempDir()

	const (
		invalid   = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Explode"}`
		permanent = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"injected"}`
		transient = `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":2}`
	)
	claims := map[string]*resourceapi.ResourceClaim{
		"healthy":   newClaim("healthy", oneDevice("dev-0")),
		"invalid":   newClaim("invalid", oneDevice("dev-0"), claimConfig(invalid, "dev")),
		"permanent": newClaim("permanent", oneDevice("dev-2"), claimConfig(permanent)),
		"transient": newClaim("transient", oneDevice("dev-3"), claimConfig(transient, "dev")),
		"broken":    newClaim("broken", oneDevice("dev-1")),
	}
	var objects []*resourceapi.ResourceClaim
	for _, claim := range claims {
		objects = append(objects, claim)
	}
	client := fakeClusterClient(t, objects...)

	running, err := Start(ctx, Options{
		Config: Config{
			NodeName:         testNode,
			CDIDir:           cdiDir,
			BrokenDevices:    []string{"dev-1"},
			TaintBroken:      true,
			KubeClient:       client,
			TaintWaitTimeout: 30 * time.Second,
		},
		KubeletRootDir: rootDir,
		StatsAddress:   "127.0.0.1:0",
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(running.Stop)

	// The ResourceSlice shows up, without taints.
	slice := waitForSlice(ctx, t, client, func(slice *resourceapi.ResourceSlice) bool { return len(slice.Spec.Devices) == DefaultNumDevices })
	if slice.Spec.Driver != testDriver || slice.Spec.Pool.Name != testNode {
		t.Errorf("slice = %+v", slice.Spec)
	}

	// Registration socket: what the kubelet finds in plugins_registry.
	regConn := dial(t, filepath.Join(RegistrarDir(rootDir), testDriver+"-reg.sock"))
	info, err := registerapi.NewRegistrationClient(regConn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	draSocket := filepath.Join(PluginDataDir(rootDir, testDriver), "dra.sock")
	if info.Name != testDriver || info.Endpoint != draSocket || !slices.Contains(info.SupportedVersions, drapbv1.DRAPluginService) {
		t.Errorf("GetInfo = %+v", info)
	}

	plugin := drapbv1.NewDRAPluginClient(dial(t, draSocket))
	prepare := func(names ...string) map[string]*drapbv1.NodePrepareResourceResponse {
		t.Helper()
		req := &drapbv1.NodePrepareResourcesRequest{}
		for _, name := range names {
			claim := claims[name]
			req.Claims = append(req.Claims, &drapbv1.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)})
		}
		resp, err := plugin.NodePrepareResources(ctx, req)
		if err != nil {
			t.Fatalf("NodePrepareResources: %v", err)
		}
		byName := map[string]*drapbv1.NodePrepareResourceResponse{}
		for _, name := range names {
			byName[name] = resp.Claims[string(claims[name].UID)]
			if byName[name] == nil {
				t.Fatalf("no result for claim %s", name)
			}
		}
		return byName
	}

	results := prepare("healthy", "invalid", "permanent", "transient", "broken")
	for name, want := range map[string]struct {
		errContains string // empty: success
		permanent   bool
	}{
		"healthy":   {},
		"invalid":   {errContains: `prepare "Explode" is not one of "Succeed", "Permanent", "Transient" [ResourceClaim ns/invalid: invalid opaque device config #0 (source ResourceClaim) for request "dev" of driver driver.dra-failfast.test]`, permanent: true},
		"permanent": {errContains: "claim ns/permanent: injected", permanent: true},
		"transient": {errContains: "injected transient failure (failure 1 of 2)"},
		"broken":    {errContains: "device dev-1 is broken", permanent: true},
	} {
		res := results[name]
		if want.errContains == "" {
			if res.Error != "" {
				t.Errorf("%s: error %q, want success", name, res.Error)
			}
		} else if !strings.Contains(res.Error, want.errContains) {
			t.Errorf("%s: error %q, want %q", name, res.Error, want.errContains)
		}
		wantType := v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN
		if want.permanent {
			wantType = v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT
		}
		if got := v1alpha.GetErrorType(res); got != wantType {
			t.Errorf("%s: error_type = %v, want %v", name, got, wantType)
		}
	}
	healthy := results["healthy"]
	wantCDI := "dra-failfast.test/device=" + cdiDeviceName(string(claims["healthy"].UID), "dev", "dev-0")
	if len(healthy.Devices) != 1 || healthy.Devices[0].DeviceName != "dev-0" || healthy.Devices[0].PoolName != testNode ||
		!slices.Equal(healthy.Devices[0].CdiDeviceIds, []string{wantCDI}) || !slices.Equal(healthy.Devices[0].RequestNames, []string{"dev"}) {
		t.Errorf("healthy devices = %v, want CDI device %s", healthy.Devices, wantCDI)
	}
	healthySpec := CDISpecPath(cdiDir, testDriver, claims["healthy"].UID)
	if _, err := os.Stat(healthySpec); err != nil {
		t.Errorf("CDI spec of healthy claim: %v", err)
	}

	// The broken device got tainted before the error came back.
	rules, err := client.ResourceV1beta2().DeviceTaintRules().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tainted := ruleDevices(rules.Items); !slices.Equal(tainted, []string{"dev-1"}) {
		t.Errorf("tainted in the API: %v, want [dev-1]", tainted)
	}

	// Transient: two failures, then success; nothing permanent on the way.
	for call := 2; call <= 3; call++ {
		res := prepare("transient")["transient"]
		if (res.Error != "") != (call == 2) || v1alpha.GetErrorType(res) != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
			t.Errorf("transient call %d: error %q, error_type %v", call, res.Error, v1alpha.GetErrorType(res))
		}
	}

	// Unprepare removes the CDI spec.
	unprep, err := plugin.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: testNamespace, Name: "healthy", Uid: string(claims["healthy"].UID)},
	}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	if res := unprep.Claims[string(claims["healthy"].UID)]; res == nil || res.Error != "" {
		t.Errorf("unprepare: %v", res)
	}
	if _, err := os.Stat(healthySpec); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}

	// The counters, through the HTTP endpoint.
	statsClient := &Client{BaseURL: "http://" + running.StatsAddress}
	if err := statsClient.Healthz(ctx); err != nil {
		t.Errorf("Healthz: %v", err)
	}
	stats, err := statsClient.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for name, want := range map[string][2]int{"healthy": {1, 1}, "invalid": {1, 0}, "permanent": {1, 0}, "transient": {3, 0}, "broken": {1, 0}} {
		got, ok := stats.Claim(testNamespace, name)
		if !ok || got.PrepareCalls != want[0] || got.UnprepareCalls != want[1] {
			t.Errorf("stats of %s = %+v, want %d prepare and %d unprepare calls", name, got, want[0], want[1])
		}
	}
	if !slices.Equal(stats.TaintedDevices, []string{"dev-1"}) {
		t.Errorf("stats: tainted devices %v, want [dev-1]", stats.TaintedDevices)
	}

	// How long the prepare call waited for the taint, in the metrics.
	metrics := httpGet(t, "http://"+running.StatsAddress+"/metrics")
	waitCount := `dra_failfast_plugin_device_taint_wait_duration_seconds_count{driver_name="` + testDriver + `"} 1`
	if !strings.Contains(metrics, waitCount) {
		t.Errorf("/metrics does not contain %s", waitCount)
	}
	for line := range strings.Lines(metrics) {
		if strings.HasPrefix(line, `dra_failfast_plugin_device_taint_wait_duration_seconds_sum{driver_name="`+testDriver+`"}`) {
			t.Logf("taint wait: %s", strings.TrimSpace(line))
		}
	}

	// Repairing the device removes the taint.
	if err := statsClient.SetBroken(ctx, "dev-1", false); err != nil {
		t.Fatal(err)
	}
	if rules, err := client.ResourceV1beta2().DeviceTaintRules().List(ctx, metav1.ListOptions{}); err != nil || len(rules.Items) != 0 {
		t.Errorf("rules after the repair: %v, %v", rules, err)
	}

	// Stop removes the sockets.
	running.Stop()
	<-running.Done()
	for _, socket := range []string{draSocket, filepath.Join(RegistrarDir(rootDir), testDriver+"-reg.sock")} {
		if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s left after Stop: %v", socket, err)
		}
	}
}

func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", socket, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func waitForSlice(ctx context.Context, t *testing.T, client kubernetes.Interface, ok func(*resourceapi.ResourceSlice) bool) *resourceapi.ResourceSlice {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				if ok(&list.Items[i]) {
					return &list.Items[i]
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no matching ResourceSlice: %v (last list error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(body)
}
