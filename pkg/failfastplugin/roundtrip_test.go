// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	rulesapi "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/failfastplugintest"
)

const driverName = "driver.dra-failfast.test"

// scriptedPlugin fails each claim as its name says.
type scriptedPlugin struct {
	// The methods that a kubeletplugin release adds to DRAPlugin
	// (WatchHealthStatus in v0.37), which no test here calls: the tests
	// compile against every k8s.io release the library supports, and
	// DeviceHealthReport does not exist in v0.36.
	kubeletplugin.DRAPlugin
}

func (scriptedPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		switch claim.Name {
		case "permanent":
			result[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s: %w", claim.Name, failfastplugin.Permanent(errors.New("invalid opaque config")))}
		case "transient":
			result[claim.UID] = kubeletplugin.PrepareResult{Err: errors.New("device busy")}
		default:
			result[claim.UID] = kubeletplugin.PrepareResult{Devices: []kubeletplugin.Device{{PoolName: "pool", DeviceName: "dev-0"}}}
		}
	}
	return result, nil
}

func (scriptedPlugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	return map[types.UID]error{}, nil
}

func (scriptedPlugin) HandleError(ctx context.Context, err error, msg string) {}

func allocatedClaim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "req", Driver: driverName, Pool: "pool", Device: "dev-0"},
			}},
		}},
	}
}

// TestRoundTrip runs a driver with kubeletplugin.Start and this library on a
// real unix socket and calls it with a stock v1 gRPC client as a kubelet
// does. The kubelet side's reading of such answers is tested in the root
// module (pkg/kubelet/cm/dra), which this light module must not import.
func TestRoundTrip(t *testing.T) {
	_, resp := prepareThrough(t, failfastplugin.Start)

	wantWire := map[string]v1alpha.NodePrepareResourceResponseErrorType{"uid-ok": v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, "uid-transient": v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN, "uid-permanent": v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT}
	for uid, want := range wantWire {
		if got := v1alpha.GetErrorType(resp.Claims[uid]); got != want {
			t.Errorf("error_type of %s = %v, want %v", uid, got, want)
		}
	}
	wantText := map[string]string{"uid-ok": "", "uid-transient": "device busy", "uid-permanent": "claim permanent: invalid opaque config"}
	for uid, want := range wantText {
		if got := resp.Claims[uid].GetError(); got != want {
			t.Errorf("error of %s = %q, want %q", uid, got, want)
		}
	}

}

// TestWrapWithoutInterceptor: without the interceptor a marked error reaches
// the kubelet as a plain (transient) error rather than getting lost.
func TestWrapWithoutInterceptor(t *testing.T) {
	plugin := failfastplugin.Wrap(scriptedPlugin{})
	result, err := plugin.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{allocatedClaim("permanent")})
	if err != nil {
		t.Fatal(err)
	}
	if r := result["uid-permanent"]; !failfastplugin.IsPermanent(r.Err) {
		t.Errorf("wrapped plugin changed the result: %+v", r)
	}
}

// failingCallPlugin fails every PrepareResourceClaims call as a whole.
type failingCallPlugin struct {
	scriptedPlugin
	err error
}

func (p failingCallPlugin) PrepareResourceClaims(context.Context, []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	return nil, p.err
}

// TestWholeCallPermanentIsLogged: a Permanent error for the whole call
// cannot reach the kubelet as permanent; the driver author is told so in
// the log, and the call's error passes through unchanged.
func TestWholeCallPermanentIsLogged(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		wantLog bool
	}{
		"permanent":         {err: failfastplugin.Permanent(errors.New("no such device")), wantLog: true},
		"permanent wrapped": {err: fmt.Errorf("prepare: %w", failfastplugin.Permanent(errors.New("no such device"))), wantLog: true},
		"transient":         {err: errors.New("busy")},
	} {
		t.Run(name, func(t *testing.T) {
			var logged []string
			logger := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
			ctx := klog.NewContext(t.Context(), logger)
			_, err := failfastplugin.Wrap(failingCallPlugin{err: tc.err}).PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{allocatedClaim("permanent")})
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v, want the plugin's %v", err, tc.err)
			}
			found := slices.ContainsFunc(logged, func(line string) bool {
				return strings.Contains(line, "failed as a whole with an error marked Permanent") && strings.Contains(line, "no such device")
			})
			if found != tc.wantLog {
				t.Errorf("whole-call Permanent logged: %v, want %v; log: %q", found, tc.wantLog, logged)
			}
		})
	}
}

