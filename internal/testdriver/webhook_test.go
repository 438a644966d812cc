// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission/admissiontest"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// writeServingCert writes a self-signed certificate for 127.0.0.1 and its
// key into dir and returns the files and a pool that trusts it.
func writeServingCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	pair := admissiontest.New(t, 1)
	certFile, keyFile = pair.Write(t, dir)
	return certFile, keyFile, pair.Pool
}

// claimReview is the AdmissionReview that the API server sends when claim
// (without its status) is created.
func claimReview(t *testing.T, claim *resourceapi.ResourceClaim) string {
	t.Helper()
	object := claim.DeepCopy()
	object.Status = resourceapi.ResourceClaimStatus{}
	object.TypeMeta = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"}
	raw, err := json.Marshal(object)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "review-1",
			Kind:      metav1.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaim"},
			Resource:  metav1.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"},
			Namespace: claim.Namespace,
			Name:      claim.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(review)
}

// denial returns the message of a denial, "" if the review was allowed.
func denial(t *testing.T, code int, body []byte) string {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("webhook answered HTTP %d: %s", code, body)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Response == nil || review.Response.UID != "review-1" {
		t.Fatalf("webhook answered %s (%v)", body, err)
	}
	if review.Response.Allowed {
		return ""
	}
	return review.Response.Result.Message
}

// TestWebhookSameMessageAsPrepare: for every invalid config, the webhook
// denies the claim with exactly the permanent error that prepare gives once
// the claim is allocated; valid configs and other drivers' configs pass both.
func TestWebhookSameMessageAsPrepare(t *testing.T) {
	handler := &admission.Handler{DriverName: testDriver, Validate: ValidateConfig}
	twoRequests := []resourceapi.DeviceRequestAllocationResult{result("gpu", "dev-0"), result("nic", "dev-1")}
	for name, tc := range map[string]struct {
		configs []resourceapi.DeviceAllocationConfiguration
		want    string // "": valid
	}{
		"valid": {configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed","unprepareFailures":1}`, "gpu")}},
		"other driver": {configs: []resourceapi.DeviceAllocationConfiguration{
			opaqueConfig("gpu.other.test", resourceapi.AllocationConfigSourceClaim, `{"prepare":"Sometimes"}`, "gpu"),
		}},
		"unknown prepare": {
			configs: []resourceapi.DeviceAllocationConfiguration{claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Sometimes"}`, "gpu")},
			want:    `prepare "Sometimes" is not one of "Succeed", "Permanent", "Transient" [ResourceClaim ns/c: invalid opaque device config #0 (source ResourceClaim) for request "gpu" of driver driver.dra-failfast.test]`,
		},
		"two invalid for all requests": {
			configs: []resourceapi.DeviceAllocationConfiguration{
				claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Succeed"}`, "nic"),
				claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","failures":1}`),
				claimConfig(`{"apiVersion":"v2","kind":"PrepareBehavior","Prepare":"Permanent"}`, "gpu", "nic"),
			},
			// Two entries share what the kubelet keeps: the validator's
			// words first, each entry's brackets cut.
			want: `failures is only valid with prepare "Transient", got prepare "Succeed" [ResourceClaim ns/c: invalid opaque device config #1 ...` +
				`; unknown field "Prepare"; apiVersion "v2" is not supported, want "dra-failfast.test/v1" [ResourceClaim ns/c: invalid opaque d...`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDriver(t, Config{})
			claim := newClaim("c", twoRequests, tc.configs...)

			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/validate", strings.NewReader(claimReview(t, claim)))
			req.Header.Set("Content-Type", "application/json")
			handler.ServeHTTP(rec, req)
			denied := denial(t, rec.Code, rec.Body.Bytes())

			got, err := d.PrepareResourceClaims(t.Context(), []*resourceapi.ResourceClaim{claim})
			if err != nil {
				t.Fatal(err)
			}
			prepareErr := got[claim.UID].Err
			if tc.want == "" {
				if denied != "" || prepareErr != nil {
					t.Errorf("webhook: %q, prepare: %v; want both to accept", denied, prepareErr)
				}
				return
			}
			if prepareErr == nil || !failfastplugin.IsPermanent(prepareErr) {
				t.Fatalf("prepare: %v, want a permanent error", prepareErr)
			}
			if denied != prepareErr.Error() {
				t.Errorf("messages differ:\nwebhook %s\nprepare %s", denied, prepareErr)
			}
			if !strings.HasPrefix(denied, tc.want) {
				t.Errorf("message:\n got %s\nwant %s...", denied, tc.want)
			}
		})
	}
}

// TestStartServesWebhook: Start with a webhook address serves it over TLS
// next to the driver, and Stop stops it.
func TestStartServesWebhook(t *testing.T) {
	ctx := t.Context()
	certFile, keyFile, pool := writeServingCert(t, t.TempDir())
	running, err := Start(ctx, Options{
		Config:         Config{NodeName: testNode, CDIDir: t.TempDir(), KubeClient: fakeClusterClient(t)},
		KubeletRootDir: t.TempDir(),
		Webhook:        WebhookOptions{Address: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(running.Stop)
	if running.WebhookAddress == "" {
		t.Fatal("no webhook address")
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	claim := newClaim("c", oneDevice("dev-0"), claimConfig(`{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Explode"}`, "dev"))
	resp, err := client.Post("https://"+running.WebhookAddress+admission.DefaultPath, "application/json", strings.NewReader(claimReview(t, claim)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	want := `prepare "Explode" is not one of`
	if got := denial(t, resp.StatusCode, body); !strings.HasPrefix(got, want) {
		t.Errorf("denial %q, want %q...", got, want)
	}
	resp, err = client.Get("https://" + running.WebhookAddress + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz: %v %v", resp, err)
	}
	if resp != nil {
		_ = resp.Body.Close()
	}

	running.Stop()
	client.CloseIdleConnections()
	if _, err := client.Get("https://" + running.WebhookAddress + "/healthz"); err == nil {
		t.Error("webhook still serves after Stop")
	}
}

// TestStartWebhookErrors: a webhook that cannot start fails Start.
func TestStartWebhookErrors(t *testing.T) {
	certFile, _, _ := writeServingCert(t, t.TempDir())
	_, err := Start(t.Context(), Options{
		Config:         Config{NodeName: testNode, CDIDir: t.TempDir(), KubeClient: fakeClusterClient(t)},
		KubeletRootDir: t.TempDir(),
		StatsAddress:   "127.0.0.1:0",
		Webhook:        WebhookOptions{Address: "127.0.0.1:0", CertFile: certFile, KeyFile: filepath.Join(t.TempDir(), "missing.key")},
	})
	if err == nil || !strings.Contains(err.Error(), "serving key") {
		t.Errorf("Start: %v, want an error about the key", err)
	}
	if _, err := StartWebhook(t.Context(), "", WebhookOptions{}); err == nil {
		t.Error("StartWebhook without an address started")
	}
}
