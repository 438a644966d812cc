// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
)

const (
	// DefaultMaxRequestBytes bounds the body of an admission request: the
	// API server's own limit for a request body (3 MiB); an UPDATE carries
	// the object twice, and DRA objects are far smaller (at most 32
	// configs of 10 KiB each).
	DefaultMaxRequestBytes = 3 << 20
	// DefaultTimeout bounds the handling of one admission request, like
	// the API server's default webhook timeoutSeconds (10).
	DefaultTimeout = 10 * time.Second
	// MaxTimeout is the longest the API server waits for a webhook
	// (timeoutSeconds is at most 30): a longer Handler.Timeout is cut to it.
	MaxTimeout = 30 * time.Second
	// DefaultMaxConcurrent bounds the requests validated at once, unless
	// Handler.MaxConcurrent says otherwise.
	DefaultMaxConcurrent = 32
	// DefaultMaxConcurrentLarge bounds the requests larger than
	// SmallRequestBytes validated at once, unless
	// Handler.MaxConcurrentLarge says otherwise: with the default
	// MaxRequestBytes, a few MiB of bodies and their decoded objects.
	DefaultMaxConcurrentLarge = 2
	// SmallRequestBytes is the largest request body that is not "large":
	// a claim or template with a few config entries is a few KiB, the
	// API server sends CREATE of claims and templates only, and no
	// number of large requests keeps a small one waiting for a large
	// slot.
	SmallRequestBytes = 64 << 10
)

// GroupName is the API group of the objects the webhook validates.
const GroupName = "resource.k8s.io"

// Version is the API version of the objects the webhook validates: register
// the webhook for it (with the default matchPolicy Equivalent, the API
// server converts objects of other versions to it).
const Version = "v1"

var resourceKinds = map[string]Kind{
	ResourceClaims:         KindResourceClaim,
	ResourceClaimTemplates: KindResourceClaimTemplate,
	DeviceClasses:          KindDeviceClass,
}

// Handler is a validating admission webhook (admission.k8s.io/v1
// AdmissionReview over HTTP POST, JSON) for resource.k8s.io/v1
// ResourceClaims, ResourceClaimTemplates and DeviceClasses. On CREATE and
// UPDATE it runs Validate on every opaque device config entry of DriverName
// (spec.devices.config, spec.spec.devices.config, spec.config) and denies the
// object when an entry is invalid, with one InvalidConfigError per invalid
// entry: the same text that ValidateClaim gives at prepare time. Everything
// else is allowed: entries of other drivers, other resources, versions and
// subresources, DELETE and CONNECT.
//
// On UPDATE, entries that the old object has already (same driver,
// requests and parameters) are not validated again: a claim's and a
// template's spec cannot change anyway, and denying an update of an object
// that predates the webhook would also deny removing its finalizers, so it
// could never be deleted.
//
// Requests that cannot be read (not a POST of JSON, larger than
// MaxRequestBytes, not an AdmissionReview) get an HTTP error, as do requests
// whose validation did not end with a verdict (Validate panicked, or did not
// return within Timeout): the API server then applies the webhook's
// failurePolicy. An object that does not decode as the kind it claims to be
// is denied.
type Handler struct {
	// DriverName is the driver whose entries get validated. Required.
	DriverName string
	// Validate is the validator, the same that ValidateClaim runs.
	// Required.
	Validate ConfigValidator
	// MaxRequestBytes bounds the request body; 0 is
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Timeout bounds the handling of one request; 0 is DefaultTimeout, at
	// most MaxTimeout. A shorter timeout that the API server sends (the
	// timeout query parameter) takes precedence, less a margin (a tenth,
	// at least 250ms), so that the handler answers before the API server
	// stops waiting.
	Timeout time.Duration
	// MaxConcurrent bounds the requests validated at once, and
	// MaxConcurrentLarge those with a body larger than SmallRequestBytes
	// (or of unknown size); 0 selects DefaultMaxConcurrent and
	// DefaultMaxConcurrentLarge. A request waits for its slot until its
	// timeout, then gets HTTP 429 (the API server applies the failure
	// policy). A request holds its slots until its validation ended, also
	// when its answer went out before (a validator past the timeout).
	MaxConcurrent      int
	MaxConcurrentLarge int
	// GeneratedClaims is what happens to an invalid ResourceClaim generated
	// for a pod from a template the webhook never saw (see GeneratedClaims);
	// the zero value denies it like any claim.
	GeneratedClaims GeneratedClaims
	// KubeClient looks up the pod of a generated claim, for
	// GeneratedClaimsByOwner (RBAC: get pods).
	KubeClient kubernetes.Interface

	slotsOnce  sync.Once
	slots      chan struct{}
	largeSlots chan struct{}
}

