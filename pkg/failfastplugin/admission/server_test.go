// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission/admissiontest"

	admissionv1 "k8s.io/api/admission/v1"
)

// testCert is a self-signed serving certificate for 127.0.0.1.
type testCert = admissiontest.Pair

func newTestCert(t *testing.T, serial int64) testCert { return admissiontest.New(t, serial) }

func newTestCertUntil(t *testing.T, serial int64, notAfter time.Time) testCert {
	return admissiontest.NewUntil(t, serial, notAfter)
}

// writeAtomically replaces path with a new file, as a Secret volume update
// does (a new inode).
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// writeInPlace rewrites path in place (same inode), with a modification
// time that surely differs from the last one.
func writeInPlace(t *testing.T, path string, data []byte, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// servedSerial makes a new TLS connection and returns the serial number of
// the server's certificate.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test looks at the certificate itself
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func startTestServer(t *testing.T, ctx context.Context, cert testCert) (*Server, string, string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeAtomically(t, certFile, cert.CertPEM)
	writeAtomically(t, keyFile, cert.KeyPEM)
	server, err := Start(ctx, ServerConfig{
		DriverName: testDriver,
		Validate:   testValidate,
		Address:    "127.0.0.1:0",
		CertFile:   certFile,
		KeyFile:    keyFile,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return server, certFile, keyFile
}

func TestCertificateReload(t *testing.T) {
	first := newTestCert(t, 1)
	server, certFile, keyFile := startTestServer(t, t.Context(), first)
	if got := servedSerial(t, server.Addr()); got != 1 {
		t.Fatalf("serves certificate %d, want 1", got)
	}

	// A Secret volume update: both files replaced.
	second := newTestCert(t, 2)
	writeAtomically(t, keyFile, second.KeyPEM)
	// Only the key is new: the pair does not match, the old one stays.
	if got := servedSerial(t, server.Addr()); got != 1 {
		t.Errorf("with a new key and the old certificate serves %d, want 1", got)
	}
	writeAtomically(t, certFile, second.CertPEM)
	if got := servedSerial(t, server.Addr()); got != 2 {
		t.Errorf("after replacing the files serves %d, want 2", got)
	}

	// Rewritten in place.
	third := newTestCert(t, 3)
	mtime := time.Now().Add(time.Minute)
	writeInPlace(t, certFile, third.CertPEM, mtime)
	writeInPlace(t, keyFile, third.KeyPEM, mtime)
	if got := servedSerial(t, server.Addr()); got != 3 {
		t.Errorf("after rewriting the files serves %d, want 3", got)
	}

	// Files gone for a moment: the last certificate stays.
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, server.Addr()); got != 3 {
		t.Errorf("without files serves %d, want 3", got)
	}
	// Garbage: the last certificate stays.
	writeAtomically(t, certFile, []byte("not a certificate"))
	if got := servedSerial(t, server.Addr()); got != 3 {
		t.Errorf("with a broken certificate file serves %d, want 3", got)
	}
	writeAtomically(t, certFile, third.CertPEM)
	if got := servedSerial(t, server.Addr()); got != 3 {
		t.Errorf("after repair serves %d, want 3", got)
	}
}

func TestServer(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cert := newTestCert(t, 7)
	server, _, _ := startTestServer(t, ctx, cert)
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}},
		Timeout:   10 * time.Second,
	}
	defer client.CloseIdleConnections()
	base := "https://" + server.Addr()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(path); code != http.StatusOK || body != "ok\n" {
			t.Errorf("GET %s: %d %q, want 200 ok", path, code, body)
		}
	}
	if code, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", code)
	}

	resp, err := client.Post(base+DefaultPath+"?timeout=10s", "application/json", strings.NewReader(deniedClaimReview))
	if err != nil {
		t.Fatalf("POST %s: %v", DefaultPath, err)
	}
	var review admissionv1.AdmissionReview
	err = json.NewDecoder(resp.Body).Decode(&review)
	_ = resp.Body.Close()
	if err != nil || review.Response == nil || review.Response.Allowed || !strings.HasPrefix(review.Response.Result.Message, invalidText) {
		t.Errorf("POST %s: %v %+v, want a denial", DefaultPath, err, review.Response)
	}

	code, metrics := get("/metrics")
	if code != http.StatusOK {
		t.Errorf("GET /metrics: %d", code)
	}
	for _, want := range []string{
		DecisionsMetric + `{driver_name="gpu.example.com",resource="resourceclaims",result="denied"}`,
		DurationMetric + `_bucket{driver_name="gpu.example.com",resource="resourceclaims",le="0.00025"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics do not contain %s", want)
		}
	}

	// The API server sends no more than 3 MiB.
	big := strings.Replace(deniedClaimReview, `"status": {}`, `"status": {}, "padding": "`+strings.Repeat("x", DefaultMaxRequestBytes)+`"`, 1)
	resp, err = client.Post(base+DefaultPath, "application/json", strings.NewReader(big))
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST of %d bytes: %d, want 413", len(big), resp.StatusCode)
		}
	} // else: the server closed the connection while the client still sent, also fine

	cancel()
	select {
	case <-server.Done():
	case <-time.After(DefaultShutdownTimeout + 5*time.Second):
		t.Fatal("server did not stop")
	}
	if err := server.Err(); err != nil {
		t.Errorf("Err after stop: %v", err)
	}
	if _, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", server.Addr()); err == nil {
		t.Error("server still accepts connections after stopping")
	}
}

// TestShutdownWaitsForRequests: a request in flight when ctx is canceled
// gets its answer.
func TestShutdownWaitsForRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cert := newTestCert(t, 8)
	// A validator that blocks until released.
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeAtomically(t, certFile, cert.CertPEM)
	writeAtomically(t, keyFile, cert.KeyPEM)
	server, err := Start(ctx, ServerConfig{
		DriverName: testDriver,
		Validate: func(context.Context, OpaqueConfig) error {
			entered <- struct{}{}
			<-release
			return nil
		},
		Address:  "127.0.0.1:0",
		CertFile: certFile,
		KeyFile:  keyFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	answered := make(chan int, 1)
	go func() {
		resp, err := client.Post("https://"+server.Addr()+DefaultPath, "application/json", strings.NewReader(deniedClaimReview))
		if err != nil {
			t.Errorf("request in flight failed: %v", err)
			answered <- 0
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-entered
	cancel()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-server.Done():
		t.Fatal("server stopped with a request in flight")
	default:
	}
	close(release)
	if code := <-answered; code != http.StatusOK {
		t.Errorf("request in flight got %d, want 200", code)
	}
	<-server.Done()
}

func TestReadyzExpiredCertificate(t *testing.T) {
	server, _, _ := startTestServer(t, t.Context(), newTestCertUntil(t, 11, time.Now().Add(-time.Minute)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second} //nolint:gosec // the certificate is expired on purpose
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + server.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), "serving certificate expired at ") {
		t.Errorf("GET /readyz: %d %q, want 503 expired", resp.StatusCode, body)
	}
}

func TestStartErrors(t *testing.T) {
	cert := newTestCert(t, 9)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeAtomically(t, certFile, cert.CertPEM)
	writeAtomically(t, keyFile, cert.KeyPEM)
	other := newTestCert(t, 10)
	otherKey := filepath.Join(dir, "other.key")
	writeAtomically(t, otherKey, other.KeyPEM)

	running, _, _ := startTestServer(t, t.Context(), cert)
	ok := ServerConfig{DriverName: testDriver, Validate: testValidate, Address: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}
	for name, tc := range map[string]struct {
		change func(*ServerConfig)
		want   string
	}{
		"no driver":          {change: func(c *ServerConfig) { c.DriverName = "" }, want: "driver name must be set"},
		"no validator":       {change: func(c *ServerConfig) { c.Validate = nil }, want: "validator must be set"},
		"no key":             {change: func(c *ServerConfig) { c.KeyFile = "" }, want: "certificate and key files must be set"},
		"missing cert":       {change: func(c *ServerConfig) { c.CertFile = filepath.Join(dir, "missing") }, want: "serving certificate: stat"},
		"key of another":     {change: func(c *ServerConfig) { c.KeyFile = otherKey }, want: "load serving certificate: tls: private key does not match public key"},
		"bad path":           {change: func(c *ServerConfig) { c.Path = "validate" }, want: `path "validate" does not start with /`},
		"address in use":     {change: func(c *ServerConfig) { c.Address = running.Addr() }, want: "address already in use"},
		"address unparsable": {change: func(c *ServerConfig) { c.Address = "no-port" }, want: "missing port"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			tc.change(&cfg)
			server, err := Start(t.Context(), cfg)
			if err == nil {
				t.Fatalf("started on %s", server.Addr())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
