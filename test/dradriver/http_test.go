package dradriver

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
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
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, server.URL+tc.path, nil)
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
	if err := d.SetPublisher(t.Context(), &fakePublisher{}); err != nil {
		t.Fatal(err)
	}
	if err := client.Healthz(t.Context()); err != nil {
		t.Errorf("Healthz after SetPublisher: %v", err)
	}
}
