// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package drivercheck

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestDeviceTaintRulesOfAnOlderAPIServer: a 1.36 API server serves
// DeviceTaintRules in resource.k8s.io/v1beta2 only, a 1.35 one in v1alpha3
// only; the check reads the rules where they are served, and finds none
// where no version is. The fake clientset holds the same rule in each
// version, with another taint value: the value read says which was read.
func TestDeviceTaintRulesOfAnOlderAPIServer(t *testing.T) {
	v1beta2Rule := &resourcev1beta2.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-0-fault"},
		Spec: resourcev1beta2.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1beta2.DeviceTaintSelector{Driver: stringPtr(driver), Pool: stringPtr("node"), Device: stringPtr("dev-0")},
			Taint:          resourcev1beta2.DeviceTaint{Key: "example.com/fault", Value: "fan", Effect: resourcev1beta2.DeviceTaintEffectNoSchedule},
		},
	}
	v1alpha3Rule := &resourcev1alpha3.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-0-fault"},
		Spec: resourcev1alpha3.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1alpha3.DeviceTaintSelector{Driver: stringPtr(driver), Pool: stringPtr("node"), Device: stringPtr("dev-0")},
			Taint:          resourcev1alpha3.DeviceTaint{Key: "example.com/fault", Value: "ecc", Effect: resourcev1alpha3.DeviceTaintEffectNoExecute},
		},
	}
	notServed := func(versions ...string) k8stesting.ReactionFunc {
		return func(action k8stesting.Action) (bool, runtime.Object, error) {
			for _, v := range versions {
				if action.GetResource().Version == v {
					return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "devicetaintrules"}, "")
				}
			}
			return false, nil, nil
		}
	}
	for name, tc := range map[string]struct {
		notServed []string
		want      []resourceapi.DeviceTaint
		wantErr   bool
	}{
		"v1beta2 only (1.36)":  {notServed: []string{"v1"}, want: []resourceapi.DeviceTaint{{Key: "example.com/fault", Value: "fan", Effect: resourceapi.DeviceTaintEffectNoSchedule}}},
		"v1alpha3 only (1.35)": {notServed: []string{"v1", "v1beta2"}, want: []resourceapi.DeviceTaint{{Key: "example.com/fault", Value: "ecc", Effect: resourceapi.DeviceTaintEffectNoExecute}}},
		"none":                 {notServed: []string{"v1", "v1beta2", "v1alpha3"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(v1beta2Rule, v1alpha3Rule)
			client.PrependReactor("list", "devicetaintrules", notServed(tc.notServed...))
			rules, err := ListDeviceTaintRules(t.Context(), client, metav1.ListOptions{})
			if tc.wantErr {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("err = %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []resourceapi.DeviceTaint
			for _, r := range rules {
				if s := r.Spec.DeviceSelector; s == nil || *s.Driver != driver || *s.Pool != "node" || *s.Device != "dev-0" {
					t.Errorf("rule %s: selector %+v", r.Name, s)
				}
				got = append(got, r.Spec.Taint)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("taints %v, want %v", got, tc.want)
			}
		})
	}
}

func stringPtr(s string) *string { return &s }
