// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kindnode reaches the test driver's control endpoint on a kind
// node. deploy/test-driver serves it on the node's loopback only
// (ControlAddress), so that nothing on the pod network can make the driver
// fail claims; the tests and the demo reach it from the host through the
// node's container: each request is a curl inside the node (docker exec).
package kindnode

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

// ControlAddress is where deploy/test-driver/kubelet-plugin.yaml's plugin
// serves its stats and control endpoint: the node's loopback.
const ControlAddress = "127.0.0.1:8081"

// TestDriverClient returns a client of the test driver's control endpoint
// on node, a kind node container of the project's container engine.
func TestDriverClient(node string) *testdriver.Client {
	return &testdriver.Client{
		BaseURL:    "http://" + ControlAddress,
		HTTPClient: &http.Client{Transport: &Transport{Node: node}},
	}
}

// Transport sends each HTTP request with curl inside the node's container.
type Transport struct {
	// Node is the node's container.
	Node string
	// Engine is the container engine's command; default "docker".
	Engine string
}

// RoundTrip runs curl in the node and parses its answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	engine := t.Engine
	if engine == "" {
		engine = "docker"
	}
	// --include: the status line and headers come first, as on the wire;
	// --raw: the body too (curl would decode a chunked body and keep the
	// header that says it is chunked). Expect: curl would wait for a 100
	// Continue for a larger body.
	args := []string{"exec", "-i", t.Node, "curl", "--silent", "--show-error", "--include", "--raw", "--request", req.Method, "--header", "Expect:"}
	for _, key := range slices.Sorted(maps.Keys(req.Header)) {
		for _, value := range req.Header[key] {
			args = append(args, "--header", key+": "+value)
		}
	}
	var body io.Reader = http.NoBody
	if req.Body != nil && req.Body != http.NoBody {
		args = append(args, "--data-binary", "@-")
		body = req.Body
	}
	args = append(args, "--", req.URL.String())
	cmd := exec.CommandContext(req.Context(), engine, args...)
	cmd.Stdin = body
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s in node %s: %w: %s", req.Method, req.URL, t.Node, err, strings.TrimSpace(stderr.String()))
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), req)
	if err != nil {
		return nil, fmt.Errorf("%s %s in node %s: reading curl's answer: %w", req.Method, req.URL, t.Node, err)
	}
	return resp, nil
}