// acquire takes the slots of a request of size bytes (-1: unknown), waiting
// until ctx ends. It returns the function that gives them back, or false.
func (h *Handler) acquire(ctx context.Context, size int64) (func(), bool) {
	h.slotsOnce.Do(func() {
		h.slots = make(chan struct{}, cmp.Or(max(h.MaxConcurrent, 0), DefaultMaxConcurrent))
		h.largeSlots = make(chan struct{}, cmp.Or(max(h.MaxConcurrentLarge, 0), DefaultMaxConcurrentLarge))
	})
	large := size < 0 || size > SmallRequestBytes
	if large {
		select {
		case h.largeSlots <- struct{}{}:
		case <-ctx.Done():
			return nil, false
		}
	}
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		if large {
			<-h.largeSlots
		}
		return nil, false
	}
	return func() {
		<-h.slots
		if large {
			<-h.largeSlots
		}
	}, true
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	RegisterMetrics()
	start := time.Now()
	resource, result := ResourceOther, ResultError
	defer func() {
		decisions.WithLabelValues(h.DriverName, resource, result).Inc()
		duration.WithLabelValues(h.DriverName, resource).Observe(time.Since(start).Seconds())
	}()
	logger := klog.FromContext(r.Context())

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST is allowed", http.StatusMethodNotAllowed)
		return
	}
	if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/json" {
		http.Error(w, fmt.Sprintf("content type %q is not application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	maxBytes := h.MaxRequestBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRequestBytes
	}
	if r.ContentLength > maxBytes {
		http.Error(w, fmt.Sprintf("request body is larger than %d bytes", maxBytes), http.StatusRequestEntityTooLarge)
		return
	}
	// The slots bound the bodies in memory too: take them before reading.
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout(r))
	defer cancel()
	release, ok := h.acquire(ctx, r.ContentLength)
	if !ok {
		result = ResultBusy
		logger.Info("Admission request not validated: too many requests in flight", "maxConcurrent", cap(h.slots), "maxConcurrentLarge", cap(h.largeSlots), "bytes", r.ContentLength)
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("webhook of driver %s: too many admission requests in flight", h.DriverName), http.StatusTooManyRequests)
		return
	}
	// Given back when the validation ends, not when the answer goes out.
	releaseOnce := sync.OnceFunc(release)
	defer func() {
		if releaseOnce != nil {
			releaseOnce()
		}
	}()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			http.Error(w, fmt.Sprintf("request body is larger than %d bytes", maxBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, fmt.Sprintf("reading request body: %v", err), http.StatusBadRequest)
		return
	}
	review, err := decodeReview(body)
	if err != nil {
		logger.V(2).Info("Malformed admission request", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := review.Request
	if _, ok := resourceKinds[req.Resource.Resource]; ok && req.Resource.Group == GroupName {
		resource = req.Resource.Resource
	}

	type answer struct {
		response *admissionv1.AdmissionResponse
		result   string
		err      error
	}
	// The validator is the driver's code: if it does not return in time,
	// answer without it and let the goroutine finish on its own.
	answers := make(chan answer, 1)
	validationRelease := releaseOnce
	releaseOnce = nil
	go func() {
		defer validationRelease()
		defer func() {
			if r := recover(); r != nil {
				answers <- answer{err: fmt.Errorf("%w: panic: %v\n%s", errValidatorFailed, r, debug.Stack())}
			}
		}()
		response, result, err := h.review(ctx, req)
		answers <- answer{response: response, result: result, err: err}
	}()
	var a answer
	select {
	case a = <-answers:
	case <-ctx.Done():
		a = answer{err: fmt.Errorf("no verdict within the timeout: %w", context.Cause(ctx))}
	}
	if a.err != nil {
		logger.Error(a.err, "Admission request not validated", "uid", req.UID, "resource", req.Resource, "namespace", req.Namespace, "name", req.Name)
		http.Error(w, fmt.Sprintf("validating opaque device config of driver %s: %v", h.DriverName, a.err), http.StatusInternalServerError)
		return
	}
	result = a.result
	if !a.response.Allowed {
		logger.Info("Denied", "uid", req.UID, "resource", req.Resource.Resource, "operation", req.Operation, "namespace", req.Namespace, "name", req.Name, "result", result, "message", a.response.Result.Message)
	} else {
		logger.V(4).Info("Admitted", "uid", req.UID, "resource", req.Resource, "operation", req.Operation, "namespace", req.Namespace, "name", req.Name, "result", result)
	}
	a.response.UID = req.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: a.response})
	if err != nil {
		result = ResultError
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// timeout is Timeout, cut to MaxTimeout and to a little less than what the
// API server waits (answerMargin): the handler's own answer, an HTTP error
// that says why, reaches the API server before it gives up on its own and
// applies the failure policy to a bare timeout.
func (h *Handler) timeout(r *http.Request) time.Duration {
	timeout := h.maxTimeout()
	// The API server calls webhooks with ?timeout=<timeoutSeconds>s.
	if value := r.URL.Query().Get("timeout"); value != "" {
		if d, err := time.ParseDuration(value); err == nil && d > 0 {
			timeout = min(timeout, d-answerMargin(d))
		}
	}
	return timeout
}

// answerMargin is how much sooner than the API server's timeout d the
// handler gives up: a tenth of it, at least 250ms (the way back), and never
// more than half of it.
func answerMargin(d time.Duration) time.Duration {
	return min(max(d/10, 250*time.Millisecond), d/2)
}

// maxTimeout is Timeout with its default, cut to MaxTimeout.
func (h *Handler) maxTimeout() time.Duration {
	if h.Timeout <= 0 {
		return DefaultTimeout
	}
	return min(h.Timeout, MaxTimeout)
}

// decodeReview decodes an admission.k8s.io/v1 AdmissionReview with a
// request. Field names are case-sensitive, numbers keep their precision;
// unknown fields are ignored so that a newer API server can talk to it.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, fmt.Errorf("request is not an AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, fmt.Errorf("request is apiVersion %q kind %q, want %q %q", review.APIVersion, review.Kind, admissionv1.SchemeGroupVersion, "AdmissionReview")
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("AdmissionReview request has no uid")
	}
	return &review, nil
}

