// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

func TestPrepareMarksUnsupportedPermanent(t *testing.T) {
	claims := []*resourceapi.ResourceClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "unsupported", UID: "uid-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fine", UID: "uid-2"}},
	}
	result, err := plugin{}.PrepareResourceClaims(t.Context(), claims)
	if err != nil {
		t.Fatal(err)
	}
	if got := result["uid-1"].Err; !failfastplugin.IsPermanent(got) || !errors.Is(got, errUnsupported) {
		t.Errorf("unsupported claim: got %v, want a permanent error wrapping %v", got, errUnsupported)
	}
	if got := result["uid-2"].Err; got != nil {
		t.Errorf("fine claim: got %v, want prepared", got)
	}
}
