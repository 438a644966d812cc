// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

func TestHTTPEndpointAndClient(t *testing.T) {
	d, publisher := newTestDriver(t, Config{TaintBroken: true})
	server := httptest.NewServer(Handler(d))
	t.Cleanup(server.Close)
	client := &Client{BaseURL: server.URL + "/"}
	ctx := t.Context()

	if err := client.Healthz(ctx); err != nil {
		t.Fatalf("Healthz: %v", err)
	}
	if err := client.SetBroken(ctx, "dev-2", true); err != nil {
		t.Fatalf("SetBroken: %v", err)
	}
	claim := newClaim("c", oneDevice("dev-2"))
	prepareOne(t, d, claim)

	stats, err := client.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	claimStats, ok := stats.Claims["uid-c"]
	if !ok || claimStats.Namespace != testNamespace || claimStats.Name != "c" || claimStats.PrepareCalls != 1 ||
		!claimStats.Permanent || !strings.Contains(claimStats.LastError, "device dev-2 is broken") {
		t.Errorf("stats of claim = %+v", claimStats)
	}
	if !reflect.DeepEqual(stats.BrokenDevices, []string{"dev-2"}) || !reflect.DeepEqual(stats.TaintedDevices, []string{"dev-2"}) {
		t.Errorf("broken = %v, tainted = %v", stats.BrokenDevices, stats.TaintedDevices)
	}

	if err := client.SetBroken(ctx, "dev-2", false); err != nil {
		t.Fatalf("SetBroken false: %v", err)
	}
	if got := publisher.taints(); len(got) != 0 {
		t.Errorf("taints after DELETE /broken: %v", got)
	}
	if err := client.Reset(ctx); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	stats, err = client.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if len(stats.Claims) != 0 || len(stats.BrokenDevices) != 0 {
		t.Errorf("after reset: %+v", stats)
	}
	if res := prepareOne(t, d, claim); res.Err != nil {
		t.Errorf("after repair: %v", res.Err)
	}

	if err := client.SetBroken(ctx, "dev-99", true); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown device: err = %v, want 404", err)
	}
}

func TestHTTPBehaviorAndRepublish(t *testing.T) {
	d, publisher := newTestDriver(t, Config{})
	server := httptest.NewServer(Handler(d))
	t.Cleanup(server.Close)
	client := &Client{BaseURL: server.URL}
	ctx := t.Context()
	claim := newClaim("c", oneDevice("dev-0"))

	spec := BehaviorSpec{Prepare: PreparePermanent, Message: "over HTTP", Wire: &WireSpec{ErrorType: ptr.To[int64](-3)}, UnprepareFailures: ptr.To[int64](1)}
	if err := client.SetBehavior(ctx, testNamespace, spec); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	if res := prepareOne(t, d, claim); !failfastplugin.IsPermanent(res.Err) || !strings.Contains(res.Err.Error(), "over HTTP") {
		t.Errorf("prepare with the override: %v", res.Err)
	}
	stats, err := client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats.Behaviors[testNamespace]; !reflect.DeepEqual(got, spec) {
		t.Errorf("stats behavior = %+v, want %+v", got, spec)
	}

	err = client.SetBehavior(ctx, testNamespace, BehaviorSpec{Prepare: PrepareSucceed, Wire: &WireSpec{GRPCCode: "Nope"}})
	for _, want := range []string{"400", `wire is only valid with prepare`, `grpcCode "Nope" is not one of`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid behavior: err = %v, want %q", err, want)
		}
	}

	if err := client.ClearBehavior(ctx, testNamespace); err != nil {
		t.Fatalf("ClearBehavior: %v", err)
	}
	if res := prepareOne(t, d, claim); res.Err != nil {
		t.Errorf("prepare after clearing the override: %v", res.Err)
	}

	before := publisher.count()
	if err := client.Republish(ctx); err != nil {
		t.Fatalf("Republish: %v", err)
	}
	if publisher.count() != before+1 {
		t.Errorf("published %d times after Republish, want %d", publisher.count(), before+1)
	}
}

func TestHTTPErrors(t *testing.T) {
	d, _ := newTestDriver(t, Config{})
	server := httptest.NewServer(Handler(d))
	t.Cleanup(server.Close)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/stats", http.StatusOK},
		{http.MethodPost, "/stats", http.StatusMethodNotAllowed},
		{http.MethodGet, "/reset", http.StatusMethodNotAllowed},
		{http.MethodPost, "/broken", http.StatusBadRequest},
		{http.MethodDelete, "/broken?device=nope", http.StatusNotFound},
		{http.MethodGet, "/nothing", http.StatusNotFound},
		{http.MethodPut, "/behavior", http.StatusBadRequest},
		{http.MethodPut, "/behavior?namespace=ns", http.StatusBadRequest},
		{http.MethodPut, "/behavior?namespace=ns&body=" + url.QueryEscape(`{"prepare":"Transient"}`), http.StatusNoContent},
		{http.MethodPut, "/behavior?namespace=ns&body=" + url.QueryEscape(`{"prepare":"Transient","extra":1}`), http.StatusBadRequest},
		{http.MethodPut, "/behavior?namespace=ns&body=" + url.QueryEscape(`[]`), http.StatusBadRequest},
		{http.MethodDelete, "/behavior", http.StatusBadRequest},
		{http.MethodDelete, "/behavior?namespace=never-set", http.StatusNoContent},
		{http.MethodGet, "/behavior?namespace=ns", http.StatusMethodNotAllowed},
		{http.MethodPost, "/republish", http.StatusNoContent},
		{http.MethodGet, "/republish", http.StatusMethodNotAllowed},
	} {
		// The body, if any, comes in the test's query parameter "body".
		var body io.Reader
		if u, err := url.Parse(tc.path); err == nil && u.Query().Has("body") {
			body = strings.NewReader(u.Query().Get("body"))
		}
		req, err := http.NewRequestWithContext(t.Context(), tc.method, server.URL+tc.path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
}

func TestHealthzBeforeReady(t *testing.T) {
	d, err := New(Config{NodeName: testNode, CDIDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(Handler(d))
	t.Cleanup(server.Close)
	client := &Client{BaseURL: server.URL}
	if err := client.Healthz(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Healthz before SetPublisher: %v, want 503", err)
	}
	if err := client.Republish(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Republish before SetPublisher: %v, want 503", err)
	}
	if err := d.SetPublisher(t.Context(), &fakePublisher{}); err != nil {
		t.Fatal(err)
	}
	if err := client.Healthz(t.Context()); err != nil {
		t.Errorf("Healthz after SetPublisher: %v", err)
	}
}