// Review answers one admission request. The response carries no UID; the
// error is not nil when there is no verdict (Validate panicked or did not
// return before ctx ended), then the request should fail rather than be
// denied or allowed. For drivers that have a webhook server of their own.
func (h *Handler) Review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req == nil {
		return nil, errors.New("no admission request")
	}
	response, _, err := h.review(ctx, req)
	return response, err
}

func (h *Handler) review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string, error) {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	kind, ours := resourceKinds[req.Resource.Resource]
	switch {
	case !ours || req.Resource.Group != GroupName, req.SubResource != "":
		return allowed, ResultIgnored, nil
	case req.Resource.Version != Version:
		// Only a webhook registered for other versions with matchPolicy
		// Exact gets these: the prepare-time validation still runs.
		klog.FromContext(ctx).V(1).Info("Not validating, unsupported version: register the webhook for "+GroupName+"/"+Version, "resource", req.Resource, "namespace", req.Namespace, "name", req.Name)
		return allowed, ResultIgnored, nil
	case req.Operation != admissionv1.Create && req.Operation != admissionv1.Update:
		return allowed, ResultIgnored, nil
	case req.Operation == admissionv1.Update && kind != KindDeviceClass:
		// The spec of a claim and of a template is immutable: the API
		// server rejects a changed one before validating admission, so
		// an update brings no entry that its create did not.
		return allowed, ResultIgnored, nil
	}
	if want := (metav1.GroupVersionKind{Group: GroupName, Version: Version, Kind: string(kind)}); req.Kind != want {
		return deny(http.StatusBadRequest, fmt.Sprintf("request for %s carries kind %s, want %s", req.Resource.Resource, gvkString(req.Kind), gvkString(want))), ResultError, nil
	}
	configs, meta, err := h.objectConfigs(kind, req.Object.Raw, req)
	if err != nil {
		return deny(http.StatusBadRequest, err.Error()), ResultError, nil
	}
	if req.Operation == admissionv1.Update {
		// An old object that does not decode has no entries to keep.
		old, _, _ := h.objectConfigs(kind, req.OldObject.Raw, req)
		kept := make(map[string]bool, len(old))
		for _, oldCfg := range old {
			kept[entryKey(oldCfg)] = true
		}
		configs = slices.DeleteFunc(configs, func(cfg OpaqueConfig) bool { return kept[entryKey(cfg)] })
	}
	invalid, err := validateAll(ctx, h.Validate, configs)
	if err != nil {
		return nil, ResultError, err
	}
	if len(invalid) == 0 {
		return allowed, ResultAllowed, nil
	}
	if owner, generated := generatedFor(meta); generated && kind == KindResourceClaim && req.Operation == admissionv1.Create {
		namespace := meta.Namespace
		if namespace == "" {
			namespace = req.Namespace
		}
		if allow, why := allowGenerated(ctx, h.GeneratedClaims, h.KubeClient, namespace, owner); allow {
			klog.FromContext(ctx).Info("Allowing a generated ResourceClaim with invalid config: its pod will fail at prepare",
				"claim", klog.KRef(namespace, req.Name), "pod", owner.Name, "why", why, "err", invalid.Error())
			return allowed, ResultAllowedInvalidGenerated, nil
		}
	}
	return deny(http.StatusForbidden, invalid.Error()), ResultDenied, nil
}

// deny answers with code, which kubectl shows as "Error from server
// (Forbidden): ... admission webhook "..." denied the request: message" for
// 403.
func deny(code int32, message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    code,
			Reason:  reasonFor(code),
			Message: message,
		},
	}
}

