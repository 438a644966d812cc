// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-failfast/dra-failfast/cmd/dra-failfast-check/drivercheck"
)

// listDeviceTaintRules lists the DeviceTaintRules that match the label
// selector, in the API version the cluster serves them (v1 on 1.37, v1beta2
// on the local cluster of KUBE_VERSION=v1.36.3, v1alpha3 on v1.35.4's), as
// dra-failfast-check does.
func listDeviceTaintRules(ctx context.Context, labelSelector string) ([]resourceapi.DeviceTaintRule, error) {
	return drivercheck.ListDeviceTaintRules(ctx, client, metav1.ListOptions{LabelSelector: labelSelector})
}

// deleteDeviceTaintRules deletes the DeviceTaintRules that match the label
// selector, in the API version the cluster serves them (the first served of
// v1, v1beta2, v1alpha3).
func deleteDeviceTaintRules(ctx context.Context, labelSelector string) error {
	opts := metav1.ListOptions{LabelSelector: labelSelector}
	err := client.ResourceV1().DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
	if apierrors.IsNotFound(err) {
		err = client.ResourceV1beta2().DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
	}
	if apierrors.IsNotFound(err) {
		err = client.ResourceV1alpha3().DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
	}
	return err
}
