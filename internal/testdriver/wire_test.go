// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"bytes"
	"context"
	"errors"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/failfastplugintest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// behaviorConfig is an opaque config of the test driver with the given
// PrepareBehavior fields.
func behaviorConfig(fields string) resourceapi.DeviceAllocationConfiguration {
	return claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior",` + fields + `}`)
}

// startDriver starts the driver with Start on unix sockets in a temp dir
// against a fake API server holding claims, and waits for its
// ResourceSlices.
func startDriver(t *testing.T, opts Options, claims ...*resourceapi.ResourceClaim) (*Running, *failfastplugintest.Clientset, string) {
	t.Helper()
	client := fakeClusterClient(t, claims...)
	rootDir := shortTempDir(t)
	opts.NodeName = testNode
	opts.CDIDir = t.TempDir()
	opts.KubeClient = client
	opts.KubeletRootDir = rootDir
	running, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(running.Stop)
	waitForSlice(t.Context(), t, client, func(*resourceapi.ResourceSlice) bool { return true })
	return running, client, rootDir
}

// shortTempDir is a temporary directory with a short path: t.TempDir
// contains the test name, and unix socket paths must stay below 108 bytes.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "testdriver")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func prepareRequest(claims ...*resourceapi.ResourceClaim) *drapbv1.NodePrepareResourcesRequest {
	req := &drapbv1.NodePrepareResourcesRequest{}
	for _, claim := range claims {
		req.Claims = append(req.Claims, &drapbv1.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)})
	}
	return req
}