// TestInterceptorOnlyTouchesPrepare: other methods and failed calls pass through.
func TestInterceptorOnlyTouchesPrepare(t *testing.T) {
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{"u": {Error: "x"}}}
	handler := func(ctx context.Context, req any) (any, error) { return resp, nil }
	for _, method := range []string{drapbv1.DRAPlugin_NodeUnprepareResources_FullMethodName, drapbv1.DRAPlugin_NodePrepareResources_FullMethodName} {
		if _, err := failfastplugin.UnaryServerInterceptor(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: method}, handler); err != nil {
			t.Fatal(err)
		}
		if got := v1alpha.GetErrorType(resp.Claims["u"]); got != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN {
			t.Errorf("%s: error_type = %v without a permanent mark", method, got)
		}
	}
}

// TestRoundTripDeviceFault runs a driver started with StartWithDeviceFaults
// with kubeletplugin's own ResourceSlice controller against a fake API
// server: when the kubelet gets the permanent answer, the taint is in the API
// already; the driver's next publication keeps it, ClearDeviceFault removes
// it.
func TestRoundTripDeviceFault(t *testing.T) {
	ctx := t.Context()
	const node = "node"
	client := failfastplugintest.ServeDeviceTaintRules(t, fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}}), "v1")
	// The fake does not implement generateName, which the ResourceSlice
	// controller uses.
	var generated atomic.Int64
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if slice, ok := action.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice); ok && slice.Name == "" && slice.GenerateName != "" {
			slice.Name = fmt.Sprintf("%s%d", slice.GenerateName, generated.Add(1))
		}
		return false, nil, nil
	})
	claim := allocatedClaim("broken")
	if _, err := client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dirs := newDriverDirs(t)
	broken := failfastplugin.DeviceID{Pool: "pool", Device: "dev-1"}
	helper, err := failfastplugin.StartWithDeviceFaults(ctx, faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}},
		failfastplugin.DeviceFaultConfig{DriverName: driverName, NodeName: node, KubeClient: client},
		dirs.options()...,
	)
	if err != nil {
		t.Fatalf("start driver: %v", err)
	}
	t.Cleanup(helper.Stop)
	if err := helper.PublishResources(ctx, pools(map[string]int{"pool": 2})); err != nil {
		t.Fatal(err)
	}
	waitForAPI(t, client, "the driver's devices", func(devices map[failfastplugin.DeviceID][]resourceapi.DeviceTaint) bool { return len(devices) == 2 })

	kubelet := dirs.dial(t)

	// A check asks for no taint: the claim fails permanently all the same,
	// its error says why the device was not tainted, nothing is tainted.
	checkCtx := metadata.AppendToOutgoingContext(ctx, failfastplugin.NoTaintMetadataKey, "true")
	resp, err := kubelet.NodePrepareResources(checkCtx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)},
	}})
	if err != nil {
		t.Fatalf("NodePrepareResources asking for no taint: %v", err)
	}
	if got := resp.Claims[string(claim.UID)]; !strings.Contains(got.GetError(), "device pool/dev-1 not tainted: the caller asked for no taint") ||
		v1alpha.GetErrorType(got) != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
		t.Errorf("answer asking for no taint: error %q, error_type %v; want permanent, saying the device was not tainted", got.GetError(), v1alpha.GetErrorType(got))
	}
	if inAPI := taintsInAPI(t, client); len(inAPI) != 0 || len(helper.TaintedDevices()) != 0 {
		t.Fatalf("asking for no taint tainted: API %v, TaintedDevices %v", inAPI, helper.TaintedDevices())
	}

	start := time.Now()
	resp, err = kubelet.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)},
	}})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	// Right when the answer arrived.
	inAPI := taintsInAPI(t, client)
	t.Logf("NodePrepareResources with a device fault took %v (publish and wait for the taint)", elapsed)

	got := resp.Claims[string(claim.UID)]
	if want := "claim broken: pool/dev-1 broken"; got.GetError() != want || v1alpha.GetErrorType(got) != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
		t.Errorf("answer: error %q, error_type %v; want %q, Permanent", got.GetError(), v1alpha.GetErrorType(got), want)
	}
	taints := inAPI[broken]
	if len(taints) != 1 || len(inAPI) != 1 {
		t.Fatalf("taints in the API when the answer arrived: %v, want one on %s", inAPI, broken)
	}
	if taint := taints[0]; taint.Key != failfastplugin.DefaultDeviceFaultTaintKey || taint.Effect != rulesapi.DeviceTaintEffectNoSchedule ||
		taint.Value != "device-fault" || taint.TimeAdded == nil {
		t.Errorf("taint = %+v", taint)
	}

	// The driver publishes again, with a device more, through the
	// embedded kubeletplugin.Helper: the taint is a rule of its own and
	// stays.
	if err := helper.Helper.PublishResources(ctx, pools(map[string]int{"pool": 3})); err != nil {
		t.Fatal(err)
	}
	waitForAPI(t, client, "three devices", func(devices map[failfastplugin.DeviceID][]resourceapi.DeviceTaint) bool { return len(devices) == 3 })
	if got := helper.TaintedDevices(); !reflect.DeepEqual(got, []failfastplugin.DeviceID{broken}) || len(taintsInAPI(t, client)[broken]) != 1 {
		t.Errorf("after republishing: TaintedDevices = %v, in the API %v", got, taintsInAPI(t, client))
	}

	// The driver restarts: the new instance knows the fault.
	helper.Stop()
	restarted, err := failfastplugin.StartWithDeviceFaults(ctx, faultPlugin{}, failfastplugin.DeviceFaultConfig{DriverName: driverName, NodeName: node, KubeClient: client},
		dirs.options()...,
	)
	if err != nil {
		t.Fatalf("restart driver: %v", err)
	}
	t.Cleanup(restarted.Stop)
	<-restarted.Loaded()
	if got := restarted.TaintedDevices(); !reflect.DeepEqual(got, []failfastplugin.DeviceID{broken}) {
		t.Errorf("after a restart: TaintedDevices = %v, want %v", got, broken)
	}
	if err := restarted.ClearDeviceFault(ctx, broken); err != nil {
		t.Fatal(err)
	}
	if inAPI := taintsInAPI(t, client); len(inAPI) != 0 {
		t.Errorf("after ClearDeviceFault: %v", inAPI)
	}
}

