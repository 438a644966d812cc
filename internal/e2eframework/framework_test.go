// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package e2eframework

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
)

// TestClaimTemplateJSON: BehaviorSpec.Parameters encode as the driver's
// documented PrepareBehavior, the driver accepts them, and other bytes are
// sent as they are.
func TestClaimTemplateJSON(t *testing.T) {
	for name, tc := range map[string]struct {
		parameters []byte
		want       string
	}{
		"permanent": {
			parameters: testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, Message: "never works"}.Parameters(),
			want:       `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","message":"never works"}`,
		},
		"transient": {
			parameters: testdriver.BehaviorSpec{Prepare: testdriver.PrepareTransient, Failures: ptr.To[int64](1), Message: "device busy"}.Parameters(),
			want:       `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Transient","failures":1,"message":"device busy"}`,
		},
		"new fields": {
			parameters: testdriver.BehaviorSpec{Prepare: testdriver.PreparePermanent, MessageRepeat: 2, UnprepareFailures: ptr.To[int64](0),
				Wire: &testdriver.WireSpec{ErrorTypeAbsent: true}}.Parameters(),
			want: `{"apiVersion":"dra-failfast.test/v1","kind":"PrepareBehavior","prepare":"Permanent","messageRepeat":2,"unprepareFailures":0,"wire":{"errorTypeAbsent":true}}`,
		},
		"raw": {
			parameters: []byte(`{"prepare":"Sometimes"}`),
			want:       `{"prepare":"Sometimes"}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := ClaimTemplate("ns", "claim", tc.parameters)
			config := tmpl.Spec.Spec.Devices.Config
			if len(config) != 1 || config[0].Opaque == nil || config[0].Opaque.Driver != testdriver.DefaultDriverName {
				t.Fatalf("config = %+v", config)
			}
			if got := string(config[0].Opaque.Parameters.Raw); got != tc.want {
				t.Errorf("parameters = %s\nwant         %s", got, tc.want)
			}
			if name != "raw" {
				if _, err := testdriver.ParsePrepareBehavior(config[0].Opaque.Parameters.Raw); err != nil {
					t.Errorf("the driver rejects the parameters: %v", err)
				}
			}
			if class := tmpl.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName; class != DeviceClassName {
				t.Errorf("device class = %s", class)
			}
		})
	}
	tmpl := ClaimTemplateFor("ns", "claim", "other-class", "other.example.com", nil)
	if len(tmpl.Spec.Spec.Devices.Config) != 0 || tmpl.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName != "other-class" {
		t.Errorf("ClaimTemplateFor without parameters = %+v", tmpl)
	}
	tmpl = ClaimTemplateFor("ns", "claim", "other-class", "other.example.com", testdriver.BehaviorSpec{}.Parameters())
	if tmpl.Spec.Spec.Devices.Config[0].Opaque.Driver != "other.example.com" {
		t.Errorf("ClaimTemplateFor = %+v", tmpl)
	}
}

func TestEnsureDeviceClassFor(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	for range 2 { // idempotent
		name, err := EnsureDeviceClassFor(ctx, client, "second.dra-failfast.test")
		if err != nil || name != "second.dra-failfast.test" {
			t.Fatalf("EnsureDeviceClassFor = %q, %v", name, err)
		}
	}
	class, err := client.ResourceV1().DeviceClasses().Get(ctx, "second.dra-failfast.test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := class.Spec.Selectors[0].CEL.Expression; got != `device.driver == "second.dra-failfast.test"` {
		t.Errorf("CEL = %s", got)
	}
	name, err := EnsureDeviceClassFor(ctx, client, testdriver.DefaultDriverName)
	if err != nil || name != DeviceClassName {
		t.Fatalf("default driver: %q, %v", name, err)
	}
	if _, err := client.ResourceV1().DeviceClasses().Get(ctx, DeviceClassName, metav1.GetOptions{}); err != nil {
		t.Errorf("default class: %v", err)
	}
	if got := (&Driver{opts: DriverOptions{DriverName: testdriver.DefaultDriverName}}).DeviceClass(); got != DeviceClassName {
		t.Errorf("DeviceClass of the default driver = %s", got)
	}
}

func TestPoolComplete(t *testing.T) {
	const (
		driver = "driver.dra-failfast.test"
		node   = "node-1"
	)
	slice := func(uid string, generation, count int64, devices int) resourceapi.ResourceSlice {
		return resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "slice-" + uid, UID: types.UID(uid)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				NodeName: ptr.To(node),
				Pool:     resourceapi.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: count},
				Devices:  make([]resourceapi.Device, devices),
			},
		}
	}
	other := slice("other", 1, 1, 5)
	other.Spec.Driver = "other.example.com"
	for name, tc := range map[string]struct {
		slices []resourceapi.ResourceSlice
		old    []string
		want   bool
	}{
		"none":                  {},
		"one slice":             {slices: []resourceapi.ResourceSlice{slice("a", 1, 1, 8)}, want: true},
		"too few devices":       {slices: []resourceapi.ResourceSlice{slice("a", 1, 1, 7)}},
		"two slices":            {slices: []resourceapi.ResourceSlice{slice("a", 1, 2, 64), slice("b", 1, 2, 36)}, want: true},
		"one of two slices":     {slices: []resourceapi.ResourceSlice{slice("a", 1, 2, 64)}},
		"older generation":      {slices: []resourceapi.ResourceSlice{slice("a", 2, 2, 64), slice("b", 2, 2, 36), slice("c", 1, 2, 36)}, want: true},
		"still old":             {slices: []resourceapi.ResourceSlice{slice("a", 1, 2, 64), slice("b", 1, 2, 36)}, old: []string{"b"}},
		"new ones":              {slices: []resourceapi.ResourceSlice{slice("c", 1, 2, 64), slice("d", 1, 2, 36)}, old: []string{"a", "b"}, want: true},
		"other drivers ignored": {slices: []resourceapi.ResourceSlice{other, slice("a", 1, 1, 100)}, old: []string{"other"}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			want := 100
			if name == "one slice" || name == "too few devices" {
				want = 8
			}
			old := sets.New[types.UID]()
			for _, uid := range tc.old {
				old.Insert(types.UID(uid))
			}
			got, why := poolComplete(tc.slices, driver, node, want, old)
			if got != tc.want {
				t.Errorf("poolComplete = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

func TestMetricValue(t *testing.T) {
	const text = `# HELP dra_operations_total [ALPHA] Number of DRA operations.
# TYPE dra_operations_total counter
dra_operations_total{driver_name="driver.dra-failfast.test",is_error="true",operation_name="PrepareResources"} 3
dra_operations_total{driver_name="driver.dra-failfast.test",is_error="false",operation_name="PrepareResources"} 2
dra_operations_total{driver_name="other",is_error="true",operation_name="PrepareResources"} 10
dra_operations_total_extra 99
weird{msg="a \"quoted\", \\ comma\nnewline",x="}"} 1.5e3 1700000000000
inf_metric +Inf
plain 42
`
	for name, tc := range map[string]struct {
		metric  string
		labels  map[string]string
		want    float64
		wantErr error
	}{
		"all samples summed":    {metric: "dra_operations_total", want: 15},
		"label subset":          {metric: "dra_operations_total", labels: map[string]string{"driver_name": "driver.dra-failfast.test"}, want: 5},
		"exact labels":          {metric: "dra_operations_total", labels: map[string]string{"driver_name": "driver.dra-failfast.test", "is_error": "true"}, want: 3},
		"no prefix match":       {metric: "dra_operations", wantErr: ErrMetricNotFound},
		"label value not found": {metric: "dra_operations_total", labels: map[string]string{"driver_name": "nope"}, wantErr: ErrMetricNotFound},
		"escapes and timestamp": {metric: "weird", labels: map[string]string{"msg": "a \"quoted\", \\ comma\nnewline", "x": "}"}, want: 1500},
		"no labels":             {metric: "plain", want: 42},
		"infinity":              {metric: "inf_metric", want: math.Inf(1)},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MetricValue([]byte(text), tc.metric, tc.labels)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Errorf("MetricValue = %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := MetricValue([]byte(`broken{a="b 1`), "broken", nil); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("malformed line: %v", err)
	}
}

func TestMetricShapes(t *testing.T) {
	const text = `# HELP dra_operations_duration_seconds [ALPHA] Latency of DRA operations.
# TYPE dra_operations_duration_seconds histogram
dra_operations_duration_seconds_bucket{is_error="false",operation_name="PrepareResources",le="0.1"} 2
dra_operations_duration_seconds_bucket{is_error="false",operation_name="PrepareResources",le="+Inf"} 2
dra_operations_duration_seconds_sum{is_error="false",operation_name="PrepareResources"} 0.02
dra_operations_duration_seconds_count{is_error="false",operation_name="PrepareResources"} 2
# TYPE dra_driver_policy_reload_failures_total counter
dra_driver_policy_reload_failures_total 0
# TYPE dra_permanent_failures_total counter
dra_mixed{a="1"} 1
dra_mixed{b="1",a="2"} 1
dra_mixed{a="3"} 1
rest_client_requests_total{code="200"} 9
`
	got, err := MetricShapes([]byte(text), "dra_")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"dra_operations_duration_seconds":         {"is_error,operation_name"},
		"dra_driver_policy_reload_failures_total": {""},
		"dra_mixed": {"a", "a,b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MetricShapes = %v, want %v", got, want)
	}
	if _, err := MetricShapes([]byte(`broken{a="b 1`), ""); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("malformed line: %v", err)
	}
}
