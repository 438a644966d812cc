// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client talks to the HTTP endpoint of a running driver (--stats-address).
type Client struct {
	// BaseURL is for example "http://127.0.0.1:8081".
	BaseURL string
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// SetBrownout makes the driver's requests to the API server fail (POST
// /brownout) or reach it again (DELETE /brownout).
func (c *Client) SetBrownout(ctx context.Context, on bool) error {
	method := http.MethodDelete
	if on {
		method = http.MethodPost
	}
	return c.do(ctx, method, "/brownout", nil, http.StatusNoContent, nil)
}

// Healthz returns nil when the driver answers GET /healthz with 200.
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, http.StatusOK, nil)
}

// Stats returns the counters (GET /stats).
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var stats Stats
	if err := c.do(ctx, http.MethodGet, "/stats", nil, http.StatusOK, &stats); err != nil {
		return nil, err
	}
	return &stats, nil
}

// SetBroken adds device to the broken set (POST /broken) or removes it
// (DELETE /broken).
func (c *Client) SetBroken(ctx context.Context, device string, broken bool) error {
	method := http.MethodDelete
	if broken {
		method = http.MethodPost
	}
	return c.do(ctx, method, "/broken", url.Values{"device": {device}}, http.StatusNoContent, nil)
}

// Reset clears the counters (POST /reset).
func (c *Client) Reset(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/reset", nil, http.StatusNoContent, nil)
}

// SetBehavior makes the claims in namespace behave as spec says, whatever
// their opaque configs say (PUT /behavior?namespace=...). See
// Driver.SetBehavior.
func (c *Client) SetBehavior(ctx context.Context, namespace string, spec BehaviorSpec) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("dra-test-driver PUT /behavior: %w", err)
	}
	return c.doBody(ctx, http.MethodPut, "/behavior", url.Values{"namespace": {namespace}}, body, http.StatusNoContent, nil)
}

// ClearBehavior removes the override of namespace (DELETE
// /behavior?namespace=...).
func (c *Client) ClearBehavior(ctx context.Context, namespace string) error {
	return c.do(ctx, http.MethodDelete, "/behavior", url.Values{"namespace": {namespace}}, http.StatusNoContent, nil)
}

// Republish publishes the ResourceSlices again now (POST /republish). See
// Driver.Republish for why a caller may have to repeat it.
func (c *Client) Republish(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/republish", nil, http.StatusNoContent, nil)
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, wantStatus int, into any) error {
	return c.doBody(ctx, method, path, query, nil, wantStatus, into)
}

func (c *Client) doBody(ctx context.Context, method, path string, query url.Values, body []byte, wantStatus int, into any) error {
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var bodyReader io.Reader
	if body != nil {
		bodyReader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bodyReader)
	if err != nil {
		return fmt.Errorf("dra-test-driver %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("dra-test-driver %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != wantStatus {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("dra-test-driver %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if into != nil {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			return fmt.Errorf("dra-test-driver %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}