// waitForAPI waits until the devices in the API, with their taints, are
// what ok wants.
func waitForAPI(t *testing.T, client kubernetes.Interface, what string, ok func(map[failfastplugin.DeviceID][]resourceapi.DeviceTaint) bool) {
	t.Helper()
	var devices map[failfastplugin.DeviceID][]resourceapi.DeviceTaint
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		devices = map[failfastplugin.DeviceID][]resourceapi.DeviceTaint{}
		for _, slice := range list.Items {
			for _, device := range slice.Spec.Devices {
				devices[failfastplugin.DeviceID{Pool: slice.Spec.Pool.Name, Device: device.Name}] = device.Taints
			}
		}
		return ok(devices), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s in the API: %v (last seen: %v)", what, err, devices)
	}
}

// TestStartIsDropIn: failfastplugin.Start has kubeletplugin.Start's type, so
// that a driver switches by changing the call alone.
func TestStartIsDropIn(t *testing.T) {
	if got, want := reflect.TypeOf(failfastplugin.Start), reflect.TypeOf(kubeletplugin.Start); got != want {
		t.Errorf("failfastplugin.Start is %v, kubeletplugin.Start is %v", got, want)
	}
	// StartWithDeviceFaults' Helper is a kubeletplugin.Helper too: a driver
	// that keeps one keeps helper.Helper.
	if field, ok := reflect.TypeFor[failfastplugin.Helper]().FieldByName("Helper"); !ok || !field.Anonymous || field.Type != reflect.TypeFor[*kubeletplugin.Helper]() {
		t.Errorf("failfastplugin.Helper does not embed *kubeletplugin.Helper")
	}
}