func reasonFor(code int32) metav1.StatusReason {
	if code == http.StatusForbidden {
		return metav1.StatusReasonForbidden
	}
	return metav1.StatusReasonBadRequest
}

func gvkString(gvk metav1.GroupVersionKind) string {
	return schema.GroupVersionKind(gvk).String()
}

// entryKey identifies an entry by its driver, requests and parameters (as
// compact JSON: the API may have re-encoded them), so that an update's
// entries are matched with the old object's in one pass each.
func entryKey(cfg OpaqueConfig) string {
	raw := cfg.Parameters.Raw
	var compact bytes.Buffer
	if json.Compact(&compact, raw) == nil {
		raw = compact.Bytes()
	}
	key, _ := json.Marshal([]any{cfg.Driver, cfg.Requests, string(raw)})
	return string(key)
}

// objectConfigs decodes raw as kind and returns the entries of the driver
// and the object's metadata.
func (h *Handler) objectConfigs(kind Kind, raw []byte, req *admissionv1.AdmissionRequest) ([]OpaqueConfig, *metav1.ObjectMeta, error) {
	if len(raw) == 0 {
		return nil, nil, fmt.Errorf("request has no %s", kind)
	}
	var (
		meta    *metav1.ObjectMeta
		typ     *metav1.TypeMeta
		entries []resourceapi.DeviceClaimConfiguration
		decode  func() error
	)
	switch kind {
	case KindResourceClaim:
		var claim resourceapi.ResourceClaim
		meta, typ = &claim.ObjectMeta, &claim.TypeMeta
		decode = func() error {
			err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &claim)
			entries = claim.Spec.Devices.Config
			return err
		}
	case KindResourceClaimTemplate:
		var template resourceapi.ResourceClaimTemplate
		meta, typ = &template.ObjectMeta, &template.TypeMeta
		decode = func() error {
			err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &template)
			entries = template.Spec.Spec.Devices.Config
			return err
		}
	case KindDeviceClass:
		var class resourceapi.DeviceClass
		meta, typ = &class.ObjectMeta, &class.TypeMeta
		decode = func() error {
			err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &class)
			for _, config := range class.Spec.Config {
				entries = append(entries, resourceapi.DeviceClaimConfiguration{DeviceConfiguration: config.DeviceConfiguration})
			}
			return err
		}
	default:
		return nil, nil, fmt.Errorf("unsupported kind %s", kind)
	}
	if err := decode(); err != nil {
		return nil, nil, fmt.Errorf("cannot decode %s: %w", kind, err)
	}
	if (typ.APIVersion != "" || typ.Kind != "") && (typ.APIVersion != GroupName+"/"+Version || typ.Kind != string(kind)) {
		return nil, nil, fmt.Errorf("object is apiVersion %q kind %q, want %q %q", typ.APIVersion, typ.Kind, GroupName+"/"+Version, kind)
	}
	object := ObjectRef{Kind: kind, Namespace: meta.Namespace, Name: meta.Name}
	if kind != KindDeviceClass && object.Namespace == "" {
		object.Namespace = req.Namespace
	}
	if object.Name == "" {
		object.Name = req.Name
	}
	if object.Name == "" && meta.GenerateName != "" {
		// The API server generates names before validating admission,
		// so this only happens to a request that did not come from it.
		object.Name = meta.GenerateName + "*"
	}
	// The API server's own limits: an object past them is not one it
	// would send, and validating it would only cost.
	if len(entries) > resourceapi.DeviceConfigMaxSize {
		return nil, nil, fmt.Errorf("%s has %d config entries, the API allows at most %d", kind, len(entries), resourceapi.DeviceConfigMaxSize)
	}
	var configs []OpaqueConfig
	for i, entry := range entries {
		if entry.Opaque == nil || entry.Opaque.Driver != h.DriverName {
			continue
		}
		if n := len(entry.Opaque.Parameters.Raw); n > resourceapi.OpaqueParametersMaxLength {
			return nil, nil, fmt.Errorf("%s config entry #%d has %d bytes of parameters, the API allows at most %d", kind, i, n, resourceapi.OpaqueParametersMaxLength)
		}
		if n := len(entry.Requests); n > resourceapi.DeviceRequestsMaxSize {
			return nil, nil, fmt.Errorf("%s config entry #%d names %d requests, the API allows at most %d", kind, i, n, resourceapi.DeviceRequestsMaxSize)
		}
		configs = append(configs, OpaqueConfig{
			Driver:          h.DriverName,
			Parameters:      entry.Opaque.Parameters,
			Requests:        entry.Requests,
			Object:          object,
			Source:          object,
			Index:           i,
			AllocationIndex: -1,
		})
	}
	return configs, meta, nil
}
