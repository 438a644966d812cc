// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// maxBehaviorBody bounds the body of PUT /behavior; a message may be up to
// MaxMessageBytes long.
const maxBehaviorBody = 2 * MaxMessageBytes

// Handler returns the HTTP stats/control endpoint of d:
//
//	GET    /healthz                  200 "ok" once the driver publishes its ResourceSlices, 503 before
//	GET    /stats                    200 Stats as JSON
//	POST   /broken?device=dev-1      204, adds dev-1 to the broken set
//	DELETE /broken?device=dev-1      204, removes dev-1 from the broken set (and its taint)
//	POST   /reset                    204, clears the counters
//	PUT    /behavior?namespace=NS    204, the claims in namespace NS behave as the body, a JSON
//	                                 BehaviorSpec, says from now on, instead of as their opaque
//	                                 configs say (see Driver.SetBehavior); 400 with the problems
//	                                 for an invalid body
//	DELETE /behavior?namespace=NS    204, removes the override of namespace NS
//	POST   /republish                204, publishes the ResourceSlices again now (see
//	                                 Driver.Republish); 503 before the driver publishes
//	POST   /brownout                 204, the driver's requests to the API server (but claim reads) fail from now
//	                                 on (Config.APIBrownout); 404 without one
//	DELETE /brownout                 204, they reach it again
//	GET    /metrics                  the metrics in legacyregistry, among them failfastplugin's
//	                                 (dra_failfast_plugin_device_taint_*: taint failures and
//	                                 how long prepare calls waited for taints;
//	                                 dra_failfast_plugin_admission_*: the webhook's answers)
//
// An unknown device is 404, a missing device or namespace parameter 400.
func Handler(d *Driver) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !d.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, "starting")
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", legacyregistry.Handler())
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d.Stats()); err != nil {
			klog.FromContext(r.Context()).Error(err, "Writing stats failed")
		}
	})
	setBroken := func(broken bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			device, ok := queryParameter(w, r, "device")
			if !ok {
				return
			}
			if err := d.SetBroken(r.Context(), device, broken); err != nil {
				httpError(w, err, ErrUnknownDevice, http.StatusNotFound)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("POST /broken", setBroken(true))
	mux.HandleFunc("DELETE /broken", setBroken(false))
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		d.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /behavior", func(w http.ResponseWriter, r *http.Request) {
		namespace, ok := queryParameter(w, r, "namespace")
		if !ok {
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBehaviorBody))
		if err != nil {
			http.Error(w, fmt.Sprintf("read body: %v", err), http.StatusBadRequest)
			return
		}
		spec, err := ParseBehaviorSpec(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := d.SetBehavior(r.Context(), namespace, *spec); err != nil {
			httpError(w, err, ErrInvalidBehavior, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /behavior", func(w http.ResponseWriter, r *http.Request) {
		namespace, ok := queryParameter(w, r, "namespace")
		if !ok {
			return
		}
		d.ClearBehavior(r.Context(), namespace)
		w.WriteHeader(http.StatusNoContent)
	})
	setBrownout := func(on bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if d.brownout == nil {
				http.Error(w, "the driver's client has no brownout switch", http.StatusNotFound)
				return
			}
			d.brownout.Set(on)
			klog.FromContext(r.Context()).Info("API brownout", "on", on)
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("POST /brownout", setBrownout(true))
	mux.HandleFunc("DELETE /brownout", setBrownout(false))
	mux.HandleFunc("POST /republish", func(w http.ResponseWriter, r *http.Request) {
		if err := d.Republish(r.Context()); err != nil {
			httpError(w, err, ErrNotPublishing, http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// queryParameter returns the query parameter name of r, or answers 400 when
// it is missing.
func queryParameter(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	value := r.URL.Query().Get(name)
	if value == "" {
		http.Error(w, "missing query parameter "+name, http.StatusBadRequest)
	}
	return value, value != ""
}

// httpError answers err with status when it is the known error (errors.Is),
// else with 500.
func httpError(w http.ResponseWriter, err, known error, status int) {
	if !errors.Is(err, known) {
		status = http.StatusInternalServerError
	}
	http.Error(w, err.Error(), status)
}