// TestDeviceFaultDoesNotHoldTheNode: kubeletplugin serializes the prepare and
// unprepare calls of a driver (Serialize, on by default). A fault's taint
// waits for the API server (up to WaitTimeout), but outside that section:
// while the fault's DeviceTaintRule create hangs, another pod's prepare and
// unprepare on the node are answered; the fault's answer comes once the rule
// is stored, Permanent. The latencies are logged.
func TestDeviceFaultDoesNotHoldTheNode(t *testing.T) {
	ctx := t.Context()
	const node = "node"
	client := failfastplugintest.ServeDeviceTaintRules(t, fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}}), "v1")
	sent := createClaims(t, client, "broken", "ok")
	// The API server takes the rule only when the test says so (not a
	// reactor: the fake runs those under a lock that every call takes).
	createEntered, releaseCreate := make(chan struct{}), make(chan struct{})
	var created atomic.Bool
	var once sync.Once
	client.OnRequest(func(method, _ string) {
		if method != http.MethodPost {
			return
		}
		once.Do(func() { close(createEntered) })
		<-releaseCreate
		created.Store(true)
	})

	dirs := newDriverDirs(t)
	broken := failfastplugin.DeviceID{Pool: "pool", Device: "dev-1"}
	helper, err := failfastplugin.StartWithDeviceFaults(ctx, faultPlugin{faults: map[string][]failfastplugin.DeviceID{"broken": {broken}}},
		failfastplugin.DeviceFaultConfig{DriverName: driverName, NodeName: node, KubeClient: client, WaitTimeout: time.Minute},
		dirs.options()...,
	)
	if err != nil {
		t.Fatalf("start driver: %v", err)
	}
	t.Cleanup(helper.Stop)
	kubelet := dirs.dial(t)

	type answer struct {
		resp *drapbv1.NodePrepareResourcesResponse
		err  error
		took time.Duration
	}
	faultAnswer := make(chan answer, 1)
	go func() {
		start := time.Now()
		resp, err := kubelet.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: sent[:1]})
		faultAnswer <- answer{resp, err, time.Since(start)}
	}()
	select {
	case <-createEntered:
	case <-time.After(time.Minute):
		close(releaseCreate)
		t.Fatal("the fault's DeviceTaintRule was never created")
	}

	// The fault's create hangs: another pod's calls go through. (The
	// deadline only turns a node held by the fault into a failure rather
	// than a hang: the create is released after these calls.)
	otherCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := kubelet.NodePrepareResources(otherCtx, &drapbv1.NodePrepareResourcesRequest{Claims: sent[1:]})
	prepareTook := time.Since(start)
	if err != nil || resp.Claims[sent[1].Uid].GetError() != "" {
		t.Errorf("another pod's prepare during the fault: %v, %v", err, resp)
	}
	start = time.Now()
	unprepared, err := kubelet.NodeUnprepareResources(otherCtx, &drapbv1.NodeUnprepareResourcesRequest{Claims: sent[1:]})
	unprepareTook := time.Since(start)
	if err != nil || unprepared.Claims[sent[1].Uid].GetError() != "" {
		t.Errorf("another pod's unprepare during the fault: %v, %v", err, unprepared)
	}
	if created.Load() {
		t.Errorf("another pod's calls were answered only after the fault's rule was created: the fault held the node's serialized section")
	}
	close(releaseCreate)

	got := <-faultAnswer
	if got.err != nil {
		t.Fatalf("the fault's prepare: %v", got.err)
	}
	claimResult := got.resp.Claims[sent[0].Uid]
	if want := "claim broken: pool/dev-1 broken"; claimResult.GetError() != want || v1alpha.GetErrorType(claimResult) != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
		t.Errorf("the fault's answer: error %q, error_type %v; want %q, Permanent", claimResult.GetError(), v1alpha.GetErrorType(claimResult), want)
	}
	if !created.Load() || len(taintsInAPI(t, client)[broken]) != 1 {
		t.Errorf("the fault's answer came before its rule was stored: taints %v", taintsInAPI(t, client))
	}
	t.Logf("while a fault's DeviceTaintRule create hung: another pod's prepare answered in %v, its unprepare in %v; the fault answered in %v, after the create was released", prepareTook, unprepareTook, got.took)
}