// TestWireRoundTrip: every wire behavior puts exactly the intended bytes
// on the wire, as the stock v1 client of the kubelet receives them. The
// test driver's interceptor runs outside the one of failfastplugin (which
// sets error_type = Permanent): rawFields are appended after that field,
// errorType and errorTypeAbsent replace it.
func TestWireRoundTrip(t *testing.T) {
	const uid0 = "uid-c0"
	for name, tc := range map[string]struct {
		fields string
		// wantUnknown are the unknown bytes of the claim's result.
		wantUnknown []byte
		wantType    v1alpha.NodePrepareResourceResponseErrorType
		wantDecode  error
		wantOmitted bool
		wantExtra   string
		wantError   string
		// wantCallCode: the client cannot decode the answer.
		wantCallCode codes.Code
	}{
		"permanent without wire": {
			fields:      `"prepare":"Permanent","message":"m"`,
			wantUnknown: []byte{0x18, 0x01},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT,
			wantError:   "claim ns/c0: m",
		},
		"transient without wire": {
			fields:    `"prepare":"Transient"`,
			wantType:  v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN,
			wantError: "claim ns/c0: injected transient failure (failure ",
		},
		"errorType Permanent on a transient failure": {
			fields:      `"prepare":"Transient","wire":{"errorType":1}`,
			wantUnknown: []byte{0x18, 0x01},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT,
		},
		"errorType 0 sent explicitly": {
			fields:      `"prepare":"Permanent","wire":{"errorType":0}`,
			wantUnknown: []byte{0x18, 0x00},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN,
		},
		"errorType unknown value": {
			fields:      `"prepare":"Permanent","wire":{"errorType":7}`,
			wantUnknown: []byte{0x18, 0x07},
			wantDecode:  v1alpha.ErrUnknownValue,
		},
		"errorType negative, sign extended": {
			fields:      `"prepare":"Permanent","wire":{"errorType":-1}`,
			wantUnknown: []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
			wantDecode:  v1alpha.ErrUnknownValue,
		},
		// Read as protobuf reads an int32: its low 32 bits, 1.
		"errorType beyond int32": {
			fields:      `"prepare":"Permanent","wire":{"errorType":4294967297}`,
			wantUnknown: []byte{0x18, 0x81, 0x80, 0x80, 0x80, 0x10},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT,
		},
		"errorTypeAbsent": {
			fields:   `"prepare":"Permanent","wire":{"errorTypeAbsent":true}`,
			wantType: v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN,
		},
		"rawFields after field 3: twice, the last one wins": {
			fields:      `"prepare":"Permanent","wire":{"rawFields":"GAA="}`,
			wantUnknown: []byte{0x18, 0x01, 0x18, 0x00},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN,
		},
		"rawFields with another unknown field": {
			fields:      `"prepare":"Permanent","wire":{"rawFields":"IAU="}`,
			wantUnknown: []byte{0x18, 0x01, 0x20, 0x05},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT,
		},
		// A field 3 of another wire type is not error_type (protobuf's rule).
		"rawFields wrong wire type": {
			fields:      `"prepare":"Permanent","wire":{"errorTypeAbsent":true,"rawFields":"GgEB"}`,
			wantUnknown: []byte{0x1a, 0x01, 0x01},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN,
		},
		"rawFields with a wrong wire type for field 3": {
			fields:      `"prepare":"Permanent","wire":{"errorTypeAbsent":true,"rawFields":"HQEAAAA="}`,
			wantUnknown: []byte{0x1d, 0x01, 0x00, 0x00, 0x00},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN,
		},
		// Bytes that do not parse as protobuf fields make the whole answer
		// undecodable for the client: the call fails, whatever field 3 says.
		"rawFields truncated varint": {
			fields:       `"prepare":"Permanent","wire":{"errorTypeAbsent":true,"rawFields":"GIE="}`,
			wantCallCode: codes.Internal,
		},
		"rawFields truncated length": {
			fields:       `"prepare":"Permanent","wire":{"rawFields":"GgUB"}`,
			wantCallCode: codes.Internal,
		},
		"errorType then rawFields: the last one wins": {
			fields:      `"prepare":"Transient","wire":{"errorType":2,"rawFields":"GAE="}`,
			wantUnknown: []byte{0x18, 0x02, 0x18, 0x01},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT,
		},
		"omitClaim": {
			fields:      `"prepare":"Permanent","wire":{"omitClaim":true}`,
			wantOmitted: true,
		},
		"extraClaimUID": {
			fields:      `"prepare":"Permanent","message":"m","wire":{"extraClaimUID":"ghost"}`,
			wantUnknown: []byte{0x18, 0x01},
			wantType:    v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT,
			wantExtra:   "ghost",
			wantError:   "claim ns/c0: m",
		},
		"omitClaim and extraClaimUID": {
			fields:      `"prepare":"Transient","wire":{"omitClaim":true,"extraClaimUID":"ghost"}`,
			wantOmitted: true,
			wantExtra:   "ghost",
		},
	} {
		t.Run(name, func(t *testing.T) {
			claim := newClaim("c0", oneDevice("dev-0"), behaviorConfig(tc.fields))
			healthy := newClaim("healthy", oneDevice("dev-1"))
			running, _, rootDir := startDriver(t, Options{}, claim, healthy)
			plugin := drapbv1.NewDRAPluginClient(dial(t, DRASocketPath(rootDir, testDriver)))

			for call := 1; call <= 2; call++ { // the same again: nothing left over from the first call
				resp, err := plugin.NodePrepareResources(t.Context(), prepareRequest(claim, healthy))
				if tc.wantCallCode != codes.OK {
					if status.Code(err) != tc.wantCallCode {
						t.Errorf("call %d: got %v, %v; want code %v", call, resp, err, tc.wantCallCode)
					}
					continue
				}
				if err != nil {
					t.Fatalf("call %d: NodePrepareResources: %v", call, err)
				}
				if got := resp.Claims[string(healthy.UID)]; got == nil || got.Error != "" || len(got.ProtoReflect().GetUnknown()) != 0 || len(got.Devices) != 1 {
					t.Errorf("call %d: healthy claim = %v", call, got)
				}
				wantClaims := 2
				if tc.wantOmitted {
					wantClaims--
				}
				if tc.wantExtra != "" {
					wantClaims++
				}
				if len(resp.Claims) != wantClaims {
					t.Errorf("call %d: %d results, want %d: %v", call, len(resp.Claims), wantClaims, resp.Claims)
				}
				result, ok := resp.Claims[uid0]
				if ok == tc.wantOmitted {
					t.Fatalf("call %d: result of the claim present = %v, want %v", call, ok, !tc.wantOmitted)
				}
				if ok {
					if result.Error == "" || !strings.Contains(result.Error, tc.wantError) {
						t.Errorf("call %d: error %q, want %q", call, result.Error, tc.wantError)
					}
					if got := result.ProtoReflect().GetUnknown(); !bytes.Equal(got, tc.wantUnknown) {
						t.Errorf("call %d: unknown fields % x, want % x", call, got, tc.wantUnknown)
					}
					errorType, err := v1alpha.DecodeErrorType(result)
					if !errors.Is(err, tc.wantDecode) || (tc.wantDecode == nil && errorType != tc.wantType) {
						t.Errorf("call %d: DecodeErrorType = %v, %v; want %v, %v", call, errorType, err, tc.wantType, tc.wantDecode)
					}
				}
				if tc.wantExtra != "" {
					extra := resp.Claims[tc.wantExtra]
					if extra == nil || !strings.HasPrefix(extra.Error, "claim ns/c0: ") || v1alpha.GetErrorType(extra) != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT ||
						!bytes.Equal(extra.ProtoReflect().GetUnknown(), []byte{0x18, 0x01}) {
						t.Errorf("call %d: extra result = %v", call, extra)
					}
				}
			}
			if stats := running.Driver.Stats().Claims[uid0]; stats.PrepareCalls != 2 || stats.LastError == "" {
				t.Errorf("stats = %+v, want 2 failed prepare calls", stats)
			}
		})
	}
}

