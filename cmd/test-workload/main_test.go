// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

func TestDRAEnv(t *testing.T) {
	got := draEnv([]string{"PATH=/bin", "DRA_B=2", "XDRA_C=3", "DRA_A=1", "dra_lower=0"})
	want := []string{"DRA_A=1", "DRA_B=2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("draEnv() = %q, want %q", got, want)
	}
}

// TestFetch: fetch retries until the server answers 200, and gives up with 1 after its time.
func TestFetch(t *testing.T) {
	calls := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		if calls < 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "server-pod")
	}))
	defer server.Close()
	if got := fetch(server.URL, 30*time.Second); got != 0 || calls != 2 {
		t.Errorf("fetch = %d after %d calls, want 0 after 2", got, calls)
	}
	server.Close()
	if got := fetch(server.URL, time.Millisecond); got != 1 {
		t.Errorf("fetch of a closed server = %d, want 1", got)
	}
	if got := fetch("", time.Second); got != 2 {
		t.Errorf("fetch without a URL = %d, want 2", got)
	}
}
