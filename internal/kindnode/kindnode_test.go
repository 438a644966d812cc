// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEngine writes an engine command that records its arguments and stdin
// into dir and answers like curl --include with answer.
func fakeEngine(t *testing.T, answer string) (engine, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "answer"), []byte(answer), 0o600); err != nil {
		t.Fatal(err)
	}
	engine = filepath.Join(dir, "engine")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + dir + "/args\ncat > " + dir + "/stdin\ncat " + dir + "/answer\n"
	if err := os.WriteFile(engine, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return engine, dir
}

// TestTransport: a request goes to curl in the node with its method,
// headers and body, curl's answer becomes the response: a POST without a
// body, then one with a JSON body.
func TestTransport(t *testing.T) {
	engine, dir := fakeEngine(t, "HTTP/1.1 409 Conflict\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nbusy")
	client := TestDriverClient("kind-worker")
	client.HTTPClient.Transport.(*Transport).Engine = engine
	err := client.SetBroken(t.Context(), "dev-1", true)
	if err == nil || !strings.Contains(err.Error(), "409 Conflict: busy") {
		t.Errorf("SetBroken: %v, want the 409 with its body", err)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(args))
	for _, want := range []string{"exec", "-i", "kind-worker", "curl", "--include", "--raw", "POST", "http://" + ControlAddress + "/"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("engine arguments %q lack %q", got, want)
		}
	}
	if got[0] != "exec" || got[2] != "kind-worker" || got[3] != "curl" {
		t.Errorf("engine arguments %q: want exec -i NODE curl ...", got)
	}

	// A chunked answer, as curl --raw passes it on.
	engine, _ = fakeEngine(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n{\"brokenDevices\":\r\n6\r\n[\"x\"]}\r\n0\r\n\r\n")
	client.HTTPClient.Transport.(*Transport).Engine = engine
	stats, err := client.Stats(t.Context())
	if err != nil || len(stats.BrokenDevices) != 1 || stats.BrokenDevices[0] != "x" {
		t.Errorf("Stats from a chunked answer: %+v, %v", stats, err)
	}

	engine, dir = fakeEngine(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ControlAddress+"/behavior", strings.NewReader(`{"prepare":"Permanent"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&Transport{Node: "kind-worker2", Engine: engine}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	args, _ = os.ReadFile(filepath.Join(dir, "args"))
	if string(stdin) != `{"prepare":"Permanent"}` || !strings.Contains(string(args), "Content-Type: application/json") || !strings.Contains(string(args), "--data-binary") {
		t.Errorf("body %q, arguments %q: want the JSON body on stdin with its content type", stdin, args)
	}
}

// TestTransportEngineFails: an engine that fails (node gone, curl refused)
// is an error naming the node and what curl said.
func TestTransportEngineFails(t *testing.T) {
	dir := t.TempDir()
	engine := filepath.Join(dir, "engine")
	if err := os.WriteFile(engine, []byte("#!/bin/sh\necho 'curl: (7) Failed to connect' >&2\nexit 7\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	client := TestDriverClient("kind-worker")
	client.HTTPClient.Transport.(*Transport).Engine = engine
	if err := client.Healthz(t.Context()); err == nil || !strings.Contains(err.Error(), "kind-worker") || !strings.Contains(err.Error(), "Failed to connect") {
		t.Errorf("Healthz: %v, want an error naming the node and curl's words", err)
	}
}