// TestWireGRPCCode: grpcCode fails the whole call with a gRPC status; the
// driver still counts the prepare call. With Transient only the failing
// calls get the status.
func TestWireGRPCCode(t *testing.T) {
	permanent := newClaim("permanent", oneDevice("dev-0"), behaviorConfig(`"prepare":"Permanent","message":"gone ","messageRepeat":3,"wire":{"grpcCode":"Unavailable"}`))
	transient := newClaim("transient", oneDevice("dev-1"), behaviorConfig(`"prepare":"Transient","failures":1,"wire":{"grpcCode":"ResourceExhausted"}`))
	healthy := newClaim("healthy", oneDevice("dev-2"))
	running, _, rootDir := startDriver(t, Options{}, permanent, transient, healthy)
	plugin := drapbv1.NewDRAPluginClient(dial(t, DRASocketPath(rootDir, testDriver)))

	// In this order: the transient claim fails once.
	for _, tc := range []struct {
		name     string
		claims   []*resourceapi.ResourceClaim
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "permanent, message repeated", claims: []*resourceapi.ResourceClaim{healthy, permanent}, wantCode: codes.Unavailable, wantMsg: "claim ns/permanent: gone gone gone "},
		{name: "transient, first call", claims: []*resourceapi.ResourceClaim{transient}, wantCode: codes.ResourceExhausted, wantMsg: "claim ns/transient: injected transient failure (failure 1 of 1)"},
		{name: "transient, second call", claims: []*resourceapi.ResourceClaim{transient}, wantCode: codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := plugin.NodePrepareResources(t.Context(), prepareRequest(tc.claims...))
			if tc.wantCode == codes.OK {
				if err != nil || resp.Claims[string(transient.UID)].GetError() != "" {
					t.Fatalf("got %v, %v; want success", resp, err)
				}
				return
			}
			st, ok := status.FromError(err)
			if !ok || st.Code() != tc.wantCode || st.Message() != tc.wantMsg {
				t.Errorf("got %v, %v; want status %v %q", resp, err, tc.wantCode, tc.wantMsg)
			}
		})
	}
	stats := running.Driver.Stats()
	for claim, want := range map[*resourceapi.ResourceClaim]int{permanent: 1, transient: 2, healthy: 1} {
		if got := stats.Claims[string(claim.UID)].PrepareCalls; got != want {
			t.Errorf("%s: %d prepare calls counted, want %d", claim.Name, got, want)
		}
	}
}

