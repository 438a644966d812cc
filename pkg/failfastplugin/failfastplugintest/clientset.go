// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package failfastplugintest lets a driver's unit tests run the library's
// device faults against client-go's fake clientset.
//
// The library reads and writes DeviceTaintRules over the clientset's REST
// client, in whichever version of resource.k8s.io the API server serves
// (failfastplugin.DeviceTaintRuleVersions), and a fake clientset has no REST
// client. ServeDeviceTaintRules gives it one: an HTTP server on the loopback
// interface, for the test's duration, that answers as an API server does
// from the fake's objects and reactors:
//
//	client := fake.NewClientset(node)
//	kube := failfastplugintest.ServeDeviceTaintRules(t, client, "v1")
//	helper, err := failfastplugin.StartWithDeviceFaults(ctx, driver,
//		failfastplugin.DeviceFaultConfig{DriverName: name, NodeName: node.Name, KubeClient: kube})
//
// The rules are stored in client as resource.k8s.io/v1beta2 objects (the
// fields the library writes are the same in every version): read them with
// client.ResourceV1beta2().DeviceTaintRules(), and inject failures with
// client.PrependReactor(verb, "devicetaintrules", ...).
package failfastplugintest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	rulesapi "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	resourcev1beta2 "k8s.io/client-go/kubernetes/typed/resource/v1beta2"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// Clientset is a fake clientset whose REST client serves DeviceTaintRules.
// Pass it to the library (DeviceFaultConfig.KubeClient) and to
// kubeletplugin; every other API is the fake's.
type Clientset struct {
	*fake.Clientset
	restClient rest.Interface
	requests   *requestLog
}

// ResourceV1beta2 is the fake's, with the REST client that serves
// DeviceTaintRules.
func (c *Clientset) ResourceV1beta2() resourcev1beta2.ResourceV1beta2Interface {
	return resourceV1beta2{ResourceV1beta2Interface: c.Clientset.ResourceV1beta2(), restClient: c.restClient}
}

type resourceV1beta2 struct {
	resourcev1beta2.ResourceV1beta2Interface
	restClient rest.Interface
}

func (r resourceV1beta2) RESTClient() rest.Interface { return r.restClient }

// OnRequest makes hook run before each DeviceTaintRules request is served
// (method as in HTTP, version of resource.k8s.io): a hook that blocks is an
// API server that does not answer. Unlike a reactor of the fake, which runs
// under the fake's lock and so stops every other call, it holds up that
// request alone.
func (c *Clientset) OnRequest(hook func(method, version string)) {
	c.requests.mu.Lock()
	defer c.requests.mu.Unlock()
	c.requests.hook = hook
}

// Requests returns the DeviceTaintRules requests served so far, as "METHOD
// VERSION" (for example "POST v1").
func (c *Clientset) Requests() []string { return c.requests.get() }

// Lists returns the list requests served so far: their label selector,
// limit and continue token, and how many rules each answer held.
func (c *Clientset) Lists() []ListRequest {
	c.requests.mu.Lock()
	defer c.requests.mu.Unlock()
	return slices.Clone(c.requests.lists)
}

// ListRequest is one list request for DeviceTaintRules, as served.
type ListRequest struct {
	LabelSelector string
	Limit         int64
	Continue      string
	// Items is how many rules the answer held.
	Items int
}

// ServeDeviceTaintRules makes client serve DeviceTaintRules in the versions
// of resource.k8s.io given, in its discovery and over HTTP (no version: the
// API server serves none), until the test ends. Its REST client asks for
// protobuf, as the kubelet's and many drivers' clients do: the library must
// speak JSON all the same, and a request that does not is a test error.
func ServeDeviceTaintRules(t testing.TB, client *fake.Clientset, versions ...string) *Clientset {
	t.Helper()
	client.Resources = slices.DeleteFunc(client.Resources, func(list *metav1.APIResourceList) bool {
		return strings.HasPrefix(list.GroupVersion, "resource.k8s.io/")
	})
	for _, version := range versions {
		client.Resources = append(client.Resources, &metav1.APIResourceList{
			GroupVersion: "resource.k8s.io/" + version,
			APIResources: []metav1.APIResource{{Name: "devicetaintrules", Kind: "DeviceTaintRule", Verbs: metav1.Verbs{"create", "get", "list", "delete"}}},
		})
	}
	served := &Clientset{Clientset: client, requests: &requestLog{}}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(t, client, versions, served.requests, w, r)
	}))
	t.Cleanup(server.Close)
	restClient, err := rest.RESTClientFor(&rest.Config{
		Host:    server.URL,
		APIPath: "/apis",
		ContentConfig: rest.ContentConfig{
			GroupVersion:         &rulesapi.SchemeGroupVersion,
			NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
			ContentType:          "application/vnd.kubernetes.protobuf",
		},
	})
	if err != nil {
		t.Fatalf("REST client for the DeviceTaintRules server: %v", err)
	}
	served.restClient = restClient
	return served
}

type requestLog struct {
	mu    sync.Mutex
	list  []string
	lists []ListRequest
	hook  func(method, version string)
}

func (r *requestLog) addList(list ListRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, list)
}

