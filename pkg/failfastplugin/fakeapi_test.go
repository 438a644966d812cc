// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	rulesapi "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

const faultNode = "node-1"

// newFaultAPI returns a fake API server that has the driver's Node and
// another one, node-2, and serves DeviceTaintRules in resource.k8s.io/v1.
func newFaultAPI(t *testing.T) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: faultNode, UID: "node-1-uid"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", UID: "node-2-uid"}},
	)
	serveRules(t, client, "v1")
	return client
}

// serveRules makes client serve DeviceTaintRules in the versions of
// resource.k8s.io given (none: not at all), over HTTP, as an API server
// does: the library reads and writes them with a real REST client, in JSON,
// and the fake's reactors and objects answer (the objects are stored as
// v1beta2, whose fields are those of every version). It returns the
// requests the library made, as "METHOD VERSION".
func serveRules(t *testing.T, client *fake.Clientset, versions ...string) *ruleRequests {
	t.Helper()
	client.Resources = nil
	for _, version := range versions {
		client.Resources = append(client.Resources, &metav1.APIResourceList{
			GroupVersion: "resource.k8s.io/" + version,
			APIResources: []metav1.APIResource{{Name: "devicetaintrules", Kind: "DeviceTaintRule", Verbs: metav1.Verbs{"create", "get", "list", "delete"}}},
		})
	}
	requests := &ruleRequests{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveRule(t, client, versions, requests, w, r)
	}))
	t.Cleanup(server.Close)
	restClient, err := rest.RESTClientFor(&rest.Config{
		Host:    server.URL,
		APIPath: "/apis",
		ContentConfig: rest.ContentConfig{
			GroupVersion:         &rulesapi.SchemeGroupVersion,
			NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
			// What the kubelet and many drivers ask for: the library
			// must still speak JSON.
			ContentType: "application/vnd.kubernetes.protobuf",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	failfastplugin.ServeRulesOver(client, restClient)
	return requests
}

// ruleRequests records the requests of serveRules.
type ruleRequests struct {
	mu   sync.Mutex
	list []string
}

func (r *ruleRequests) add(request string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, request)
}

func (r *ruleRequests) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

// serveRule answers one request for DeviceTaintRules from client.
func serveRule(t *testing.T, client *fake.Clientset, versions []string, requests *ruleRequests, w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		status, ok := err.(apierrors.APIStatus)
		if !ok {
			status = apierrors.NewInternalError(err)
			// What an API server says to an unexpected error: its text.
			status.(*apierrors.StatusError).ErrStatus.Message = err.Error()
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
	requests.add(r.Method + " " + version)
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
		selector, parseErr := labels.Parse(r.URL.Query().Get("labelSelector"))
		if parseErr != nil {
			fail(apierrors.NewBadRequest(parseErr.Error()))
			return
		}
		answer, err = client.Invokes(k8stesting.NewRootListAction(gvr, rulesapi.SchemeGroupVersion.WithKind("DeviceTaintRule"), metav1.ListOptions{LabelSelector: selector.String()}), &rulesapi.DeviceTaintRuleList{})
		if list, ok := answer.(*rulesapi.DeviceTaintRuleList); ok && err == nil {
			matching := &rulesapi.DeviceTaintRuleList{ListMeta: list.ListMeta}
			for _, rule := range list.Items {
				if selector.Matches(labels.Set(rule.Labels)) {
					matching.Items = append(matching.Items, rule)
				}
			}
			answer = matching
		}
	case r.Method == http.MethodDelete && len(parts) == 3:
		_, err = client.Invokes(k8stesting.NewRootDeleteAction(gvr, parts[2]), &rulesapi.DeviceTaintRule{})
		answer = &metav1.Status{Status: metav1.StatusSuccess}
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

// taintsInAPI returns the taints of the DeviceTaintRules in the API, by the
// device they select.
func taintsInAPI(t *testing.T, client *fake.Clientset) map[failfastplugin.DeviceID][]rulesapi.DeviceTaint {
	t.Helper()
	rules := rulesInAPI(t, client)
	taints := map[failfastplugin.DeviceID][]rulesapi.DeviceTaint{}
	for device, list := range rules {
		for _, rule := range list {
			taints[device] = append(taints[device], rule.Spec.Taint)
		}
	}
	return taints
}

// rulesInAPI returns the DeviceTaintRules in the API, by the device they
// select.
func rulesInAPI(t *testing.T, client *fake.Clientset) map[failfastplugin.DeviceID][]rulesapi.DeviceTaintRule {
	t.Helper()
	list, err := client.ResourceV1beta2().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[failfastplugin.DeviceID][]rulesapi.DeviceTaintRule{}
	for _, rule := range list.Items {
		selector := rule.Spec.DeviceSelector
		if selector == nil || selector.Pool == nil || selector.Device == nil {
			t.Fatalf("rule %s selects no single device: %+v", rule.Name, selector)
		}
		device := failfastplugin.DeviceID{Pool: *selector.Pool, Device: *selector.Device}
		rules[device] = append(rules[device], rule)
	}
	return rules
}

// sortedDevices returns the keys of m, sorted.
func sortedDevices[V any](m map[failfastplugin.DeviceID]V) []failfastplugin.DeviceID {
	devices := slices.Collect(maps.Keys(m))
	slices.SortFunc(devices, func(a, b failfastplugin.DeviceID) int { return strings.Compare(a.String(), b.String()) })
	return devices
}

// pools returns resources with one slice per pool holding devices dev-0 ...
// dev-<n-1>.
func pools(devicesPerPool map[string]int) resourceslice.DriverResources {
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	for name, n := range devicesPerPool {
		var devices []resourceapi.Device
		for i := range n {
			devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("dev-%d", i)})
		}
		resources.Pools[name] = resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: devices}}}
	}
	return resources
}

// taintFailures returns the counter of taint failures of driverName by
// reason.
func taintFailures(t *testing.T, driverName string) map[string]float64 {
	t.Helper()
	values, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, failfastplugin.DeviceTaintFailuresMetric,
		map[string]string{"driver_name": driverName}, "reason")
	if err != nil {
		// Nothing counted yet.
		return map[string]float64{}
	}
	return values
}

func ptrTo[T any](v T) *T { return &v }
