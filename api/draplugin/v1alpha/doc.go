// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha is the dra-failfast extension of the kubelet DRA plugin
// gRPC API (KEP-5322): the ErrorType enum that travels as field 3
// ("error_type") of k8s.io/kubelet/pkg/apis/dra/v1.NodePrepareResourceResponse,
// and helpers that read and write it on the stock message types, so that
// neither drivers nor the kubelet need a patched k8s.io/kubelet.
package v1alpha
