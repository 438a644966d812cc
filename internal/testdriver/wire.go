// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// wireAction is what the interceptor does to the answer for one claim.
type wireAction struct {
	spec *WireSpec
	// text is the claim's error.
	text string
}

// wireRecorder carries, through the context of one NodePrepareResources
// call, the wire behavior of the claims that failed with their injected
// error. Keeping it per call instead of in the driver means that nothing is
// left behind when a call fails before the answer, and that two calls for
// the same claim never see each other's settings.
type wireRecorder struct {
	mu      sync.Mutex
	actions map[types.UID]wireAction
}

type wireRecorderKey struct{}

func wireRecorderFrom(ctx context.Context) *wireRecorder {
	rec, _ := ctx.Value(wireRecorderKey{}).(*wireRecorder)
	return rec
}

func (r *wireRecorder) add(uid types.UID, action wireAction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.actions == nil {
		r.actions = map[types.UID]wireAction{}
	}
	r.actions[uid] = action
}

func (r *wireRecorder) get() map[types.UID]wireAction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.actions)
}

// GRPCInterceptor returns the kubeletplugin option that applies the wire
// behavior (WireSpec) of the claims to the NodePrepareResources answers.
// Start adds it; failfastplugin.StartWithDeviceFaults appends its own
// interceptor after it, which makes that one the inner one, so that this one
// sees the answer with error_type already set.
func (d *Driver) GRPCInterceptor() kubeletplugin.Option {
	return kubeletplugin.GRPCInterceptor(d.unaryServerInterceptor)
}

func (d *Driver) unaryServerInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	switch info.FullMethod {
	case drapbv1.DRAPlugin_NodePrepareResources_FullMethodName, drapbv1beta1.DRAPlugin_NodePrepareResources_FullMethodName:
	default:
		return handler(ctx, req)
	}
	rec := &wireRecorder{}
	resp, err := handler(context.WithValue(ctx, wireRecorderKey{}, rec), req)
	if err != nil {
		return resp, err
	}
	actions := rec.get()
	if len(actions) == 0 {
		return resp, nil
	}
	return applyWire(klog.FromContext(ctx), resp, actions)
}

// applyWire rewrites resp as actions say. A gRPC code fails the whole call;
// of several, the one of the smallest claim UID wins.
func applyWire(logger klog.Logger, resp any, actions map[types.UID]wireAction) (any, error) {
	uids := slices.Sorted(maps.Keys(actions))
	for _, uid := range uids {
		action := actions[uid]
		if action.spec.GRPCCode == "" {
			continue
		}
		code, err := ParseGRPCCode(action.spec.GRPCCode)
		if err != nil {
			// Validated when parsed.
			return nil, status.Errorf(codes.Internal, "claim UID %s: %v", uid, err)
		}
		logger.Info("Wire: failing the call with a gRPC status", "claimUID", uid, "code", code)
		return nil, status.Error(code, action.text)
	}
	switch resp := resp.(type) {
	case *drapbv1.NodePrepareResourcesResponse:
		if resp.Claims == nil {
			resp.Claims = map[string]*drapbv1.NodePrepareResourceResponse{}
		}
		rewriteClaims(logger, resp.Claims, uids, actions, func(text string) *drapbv1.NodePrepareResourceResponse {
			return &drapbv1.NodePrepareResourceResponse{Error: text}
		})
	case *drapbv1beta1.NodePrepareResourcesResponse:
		if resp.Claims == nil {
			resp.Claims = map[string]*drapbv1beta1.NodePrepareResourceResponse{}
		}
		rewriteClaims(logger, resp.Claims, uids, actions, func(text string) *drapbv1beta1.NodePrepareResourceResponse {
			return &drapbv1beta1.NodePrepareResourceResponse{Error: text}
		})
	default:
		logger.Info("Warning: wire behavior ignored, unexpected answer type", "type", fmt.Sprintf("%T", resp))
	}
	return resp, nil
}

// rewriteClaims applies the per-claim rewrites first and adds the extra
// results last, so that an extra result is never rewritten or omitted.
func rewriteClaims[R proto.Message](logger klog.Logger, claims map[string]R, uids []types.UID, actions map[types.UID]wireAction, newResult func(text string) R) {
	for _, uid := range uids {
		spec := actions[uid].spec
		result, ok := claims[string(uid)]
		switch {
		case !ok:
		case spec.OmitClaim:
			delete(claims, string(uid))
			logger.Info("Wire: omitted the claim's result", "claimUID", uid)
		default:
			if rewriteUnknown(result, spec) {
				logger.Info("Wire: rewrote the claim's result", "claimUID", uid, "unknownFields", result.ProtoReflect().GetUnknown())
			}
		}
	}
	for _, uid := range uids {
		action := actions[uid]
		if action.spec.ExtraClaimUID == "" {
			continue
		}
		extra := newResult(action.text)
		unknown := protowire.AppendTag(nil, v1alpha.ErrorTypeFieldNumber, protowire.VarintType)
		unknown = protowire.AppendVarint(unknown, uint64(v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT))
		extra.ProtoReflect().SetUnknown(unknown)
		claims[action.spec.ExtraClaimUID] = extra
		logger.Info("Wire: added a result for a claim that was not sent", "claimUID", uid, "extraClaimUID", action.spec.ExtraClaimUID)
	}
}

// rewriteUnknown applies errorType, errorTypeAbsent and rawFields to the
// unknown fields of one claim result and tells whether it changed them.
func rewriteUnknown(result proto.Message, spec *WireSpec) bool {
	if spec.ErrorType == nil && !spec.ErrorTypeAbsent && spec.RawFields == "" {
		return false
	}
	msg := result.ProtoReflect()
	unknown := slices.Clone(msg.GetUnknown())
	if spec.ErrorType != nil || spec.ErrorTypeAbsent {
		unknown = v1alpha.WithoutField(unknown, v1alpha.ErrorTypeFieldNumber)
	}
	if spec.ErrorType != nil {
		unknown = protowire.AppendTag(unknown, v1alpha.ErrorTypeFieldNumber, protowire.VarintType)
		// As protobuf encodes an int32 enum: negative values sign extended.
		unknown = protowire.AppendVarint(unknown, uint64(*spec.ErrorType))
	}
	if spec.RawFields != "" {
		raw, _ := base64.StdEncoding.DecodeString(spec.RawFields) // Validated when parsed.
		unknown = append(unknown, raw...)
	}
	msg.SetUnknown(unknown)
	return true
}