// driverDirs are the registry and plugin directories of a driver under test,
// in a new temporary directory.
type driverDirs struct{ registry, plugin string }

func newDriverDirs(t *testing.T) driverDirs {
	t.Helper()
	dir := t.TempDir()
	dirs := driverDirs{registry: filepath.Join(dir, "registry"), plugin: filepath.Join(dir, "plugin")}
	for _, sub := range []string{dirs.registry, dirs.plugin} {
		if err := os.Mkdir(sub, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// options are opts and the kubeletplugin options that place the driver in
// the directories.
func (d driverDirs) options(opts ...kubeletplugin.Option) []kubeletplugin.Option {
	return append(opts, kubeletplugin.RegistrarDirectoryPath(d.registry), kubeletplugin.PluginDataDirectoryPath(d.plugin))
}

// dial connects to the driver's socket as the kubelet does.
func (d driverDirs) dial(t *testing.T) drapbv1.DRAPluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+filepath.Join(d.plugin, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return drapbv1.NewDRAPluginClient(conn)
}

// createClaims stores an allocated claim of each name in client, and returns
// them as a kubelet names them in a call.
func createClaims(t *testing.T, client kubernetes.Interface, names ...string) []*drapbv1.Claim {
	t.Helper()
	sent := make([]*drapbv1.Claim, 0, len(names))
	for _, name := range names {
		claim := allocatedClaim(name)
		if _, err := client.ResourceV1().ResourceClaims(claim.Namespace).Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, &drapbv1.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)})
	}
	return sent
}

// prepareThrough starts scriptedPlugin with start (this library's Start, or
// kubeletplugin's) and sends it one NodePrepareResources call for the claims
// "ok", "transient" and "permanent", as a kubelet does.
func prepareThrough(t *testing.T, start func(context.Context, kubeletplugin.DRAPlugin, ...kubeletplugin.Option) (*kubeletplugin.Helper, error)) ([]*drapbv1.Claim, *drapbv1.NodePrepareResourcesResponse) {
	t.Helper()
	client := fake.NewClientset()
	sent := createClaims(t, client, "ok", "transient", "permanent")
	dirs := newDriverDirs(t)
	helper, err := start(t.Context(), scriptedPlugin{},
		dirs.options(kubeletplugin.DriverName(driverName), kubeletplugin.NodeName("node"), kubeletplugin.KubeClient(client))...)
	if err != nil {
		t.Fatalf("start driver: %v", err)
	}
	t.Cleanup(helper.Stop)
	resp, err := dirs.dial(t).NodePrepareResources(t.Context(), &drapbv1.NodePrepareResourcesRequest{Claims: sent})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	return sent, resp
}
