// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// APIBrownout makes the driver's requests to the API server fail while it is
// on, as an API server that does not answer them would (a brownout, the
// driver's flow-control share used up), for tests of what the driver and the
// library do then (POST /brownout). All but the reads of ResourceClaims:
// kubeletplugin reads the claims it prepares, and without them no prepare
// call, hence no fault, reaches the driver. Only the driver's own client: the
// kubelet and everything else on the node reach the API server as before.
type APIBrownout struct{ on atomic.Bool }

// Set turns the brownout on or off.
func (b *APIBrownout) Set(on bool) { b.on.Store(on) }

// On tells whether the brownout is on.
func (b *APIBrownout) On() bool { return b.on.Load() }

// Wrap is a rest.Config WrapTransport: requests fail at once while the
// brownout is on.
func (b *APIBrownout) Wrap(next http.RoundTripper) http.RoundTripper {
	return brownoutTransport{brownout: b, next: next}
}

type brownoutTransport struct {
	brownout *APIBrownout
	next     http.RoundTripper
}

func (t brownoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.brownout.On() && !(req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/resourceclaims/")) {
		return nil, fmt.Errorf("API server unreachable (test driver brownout): %s %s not sent", req.Method, req.URL.Path)
	}
	return t.next.RoundTrip(req)
}
