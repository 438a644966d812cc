// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listDeviceTaintRules lists the DeviceTaintRules that match the label
// selector, in the API version the cluster serves them: resource.k8s.io/v1
// (Kubernetes 1.37), else v1beta2 (1.36, the local cluster of
// KUBE_VERSION=v1.36.3), as v1 objects with the fields the tests read.
func listDeviceTaintRules(ctx context.Context, labelSelector string) ([]resourceapi.DeviceTaintRule, error) {
	opts := metav1.ListOptions{LabelSelector: labelSelector}
	list, err := client.ResourceV1().DeviceTaintRules().List(ctx, opts)
	if err == nil {
		return list.Items, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	older, err := client.ResourceV1beta2().DeviceTaintRules().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("DeviceTaintRules served neither in resource.k8s.io/v1 nor v1beta2: %w", err)
	}
	rules := make([]resourceapi.DeviceTaintRule, 0, len(older.Items))
	for _, rule := range older.Items {
		converted := resourceapi.DeviceTaintRule{ObjectMeta: rule.ObjectMeta}
		if s := rule.Spec.DeviceSelector; s != nil {
			converted.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{Driver: s.Driver, Pool: s.Pool, Device: s.Device}
		}
		t := rule.Spec.Taint
		converted.Spec.Taint = resourceapi.DeviceTaint{Key: t.Key, Value: t.Value, Effect: resourceapi.DeviceTaintEffect(t.Effect), TimeAdded: t.TimeAdded}
		rules = append(rules, converted)
	}
	return rules, nil
}

// deleteDeviceTaintRules deletes the DeviceTaintRules that match the label
// selector, in the API version the cluster serves them.
func deleteDeviceTaintRules(ctx context.Context, labelSelector string) error {
	opts := metav1.ListOptions{LabelSelector: labelSelector}
	err := client.ResourceV1().DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
	if apierrors.IsNotFound(err) {
		err = client.ResourceV1beta2().DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
	}
	return err
}
