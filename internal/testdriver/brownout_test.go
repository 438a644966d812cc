// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAPIBrownout: POST /brownout makes the wrapped transport fail every
// request without sending it, DELETE /brownout lets them through again; a
// driver without a switch answers 404.
func TestAPIBrownout(t *testing.T) {
	var served int
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))
	defer api.Close()
	brownout := &APIBrownout{}
	client := &http.Client{Transport: brownout.Wrap(http.DefaultTransport)}
	control := httptest.NewServer(Handler(&Driver{brownout: brownout}))
	defer control.Close()
	driver := &Client{BaseURL: control.URL}

	get := func() error {
		resp, err := client.Get(api.URL + "/apis/resource.k8s.io/v1/devicetaintrules")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil || served != 1 {
		t.Fatalf("before the brownout: %v, %d served", err, served)
	}
	if err := driver.SetBrownout(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if err := get(); err == nil || !strings.Contains(err.Error(), "API server unreachable (test driver brownout): GET /apis/resource.k8s.io/v1/devicetaintrules") || served != 1 {
		t.Errorf("during the brownout: %v, %d served; want the brownout's error, nothing sent", err, served)
	}
	// The claims that prepare calls need still come through.
	resp, err := client.Get(api.URL + "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/claim")
	if err != nil || served != 2 {
		t.Errorf("a claim's read during the brownout: %v, %d served", err, served)
	} else {
		_ = resp.Body.Close()
	}
	if err := driver.SetBrownout(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if err := get(); err != nil || served != 3 {
		t.Errorf("after the brownout: %v, %d served", err, served)
	}

	without := httptest.NewServer(Handler(&Driver{}))
	defer without.Close()
	if err := (&Client{BaseURL: without.URL}).SetBrownout(t.Context(), true); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a driver without a brownout switch: %v, want 404", err)
	}
}
