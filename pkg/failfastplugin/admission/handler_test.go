// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"
)

// deniedClaimReview is an AdmissionReview as the API server sends it for
// kubectl create of a ResourceClaim with an invalid config of the driver.
const deniedClaimReview = `{
  "kind": "AdmissionReview",
  "apiVersion": "admission.k8s.io/v1",
  "request": {
    "uid": "0a8f3c4e-7d1b-4a57-9f2c-6c1e5b3d2a10",
    "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
    "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
    "requestKind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
    "requestResource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
    "name": "gpu",
    "namespace": "ns",
    "operation": "CREATE",
    "userInfo": {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins", "system:authenticated"]},
    "object": {
      "kind": "ResourceClaim",
      "apiVersion": "resource.k8s.io/v1",
      "metadata": {
        "name": "gpu",
        "namespace": "ns",
        "uid": "5f0c2d7a-1b6e-4e8f-a3c9-0d4b7e6f1a22",
        "creationTimestamp": "2026-07-30T10:00:00Z",
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "resource.k8s.io/v1", "time": "2026-07-30T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
      },
      "spec": {
        "devices": {
          "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-class", "allocationMode": "ExactCount", "count": 1}}],
          "config": [
            {"requests": ["gpu"], "opaque": {"driver": "nic.example.com", "parameters": {"speed": "fast"}}},
            {"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {"apiVersion": "gpu.example.com/v1", "kind": "GPUConfig", "partitions": 9}}}
          ]
        }
      },
      "status": {}
    },
    "oldObject": null,
    "dryRun": false,
    "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
  }
}`

// reviewOf builds the JSON of an AdmissionReview as the API server sends it.
type reviewOf struct {
	operation   admissionv1.Operation
	resource    string // default resourceclaims
	version     string // default v1
	kind        string // default: the kind of resource
	subResource string
	object      any
	oldObject   any
}

func (r reviewOf) String() string {
	resource, version, kind := r.resource, r.version, r.kind
	if resource == "" {
		resource = ResourceClaims
	}
	if version == "" {
		version = Version
	}
	if kind == "" {
		kind = string(resourceKinds[resource])
	}
	operation := r.operation
	if operation == "" {
		operation = admissionv1.Create
	}
	req := &admissionv1.AdmissionRequest{
		UID:         "uid-1",
		Kind:        metav1.GroupVersionKind{Group: GroupName, Version: version, Kind: kind},
		Resource:    metav1.GroupVersionResource{Group: GroupName, Version: version, Resource: resource},
		SubResource: r.subResource,
		Namespace:   "ns",
		Name:        "obj",
		Operation:   operation,
		DryRun:      ptr.To(false),
	}
	if r.object != nil {
		req.Object.Raw = []byte(mustJSON(r.object))
	}
	if r.oldObject != nil {
		req.OldObject.Raw = []byte(mustJSON(r.oldObject))
	}
	return mustJSON(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
}

func template(configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaimTemplate {
	claim := testClaim(configs...)
	return &resourceapi.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gpu-template"},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: claim.Spec},
	}
}

func deviceClass(configs ...resourceapi.DeviceConfiguration) *resourceapi.DeviceClass {
	class := &resourceapi.DeviceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-class"},
	}
	for _, config := range configs {
		class.Spec.Config = append(class.Spec.Config, resourceapi.DeviceClassConfiguration{DeviceConfiguration: config})
	}
	return class
}

