// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// forgedReview is the costliest review anyone who reaches the webhook's
// Service can send: a DeviceClass UPDATE (the only UPDATE the webhook still
// validates) of nearly MaxRequestBytes, with the most config entries the
// API allows in the new and the old object, each with the largest
// parameters, none equal, padded to the body limit.
func forgedReview(tb testing.TB) string {
	tb.Helper()
	entry := func(i int) resourceapi.DeviceConfiguration {
		return opaque(testDriver, `{"partitions":3,"pad":"`+strings.Repeat(string(rune('a'+i%26)), resourceapi.OpaqueParametersMaxLength-40)+`"}`)
	}
	var newEntries, oldEntries []resourceapi.DeviceConfiguration
	for i := range resourceapi.DeviceConfigMaxSize {
		newEntries = append(newEntries, entry(i))
		oldEntries = append(oldEntries, entry(i+1))
	}
	body := reviewOf{operation: admissionv1.Update, resource: DeviceClasses, object: deviceClass(newEntries...), oldObject: deviceClass(oldEntries...)}.String()
	pad := DefaultMaxRequestBytes - len(body) - 1024
	if pad < 0 {
		tb.Fatalf("forged review is %d bytes, over the limit", len(body))
	}
	return strings.Replace(body, `"request":{`, `"request":{`+strings.Repeat(" ", pad), 1)
}

// BenchmarkHonestReviewUnderForgedLoad: while 16 clients send forged
// reviews (forgedReview) as fast as the webhook takes them, each iteration
// sends one honest claim CREATE and times it. Reported: the honest
// reviews' p50 and p99, the forged reviews answered and refused (429) per
// second, and the peak heap in use during the run.
//
//	go test -run '^$' -bench HonestReviewUnderForgedLoad -benchtime 400x ./admission
func BenchmarkHonestReviewUnderForgedLoad(b *testing.B) {
	h := &Handler{DriverName: testDriver, Validate: testValidate}
	server := httptest.NewServer(h)
	defer server.Close()
	forged := forgedReview(b)
	honest := reviewOf{object: testClaim(claimEntry(testDriver, validParams))}.String()
	post := func(ctx context.Context, body string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL+"/?timeout=10s", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := server.Client().Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}

	ctx, stop := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, err := post(ctx, forged)
				if err != nil {
					continue
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	var peak uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var stats runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&stats)
			peak = max(peak, stats.HeapInuse)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond) // the forged load is under way

	latencies := make([]time.Duration, 0, b.N)
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		code, err := post(b.Context(), honest)
		if err != nil || code != http.StatusOK {
			b.Fatalf("honest review: HTTP %d, %v", code, err)
		}
		latencies = append(latencies, time.Since(t0))
	}
	b.StopTimer()
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	<-sampled
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "honest-p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "honest-p99-ms")
	b.ReportMetric(float64(codes[http.StatusInternalServerError]+codes[http.StatusOK])/elapsed.Seconds(), "forged-answered/s")
	b.ReportMetric(float64(codes[http.StatusTooManyRequests])/elapsed.Seconds(), "forged-refused/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
