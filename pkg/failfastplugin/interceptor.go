// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"context"

	"google.golang.org/grpc"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// GRPCInterceptor returns the kubeletplugin option that sets error_type =
// Permanent on exactly those claim results of a v1 NodePrepareResources
// response that the plugin returned by Wrap failed with a Permanent error.
// It also taints the devices of DeviceFaults (DeviceFaults.Wrap): after
// kubeletplugin has left the section in which it serializes prepare and
// unprepare calls (Serialize, on by default), so that other pods' calls on
// the node need not wait for the API server, and before the answer leaves
// the driver.
func GRPCInterceptor() kubeletplugin.Option {
	return kubeletplugin.GRPCInterceptor(UnaryServerInterceptor)
}

// UnaryServerInterceptor is the gRPC interceptor behind GRPCInterceptor, for
// drivers that run their own gRPC server.
func UnaryServerInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod != drapbv1.DRAPlugin_NodePrepareResources_FullMethodName {
		return handler(ctx, req)
	}
	rec := &recorder{}
	resp, err := handler(withRecorder(ctx, rec), req)
	if prepared, ok := resp.(*drapbv1.NodePrepareResourcesResponse); ok && err == nil {
		for uid, text := range rec.taintDeferred(ctx) {
			if claimResult := prepared.GetClaims()[string(uid)]; claimResult != nil {
				claimResult.Error = text
			}
		}
		for uid, claimResult := range prepared.GetClaims() {
			// A permanent mark without an error message would be ignored by
			// the kubelet anyway; never send it.
			if claimResult.GetError() != "" && rec.isPermanent(types.UID(uid)) {
				v1alpha.SetErrorType(claimResult, v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
			}
		}
	}
	return resp, err
}