func TestHandler(t *testing.T) {
	const (
		allowed = iota
		denied
		httpError
	)
	claimWithoutMeta := testClaim(claimEntry(testDriver, invalidParams))
	claimWithoutMeta.Name, claimWithoutMeta.Namespace, claimWithoutMeta.GenerateName = "", "", "gpu-"
	for name, tc := range map[string]struct {
		body        string
		method      string
		contentType string
		url         string
		timeout     time.Duration

		outcome  int
		code     int32  // of a denial
		want     string // whole denial message, or part of an HTTP error
		resource string
		result   string
	}{
		"API server's review, denied": {
			body:    deniedClaimReview,
			outcome: denied, code: http.StatusForbidden,
			want:     invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #1 (source ResourceClaim) for request "gpu" of driver gpu.example.com]`,
			resource: ResourceClaims, result: ResultDenied,
		},
		"valid claim": {
			body:     reviewOf{object: testClaim(claimEntry(testDriver, validParams, "gpu"))}.String(),
			resource: ResourceClaims, result: ResultAllowed,
		},
		"claim with another driver's config": {
			body:     reviewOf{object: testClaim(claimEntry(otherDriver, `"whatever"`, "gpu"))}.String(),
			resource: ResourceClaims, result: ResultAllowed,
		},
		"claim without config": {
			body:     reviewOf{object: testClaim()}.String(),
			resource: ResourceClaims, result: ResultAllowed,
		},
		"claim without name and namespace": {
			body:    reviewOf{object: claimWithoutMeta}.String(),
			outcome: denied, code: http.StatusForbidden,
			want:     invalidText + ` [ResourceClaim ns/obj: invalid opaque device config #0 (source ResourceClaim) for all requests of driver gpu.example.com]`,
			resource: ResourceClaims, result: ResultDenied,
		},
		"invalid template": {
			body:    reviewOf{resource: ResourceClaimTemplates, object: template(claimEntry(otherDriver, invalidParams), claimEntry(testDriver, invalidParams, "gpu", "nic"))}.String(),
			outcome: denied, code: http.StatusForbidden,
			want:     invalidText + ` [ResourceClaimTemplate ns/gpu-template: invalid opaque device config #1 (source ResourceClaimTemplate) for requests "gpu", "nic" of driver gpu.example.com]`,
			resource: ResourceClaimTemplates, result: ResultDenied,
		},
		"valid template": {
			body:     reviewOf{resource: ResourceClaimTemplates, object: template(claimEntry(testDriver, validParams))}.String(),
			resource: ResourceClaimTemplates, result: ResultAllowed,
		},
		"invalid class, both entries": {
			body:    reviewOf{resource: DeviceClasses, object: deviceClass(opaque(testDriver, invalidParams), opaque(testDriver, validParams), opaque(testDriver, `{"partitions":0}`))}.String(),
			outcome: denied, code: http.StatusForbidden,
			want: invalidText + ` [DeviceClass gpu-class: invalid opaque device config #0 (source DeviceClass) for a...` +
				`; partitions must be between 1 and 7, got 0 [DeviceClass gpu-class: invalid opaque device config #2 (source DeviceClass) for a...`,
			resource: DeviceClasses, result: ResultDenied,
		},
		"class update adds an invalid entry": {
			body: reviewOf{
				operation: admissionv1.Update, resource: DeviceClasses,
				object:    deviceClass(opaque(testDriver, invalidParams), opaque(testDriver, `{"partitions":0}`)),
				oldObject: deviceClass(opaque(testDriver, invalidParams)),
			}.String(),
			outcome: denied, code: http.StatusForbidden,
			want:     `partitions must be between 1 and 7, got 0 [DeviceClass gpu-class: invalid opaque device config #1 (source DeviceClass) for all requests of the class of driver gpu.example.com]`,
			resource: DeviceClasses, result: ResultDenied,
		},
		"class update keeps an invalid entry, e.g. removing a finalizer": {
			body: reviewOf{
				operation: admissionv1.Update, resource: DeviceClasses,
				object:    deviceClass(opaque(testDriver, invalidParams)),
				oldObject: deviceClass(opaque(testDriver, `{ "partitions": 9 }`)),
			}.String(),
			resource: DeviceClasses, result: ResultAllowed,
		},
		"class update with an undecodable old object validates all": {
			body: reviewOf{
				operation: admissionv1.Update, resource: DeviceClasses,
				object:    deviceClass(opaque(testDriver, invalidParams)),
				oldObject: "not a class",
			}.String(),
			outcome: denied, code: http.StatusForbidden,
			want:     invalidText + ` [DeviceClass gpu-class: invalid opaque device config #0 (source DeviceClass) for all requests of the class of driver gpu.example.com]`,
			resource: DeviceClasses, result: ResultDenied,
		},
		// The API server rejects a changed spec before validating
		// admission: an update of a claim or template adds no entry.
		"claim update is not validated": {
			body: reviewOf{
				operation: admissionv1.Update,
				object:    testClaim(claimEntry(testDriver, invalidParams)),
				oldObject: "not a claim",
			}.String(),
			resource: ResourceClaims, result: ResultIgnored,
		},
		"template update is not validated": {
			body: reviewOf{
				operation: admissionv1.Update, resource: ResourceClaimTemplates,
				object: template(claimEntry(testDriver, invalidParams)),
			}.String(),
			resource: ResourceClaimTemplates, result: ResultIgnored,
		},
		"more config entries than the API allows": {
			body:    reviewOf{object: testClaim(slices.Repeat([]resourceapi.DeviceClaimConfiguration{claimEntry(testDriver, validParams)}, resourceapi.DeviceConfigMaxSize+1)...)}.String(),
			outcome: denied, code: http.StatusBadRequest,
			want:     "ResourceClaim has 33 config entries, the API allows at most 32",
			resource: ResourceClaims, result: ResultError,
		},
		"parameters larger than the API allows": {
			body:    reviewOf{object: testClaim(claimEntry(testDriver, `{"pad":"`+strings.Repeat("x", resourceapi.OpaqueParametersMaxLength)+`"}`))}.String(),
			outcome: denied, code: http.StatusBadRequest,
			want:     "ResourceClaim config entry #0 has 10250 bytes of parameters, the API allows at most 10240",
			resource: ResourceClaims, result: ResultError,
		},
		"DELETE is not validated": {
			body:     reviewOf{operation: admissionv1.Delete, oldObject: testClaim(claimEntry(testDriver, invalidParams))}.String(),
			resource: ResourceClaims, result: ResultIgnored,
		},
		"status subresource is not validated": {
			body:     reviewOf{operation: admissionv1.Update, subResource: "status", object: testClaim(claimEntry(testDriver, invalidParams)), oldObject: testClaim()}.String(),
			resource: ResourceClaims, result: ResultIgnored,
		},
		"other resource": {
			body:     strings.ReplaceAll(deniedClaimReview, `"resource": "resourceclaims"`, `"resource": "pods"`),
			resource: ResourceOther, result: ResultIgnored,
		},
		"other group": {
			body:     strings.Replace(deniedClaimReview, `"version": "v1", "resource": "resourceclaims"`, `"group": "example.com", "version": "v1", "resource": "resourceclaims"`, 1),
			resource: ResourceOther, result: ResultIgnored,
		},
		"other version": {
			body:     reviewOf{version: "v1beta2", object: testClaim(claimEntry(testDriver, invalidParams))}.String(),
			resource: ResourceClaims, result: ResultIgnored,
		},
		"wrong kind for the resource": {
			body:    reviewOf{kind: "Pod", object: testClaim(claimEntry(testDriver, invalidParams))}.String(),
			outcome: denied, code: http.StatusBadRequest,
			want:     "request for resourceclaims carries kind resource.k8s.io/v1, Kind=Pod, want resource.k8s.io/v1, Kind=ResourceClaim",
			resource: ResourceClaims, result: ResultError,
		},
		"object of the wrong kind": {
			body:    reviewOf{object: template(claimEntry(testDriver, invalidParams))}.String(),
			outcome: denied, code: http.StatusBadRequest,
			want:     `object is apiVersion "resource.k8s.io/v1" kind "ResourceClaimTemplate", want "resource.k8s.io/v1" "ResourceClaim"`,
			resource: ResourceClaims, result: ResultError,
		},
		"object does not decode": {
			body:    reviewOf{object: map[string]any{"spec": map[string]any{"devices": "all of them"}}}.String(),
			outcome: denied, code: http.StatusBadRequest,
			want:     "cannot decode ResourceClaim: json: cannot unmarshal",
			resource: ResourceClaims, result: ResultError,
		},
		"no object": {
			body:    reviewOf{}.String(),
			outcome: denied, code: http.StatusBadRequest,
			want:     "request has no ResourceClaim",
			resource: ResourceClaims, result: ResultError,
		},
		"malformed JSON": {
			body:    `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{`,
			outcome: httpError, code: http.StatusBadRequest, want: "request is not an AdmissionReview",
			resource: ResourceOther, result: ResultError,
		},
		"wrong case": {
			body:    strings.Replace(deniedClaimReview, `"request"`, `"Request"`, 1),
			outcome: httpError, code: http.StatusBadRequest, want: "AdmissionReview has no request",
			resource: ResourceOther, result: ResultError,
		},
		"v1beta1 review": {
			body:    strings.Replace(deniedClaimReview, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1),
			outcome: httpError, code: http.StatusBadRequest, want: `request is apiVersion "admission.k8s.io/v1beta1" kind "AdmissionReview"`,
			resource: ResourceOther, result: ResultError,
		},
		"no uid": {
			body:    strings.Replace(deniedClaimReview, `"uid": "0a8f3c4e-7d1b-4a57-9f2c-6c1e5b3d2a10",`, "", 1),
			outcome: httpError, code: http.StatusBadRequest, want: "AdmissionReview request has no uid",
			resource: ResourceOther, result: ResultError,
		},
		"empty body": {
			outcome: httpError, code: http.StatusBadRequest, want: "request is not an AdmissionReview",
			resource: ResourceOther, result: ResultError,
		},
		"GET": {
			body: deniedClaimReview, method: http.MethodGet,
			outcome: httpError, code: http.StatusMethodNotAllowed, want: "only POST",
			resource: ResourceOther, result: ResultError,
		},
		"not JSON": {
			body: deniedClaimReview, contentType: "application/yaml",
			outcome: httpError, code: http.StatusUnsupportedMediaType, want: `content type "application/yaml" is not application/json`,
			resource: ResourceOther, result: ResultError,
		},
		"JSON with charset": {
			body: deniedClaimReview, contentType: "application/json; charset=utf-8",
			outcome: denied, code: http.StatusForbidden,
			want:     invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #1 (source ResourceClaim) for request "gpu" of driver gpu.example.com]`,
			resource: ResourceClaims, result: ResultDenied,
		},
		"too large": {
			body:    strings.Replace(deniedClaimReview, `"status": {}`, `"status": {}, "padding": "`+strings.Repeat("x", DefaultMaxRequestBytes)+`"`, 1),
			outcome: httpError, code: http.StatusRequestEntityTooLarge, want: "request body is larger than 3145728 bytes",
			resource: ResourceOther, result: ResultError,
		},
		"validator panics": {
			body:    reviewOf{object: testClaim(claimEntry(testDriver, `{"panic":true}`))}.String(),
			outcome: httpError, code: http.StatusInternalServerError, want: "validating opaque device config of driver gpu.example.com: validator failed: panic: validator bug",
			resource: ResourceClaims, result: ResultError,
		},
		"validator runs out of time": {
			body: reviewOf{object: testClaim(claimEntry(testDriver, `{"block":true}`))}.String(), timeout: 50 * time.Millisecond,
			outcome: httpError, code: http.StatusInternalServerError, want: "context deadline exceeded",
			resource: ResourceClaims, result: ResultError,
		},
		"API server's timeout is shorter": {
			body: reviewOf{object: testClaim(claimEntry(testDriver, `{"block":true}`))}.String(), url: "/validate?timeout=50ms",
			outcome: httpError, code: http.StatusInternalServerError, want: "context deadline exceeded",
			resource: ResourceClaims, result: ResultError,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := &Handler{DriverName: testDriver, Validate: testValidate, Timeout: tc.timeout}
			counter := decisions.WithLabelValues(testDriver, tc.resource, tc.result)
			before, err := testutil.GetCounterMetricValue(counter)
			if err != nil {
				t.Fatal(err)
			}
			method, url, contentType := http.MethodPost, "/validate?timeout=10s", "application/json"
			if tc.method != "" {
				method = tc.method
			}
			if tc.url != "" {
				url = tc.url
			}
			if tc.contentType != "" {
				contentType = tc.contentType
			}
			req := httptest.NewRequestWithContext(t.Context(), method, url, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", contentType)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if after, _ := testutil.GetCounterMetricValue(counter); after-before != 1 {
				t.Errorf("%s{resource=%q,result=%q} went up by %v, want 1", DecisionsMetric, tc.resource, tc.result, after-before)
			}
			if tc.outcome == httpError {
				if rec.Code != int(tc.code) || !strings.Contains(rec.Body.String(), tc.want) {
					t.Errorf("got HTTP %d %q, want %d with %q", rec.Code, rec.Body.String(), tc.code, tc.want)
				}
				return
			}
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("got HTTP %d %s %q, want 200 JSON", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
			}
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
				t.Fatalf("response is not JSON: %v", err)
			}
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Request != nil || review.Response == nil {
				t.Fatalf("response is not an AdmissionReview response: %s", rec.Body.String())
			}
			var sent admissionv1.AdmissionReview
			_ = json.Unmarshal([]byte(tc.body), &sent)
			if review.Response.UID != sent.Request.UID {
				t.Errorf("response uid %q, want %q", review.Response.UID, sent.Request.UID)
			}
			if tc.outcome == allowed {
				if !review.Response.Allowed || review.Response.Result != nil {
					t.Errorf("not allowed: %s", rec.Body.String())
				}
				return
			}
			if review.Response.Allowed || review.Response.Result == nil {
				t.Fatalf("not denied: %s", rec.Body.String())
			}
			result := review.Response.Result
			if result.Code != tc.code || result.Status != metav1.StatusFailure {
				t.Errorf("code %d status %q, want %d Failure", result.Code, result.Status, tc.code)
			}
			if tc.code == http.StatusForbidden && result.Message != tc.want || !strings.Contains(result.Message, tc.want) {
				t.Errorf("message:\n got %s\nwant %s", result.Message, tc.want)
			}
		})
	}
}