// TestWireOverride: the wire behavior also comes from a namespace override.
func TestWireOverride(t *testing.T) {
	claim := newClaim("c", oneDevice("dev-0"))
	running, _, rootDir := startDriver(t, Options{}, claim)
	plugin := drapbv1.NewDRAPluginClient(dial(t, DRASocketPath(rootDir, testDriver)))
	if err := running.Driver.SetBehavior(t.Context(), testNamespace, BehaviorSpec{Prepare: PrepareTransient, Wire: &WireSpec{ErrorType: ptrTo[int64](1)}}); err != nil {
		t.Fatal(err)
	}
	resp, err := plugin.NodePrepareResources(t.Context(), prepareRequest(claim))
	if err != nil {
		t.Fatal(err)
	}
	if got := v1alpha.GetErrorType(resp.Claims[string(claim.UID)]); got != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
		t.Errorf("error_type = %v, want Permanent from the override", got)
	}
}

// TestGRPCAPI: --grpc-api chooses the services the driver registers and
// serves. Over v1beta1 error_type never reaches the kubelet: failfastplugin
// does not set it there, and what the wire behavior puts there the
// kubelet's v1beta1 client wrapper drops when it converts to v1.
func TestGRPCAPI(t *testing.T) {
	for api, tc := range map[GRPCAPI][]string{
		"":             {drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService},
		GRPCAPIBoth:    {drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService},
		GRPCAPIV1:      {drapbv1.DRAPluginService},
		GRPCAPIV1beta1: {drapbv1beta1.DRAPluginService},
	} {
		t.Run("api="+string(api), func(t *testing.T) {
			permanent := newClaim("permanent", oneDevice("dev-0"), behaviorConfig(`"prepare":"Permanent"`))
			forced := newClaim("forced", oneDevice("dev-1"), behaviorConfig(`"prepare":"Permanent","wire":{"errorType":1}`))
			_, _, rootDir := startDriver(t, Options{GRPCAPI: api}, permanent, forced)

			info, err := registerapi.NewRegistrationClient(dial(t, RegistrationSocketPath(rootDir, testDriver))).GetInfo(t.Context(), &registerapi.InfoRequest{})
			if err != nil {
				t.Fatalf("GetInfo: %v", err)
			}
			if got := slices.Sorted(slices.Values(info.SupportedVersions)); !slices.Equal(got, slices.Sorted(slices.Values(tc))) {
				t.Errorf("supported versions = %v, want %v", got, tc)
			}

			conn := dial(t, DRASocketPath(rootDir, testDriver))
			req := prepareRequest(permanent, forced)
			v1Resp, v1Err := drapbv1.NewDRAPluginClient(conn).NodePrepareResources(t.Context(), req)
			if slices.Contains(tc, drapbv1.DRAPluginService) {
				if v1Err != nil || v1alpha.GetErrorType(v1Resp.Claims[string(permanent.UID)]) != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT {
					t.Errorf("v1: %v, %v; want Permanent", v1Resp, v1Err)
				}
			} else if status.Code(v1Err) != codes.Unimplemented {
				t.Errorf("v1: %v, want Unimplemented", v1Err)
			}

			// The raw v1beta1 answer, and what the kubelet makes of it.
			beta := drapbv1beta1.NewDRAPluginClient(conn)
			var betaReq drapbv1beta1.NodePrepareResourcesRequest
			if err := drapbv1beta1.Convert_v1_NodePrepareResourcesRequest_To_v1beta1_NodePrepareResourcesRequest(req, &betaReq, nil); err != nil {
				t.Fatal(err)
			}
			betaResp, betaErr := beta.NodePrepareResources(t.Context(), &betaReq)
			kubeletResp, kubeletErr := drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: beta}.NodePrepareResources(t.Context(), req)
			if !slices.Contains(tc, drapbv1beta1.DRAPluginService) {
				if status.Code(betaErr) != codes.Unimplemented || status.Code(kubeletErr) != codes.Unimplemented {
					t.Errorf("v1beta1: %v / %v, want Unimplemented", betaErr, kubeletErr)
				}
				return
			}
			if betaErr != nil || kubeletErr != nil {
				t.Fatalf("v1beta1: %v / %v", betaErr, kubeletErr)
			}
			for claim, want := range map[*resourceapi.ResourceClaim][]byte{permanent: nil, forced: {0x18, 0x01}} {
				if got := betaResp.Claims[string(claim.UID)].ProtoReflect().GetUnknown(); !bytes.Equal(got, want) {
					t.Errorf("v1beta1 %s: unknown fields on the wire % x, want % x", claim.Name, got, want)
				}
				result := kubeletResp.Claims[string(claim.UID)]
				if errorType, err := v1alpha.DecodeErrorType(result); result.GetError() == "" || errorType != v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN || err != nil {
					t.Errorf("v1beta1 %s as the kubelet sees it: %v, error_type %v, %v; want an error without error_type", claim.Name, result, errorType, err)
				}
			}
		})
	}
}