// add records request and runs the hook, if any, outside the lock.
func (r *requestLog) add(method, version string) {
	r.mu.Lock()
	r.list = append(r.list, method+" "+version)
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook(method, version)
	}
}

func (r *requestLog) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

// serve answers one request for DeviceTaintRules from client, as an API
// server does: JSON, the version asked for, a Status for an error.
func serve(t testing.TB, client *fake.Clientset, versions []string, requests *requestLog, w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		status, ok := err.(apierrors.APIStatus)
		if !ok {
			internal := apierrors.NewInternalError(err)
			// What an API server says to an unexpected error: its text.
			internal.ErrStatus.Message = err.Error()
			status = internal
		}
		answer := status.Status()
		answer.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(answer.Code))
		_ = json.NewEncoder(w).Encode(answer)
	}
	tail, ok := strings.CutPrefix(r.URL.Path, "/apis/resource.k8s.io/")
	parts := strings.Split(tail, "/")
	if !ok || len(parts) < 2 || len(parts) > 3 || parts[1] != "devicetaintrules" || !slices.Contains(versions, parts[0]) {
		fail(apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "devicetaintrules"}, r.URL.Path))
		return
	}
	version := parts[0]
	requests.add(r.Method, version)
	if accept := r.Header.Get("Accept"); accept != "application/json" {
		t.Errorf("%s %s: Accept %q, want application/json", r.Method, r.URL.Path, accept)
	}
	gvr := rulesapi.SchemeGroupVersion.WithResource("devicetaintrules")
	var (
		answer runtime.Object
		err    error
	)
	switch {
	case r.Method == http.MethodPost && len(parts) == 2:
		rule := &rulesapi.DeviceTaintRule{}
		if err := json.NewDecoder(r.Body).Decode(rule); err != nil {
			fail(apierrors.NewBadRequest(err.Error()))
			return
		}
		if rule.APIVersion != "resource.k8s.io/"+version || rule.Kind != "DeviceTaintRule" {
			fail(apierrors.NewBadRequest(fmt.Sprintf("apiVersion %q, kind %q posted to %s", rule.APIVersion, rule.Kind, r.URL.Path)))
			return
		}
		rule.TypeMeta = metav1.TypeMeta{}
		answer, err = client.Invokes(k8stesting.NewRootCreateAction(gvr, rule), &rulesapi.DeviceTaintRule{})
	case r.Method == http.MethodGet && len(parts) == 3:
		answer, err = client.Invokes(k8stesting.NewRootGetAction(gvr, parts[2]), &rulesapi.DeviceTaintRule{})
	case r.Method == http.MethodGet:
		query := r.URL.Query()
		selector, parseErr := labels.Parse(query.Get("labelSelector"))
		if parseErr != nil {
			fail(apierrors.NewBadRequest(parseErr.Error()))
			return
		}
		var limit int64
		if text := query.Get("limit"); text != "" {
			if _, scanErr := fmt.Sscan(text, &limit); scanErr != nil || limit < 0 {
				fail(apierrors.NewBadRequest(fmt.Sprintf("limit %q", text)))
				return
			}
		}
		from := query.Get("continue")
		answer, err = client.Invokes(k8stesting.NewRootListAction(gvr, rulesapi.SchemeGroupVersion.WithKind("DeviceTaintRule"), metav1.ListOptions{LabelSelector: selector.String()}), &rulesapi.DeviceTaintRuleList{})
		// The fake's tracker neither selects by label nor pages; an API
		// server does both: in the order of names, the continue token
		// here the last name served.
		if list, ok := answer.(*rulesapi.DeviceTaintRuleList); ok && err == nil {
			matching := &rulesapi.DeviceTaintRuleList{ListMeta: list.ListMeta}
			items := slices.Clone(list.Items)
			slices.SortFunc(items, func(a, b rulesapi.DeviceTaintRule) int { return strings.Compare(a.Name, b.Name) })
			for _, rule := range items {
				if rule.Name <= from || !selector.Matches(labels.Set(rule.Labels)) {
					continue
				}
				if limit > 0 && int64(len(matching.Items)) == limit {
					matching.Continue = matching.Items[len(matching.Items)-1].Name
					break
				}
				matching.Items = append(matching.Items, rule)
			}
			requests.addList(ListRequest{LabelSelector: query.Get("labelSelector"), Limit: limit, Continue: from, Items: len(matching.Items)})
			answer = matching
		}
	case r.Method == http.MethodDelete && len(parts) == 3:
		_, err = client.Invokes(k8stesting.NewRootDeleteAction(gvr, parts[2]), &rulesapi.DeviceTaintRule{})
		answer = &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	default:
		fail(apierrors.NewMethodNotSupported(gvr.GroupResource(), r.Method))
		return
	}
	if err != nil {
		fail(err)
		return
	}
	data, err := json.Marshal(answer)
	if err != nil {
		fail(err)
		return
	}
	// The answer names the version asked for, as an API server's does.
	data = []byte(strings.Replace(string(data), `"apiVersion":"resource.k8s.io/v1beta2"`, `"apiVersion":"resource.k8s.io/`+version+`"`, 1))
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	_, _ = w.Write(data)
}