// TestSameMessage: the webhook's denial of a claim and ValidateClaim's
// error for that claim once allocated say the same.
func TestSameMessage(t *testing.T) {
	claim := testClaim(
		claimEntry(otherDriver, invalidParams, "gpu"),
		claimEntry(testDriver, validParams, "any/big"),
		claimEntry(testDriver, invalidParams, "gpu", "nic"),
	)
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(reviewOf{object: claim}.String()))
	req.Header.Set("Content-Type", "application/json")
	(&Handler{DriverName: testDriver, Validate: testValidate}).ServeHTTP(rec, req)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil || review.Response.Result == nil {
		t.Fatalf("no denial: %v %s", err, rec.Body.String())
	}

	// The scheduler picked "any/small": the claim's entry for "any/big"
	// is left out of the allocation, a class config comes first.
	allocate(claim,
		classEntry(opaque(otherDriver, `{}`), "gpu"),
		fromClaim(claim.Spec.Devices.Config[0]),
		fromClaim(claim.Spec.Devices.Config[2]),
	)
	err := ValidateClaim(t.Context(), testDriver, claim, testValidate)
	if err == nil {
		t.Fatal("no error at prepare time")
	}
	want := invalidText + ` [ResourceClaim ns/gpu: invalid opaque device config #2 (source ResourceClaim) for requests "gpu", "nic" of driver gpu.example.com]`
	if got := review.Response.Result.Message; got != want {
		t.Errorf("webhook:\n got %s\nwant %s", got, want)
	}
	if got := err.Error(); got != want {
		t.Errorf("prepare:\n got %s\nwant %s", got, want)
	}
}