// TestRepublishAfterDelete: after someone deleted the driver's
// ResourceSlices (as a starting kubelet does), Republish brings them back
// right away; the ResourceSlice controller alone would wait for its 30s
// sync delay.
func TestRepublishAfterDelete(t *testing.T) {
	ctx := t.Context()
	const devices = 100 // two slices
	running, client, _ := startDriver(t, Options{Config: Config{NumDevices: devices}})

	// The fake API server sets no UIDs; the names of new slices differ.
	count := func() (sets.Set[string], int) {
		t.Helper()
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names, n := sets.New[string](), 0
		for _, slice := range list.Items {
			names.Insert(slice.Name)
			n += len(slice.Spec.Devices)
		}
		return names, n
	}
	deadline := time.Now().Add(10 * time.Second)
	old, n := count()
	for n != devices || old.Len() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("published %d devices in %d slices, want %d in 2", n, old.Len(), devices)
		}
		time.Sleep(50 * time.Millisecond)
		old, n = count()
	}
	for name := range old {
		if err := client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	deadline = start.Add(10 * time.Second)
	for {
		if err := running.Driver.Republish(ctx); err != nil {
			t.Fatalf("Republish: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		current, n := count()
		if n == devices && current.Len() == 2 && !current.HasAny(old.UnsortedList()...) {
			t.Logf("ResourceSlices back %v after the deletion", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ResourceSlices not back within 10s of the deletion: %d devices in %d slices", n, current.Len())
		}
	}
}

// TestInterceptorLeavesOtherCallsAlone: without wire behavior, answers and
// errors pass through unchanged, and only NodePrepareResources is looked at.
func TestInterceptorLeavesOtherCallsAlone(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	resp := &drapbv1.NodeUnprepareResourcesResponse{}
	handlerErr := errors.New("handler failed")
	for name, tc := range map[string]struct {
		method  string
		respond func(ctx context.Context) (any, error)
		wantErr error
	}{
		"unprepare": {
			method:  drapbv1.DRAPlugin_NodeUnprepareResources_FullMethodName,
			respond: func(ctx context.Context) (any, error) { return resp, nil },
		},
		"prepare without wire": {
			method:  drapbv1.DRAPlugin_NodePrepareResources_FullMethodName,
			respond: func(ctx context.Context) (any, error) { return resp, nil },
		},
		"prepare failing": {
			method: drapbv1.DRAPlugin_NodePrepareResources_FullMethodName,
			respond: func(ctx context.Context) (any, error) {
				// A recorded action must not turn an error into an answer.
				wireRecorderFrom(ctx).add("uid", wireAction{spec: &WireSpec{OmitClaim: true}})
				return nil, handlerErr
			},
			wantErr: handlerErr,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := d.unaryServerInterceptor(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(ctx context.Context, req any) (any, error) {
				return tc.respond(ctx)
			})
			if !errors.Is(err, tc.wantErr) || (err == nil && got != resp) {
				t.Errorf("got %v, %v", got, err)
			}
		})
	}
}
