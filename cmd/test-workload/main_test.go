// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"reflect"
	"testing"
)

func TestDRAEnv(t *testing.T) {
	got := draEnv([]string{"PATH=/bin", "DRA_B=2", "XDRA_C=3", "DRA_A=1", "dra_lower=0"})
	want := []string{"DRA_A=1", "DRA_B=2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("draEnv() = %q, want %q", got, want)
	}
}