// TestReview: Review is the handler without HTTP.
func TestReview(t *testing.T) {
	h := &Handler{DriverName: testDriver, Validate: testValidate}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal([]byte(deniedClaimReview), &review); err != nil {
		t.Fatal(err)
	}
	response, err := h.Review(t.Context(), review.Request)
	if err != nil || response.Allowed || !strings.HasPrefix(response.Result.Message, invalidText) {
		t.Errorf("got %+v, %v, want a denial", response, err)
	}
}

// FuzzHandler: whatever the body, the handler does not panic, and answers
// either with an HTTP error or with an AdmissionReview response for the
// request's uid.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(deniedClaimReview))
	f.Add([]byte(reviewOf{object: testClaim(claimEntry(testDriver, validParams, "gpu"))}.String()))
	f.Add([]byte(reviewOf{resource: ResourceClaimTemplates, object: template(claimEntry(testDriver, invalidParams, "gpu"))}.String()))
	f.Add([]byte(reviewOf{operation: admissionv1.Update, resource: DeviceClasses, object: deviceClass(opaque(testDriver, invalidParams)), oldObject: deviceClass()}.String()))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","resource":{"group":"resource.k8s.io","version":"v1","resource":"deviceclasses"},"kind":{"group":"resource.k8s.io","version":"v1","kind":"DeviceClass"},"operation":"CREATE","object":{"spec":{"config":[{"opaque":null},{"opaque":{"driver":"gpu.example.com","parameters":[1,2]}}]}}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	h := &Handler{DriverName: testDriver, Validate: testValidate, Timeout: time.Second}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Denials are logged: not millions of times.
		ctx := klog.NewContext(t.Context(), logr.Discard())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/validate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusInternalServerError, http.StatusRequestEntityTooLarge:
			return
		default:
			t.Fatalf("unexpected HTTP status %d: %s", rec.Code, rec.Body.String())
		}
		var sent, got admissionv1.AdmissionReview
		// Decoded as the handler does, case-sensitive.
		if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &sent); err != nil {
			t.Fatalf("answered 200 to a body that is not JSON: %v", err)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("response is not JSON: %v", err)
		}
		if got.Response == nil || got.Response.UID != sent.Request.UID || got.APIVersion != "admission.k8s.io/v1" {
			t.Fatalf("response %s does not answer the request", rec.Body.String())
		}
		if !got.Response.Allowed && (got.Response.Result == nil || got.Response.Result.Message == "") {
			t.Fatalf("denied without a message: %s", rec.Body.String())
		}
	})
}

// serve sends body to h as the API server would, with timeout, and returns
// the HTTP status.
func serve(t *testing.T, h *Handler, body string, timeout time.Duration) int {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/validate?timeout="+timeout.String(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestConcurrencyBound: large requests wait for one of MaxConcurrentLarge
// slots and give up with 429 at their timeout; a small request does not
// wait behind them; a validator past its request's timeout keeps its slots
// until it returns.
func TestConcurrencyBound(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	h := &Handler{DriverName: testDriver, MaxConcurrent: 2, MaxConcurrentLarge: 1, Validate: func(ctx context.Context, cfg OpaqueConfig) error {
		calls.Add(1)
		if strings.Contains(string(cfg.Parameters.Raw), "hold") {
			<-release // ignores ctx, like a slow validator
		}
		return testValidate(ctx, cfg)
	}}
	pad := strings.Repeat(" ", SmallRequestBytes)
	large := func(params string) string {
		return strings.Replace(reviewOf{object: testClaim(claimEntry(testDriver, params))}.String(), `"status":{}`, `"status":{}`+pad, 1)
	}
	small := reviewOf{object: testClaim(claimEntry(testDriver, `{"partitions":1}`))}.String()
	if len(large("{}")) <= SmallRequestBytes || len(small) > SmallRequestBytes {
		t.Fatalf("fixtures: large %d bytes, small %d bytes", len(large("{}")), len(small))
	}

	// The holder answers at its timeout but keeps its slots.
	if code := serve(t, h, large(`{"partitions":1,"hold":true}`), 50*time.Millisecond); code != http.StatusInternalServerError {
		t.Fatalf("holder: HTTP %d, want 500 (no verdict in time)", code)
	}
	if code := serve(t, h, large(`{"partitions":1}`), 50*time.Millisecond); code != http.StatusTooManyRequests {
		t.Errorf("large request while the large slot is held: HTTP %d, want 429", code)
	}
	if code := serve(t, h, small, time.Second); code != http.StatusOK {
		t.Errorf("small request while the large slot is held: HTTP %d, want 200", code)
	}
	close(release)
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return serve(t, h, large(`{"partitions":1}`), 50*time.Millisecond) == http.StatusOK, nil
	}); err != nil {
		t.Errorf("the large slot was not given back when the validator returned: %v", err)
	}
	if got := calls.Load(); got < 3 {
		t.Errorf("validator called %d times, want the holder, the small and the last large request", got)
	}
}

// TestValidationStopsWhenAnswered: once a request is answered (here: at
// its timeout), no further entry of it is validated.
func TestValidationStopsWhenAnswered(t *testing.T) {
	var calls atomic.Int32
	h := &Handler{DriverName: testDriver, Validate: func(ctx context.Context, cfg OpaqueConfig) error {
		if calls.Add(1) == 1 {
			<-ctx.Done() // the first entry outlives the request
		}
		return nil
	}}
	body := reviewOf{object: testClaim(slices.Repeat([]resourceapi.DeviceClaimConfiguration{claimEntry(testDriver, `{"partitions":1}`)}, 5)...)}.String()
	if code := serve(t, h, body, 20*time.Millisecond); code != http.StatusInternalServerError {
		t.Fatalf("HTTP %d, want 500 (no verdict in time)", code)
	}
	// The validation gives its slot back when it has ended.
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(h.slots) == 0, nil
	}); err != nil {
		t.Fatalf("validation did not end: %v", err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("validator called %d times after the request was answered, want only the first entry", got)
	}
}

// TestTimeout: the handler gives up a little before the API server does
// (the timeout it sends, less a tenth, at least 250ms, at most half), and
// never later than its own Timeout or MaxTimeout.
func TestTimeout(t *testing.T) {
	for name, tc := range map[string]struct {
		timeout time.Duration
		url     string
		want    time.Duration
	}{
		"no timeout sent":                 {url: "/validate", want: DefaultTimeout},
		"no timeout sent, own":            {timeout: 3 * time.Second, url: "/validate", want: 3 * time.Second},
		"own above the maximum":           {timeout: time.Hour, url: "/validate", want: MaxTimeout},
		"registration's 5s":               {url: "/validate?timeout=5s", want: 4500 * time.Millisecond},
		"API server's 1s":                 {url: "/validate?timeout=1s", want: 750 * time.Millisecond},
		"API server's 200ms":              {url: "/validate?timeout=200ms", want: 100 * time.Millisecond},
		"own shorter than API server's":   {timeout: 2 * time.Second, url: "/validate?timeout=5s", want: 2 * time.Second},
		"API server's 30s":                {url: "/validate?timeout=30s", want: DefaultTimeout},
		"API server's 30s, own 30s":       {timeout: 30 * time.Second, url: "/validate?timeout=30s", want: 27 * time.Second},
		"unreadable timeout is ignored":   {url: "/validate?timeout=soon", want: DefaultTimeout},
		"non-positive timeout is ignored": {url: "/validate?timeout=0s", want: DefaultTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			h := &Handler{DriverName: testDriver, Validate: testValidate, Timeout: tc.timeout}
			if got := h.timeout(httptest.NewRequest(http.MethodPost, tc.url, nil)); got != tc.want {
				t.Errorf("timeout = %v, want %v", got, tc.want)
			}
		})
	}
}
