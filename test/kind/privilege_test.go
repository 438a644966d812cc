// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/kindnode"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// nodeNameExtra is the user extra that a service account token bound to a pod carries: the
// pod's node. The drivers' ValidatingAdmissionPolicies (deploy/helm/gpu-driver/templates/rbac.yaml,
// deploy/test-driver/rbac.yaml) compare it with the node of every slice and of every
// DeviceTaintRule the plugin writes.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// TestSliceWritesBoundToNode: the kubelet plugins' service accounts, as deployed from deploy/,
// may write the ResourceSlices and the DeviceTaintRules of their own node and driver only. Each
// write is made as the plugin's service account on the first worker (impersonated, with the
// node-name extra its pod's token carries). Slices, server-side dry runs: one for its own node
// (admitted), one for the other worker's node, one not node-local and one of another driver (all
// denied by the slice policy); a token with no node is denied too; the other worker's own
// published slice can be neither updated nor deleted (dry runs). DeviceTaintRules as the library
// writes them (DeviceFault), for a device no driver publishes: dry runs of one for a device in the
// other worker's pool, one whose node annotation names the other worker, one for a whole pool and
// one from a token with no node, one under the name the other worker's rule for that device would
// have and one whose name names no node are denied by the rule policy; one for a device in its own pool is
// created for real and deleted again as the plugin (and by the admin when the test ends, in any
// case); the other worker's rule, written by the admin, cannot be deleted. RBAC refuses what the
// plugins never call: patch, deletecollection, listing claims, watching, updating and patching
// DeviceTaintRules (a SubjectAccessReview, as `kubectl auth can-i`; updating and patching its own
// node's rule are tried too).
func TestSliceWritesBoundToNode(t *testing.T) {
	client, workers := connect(t)
	own, other := workers[0].name, workers[1].name
	for _, driver := range []struct{ namespace, serviceAccount, name string }{
		{"gpu-driver", "gpu-driver", "gpu.example.com"},
		{"dra-test-driver", "dra-test-driver", "driver.dra-failfast.test"},
	} {
		user := "system:serviceaccount:" + driver.namespace + ":" + driver.serviceAccount
		t.Run(driver.namespace, func(t *testing.T) {
			asPlugin := impersonate(t, user, own)
			slice := func(name, driverName string, node *string) *resourceapi.ResourceSlice {
				s := &resourceapi.ResourceSlice{
					ObjectMeta: metav1.ObjectMeta{Name: "privilege-test-" + name},
					Spec: resourceapi.ResourceSliceSpec{
						Driver:   driverName,
						Pool:     resourceapi.ResourcePool{Name: "privilege-test", ResourceSliceCount: 1},
						NodeName: node,
						Devices:  []resourceapi.Device{{Name: "dev-0"}},
					},
				}
				if node == nil {
					s.Spec.AllNodes = ptr.To(true)
				} else {
					// The drivers name their pool after their node.
					s.Spec.Pool.Name = *node
				}
				return s
			}
			dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
			for name, tc := range map[string]struct {
				client  kubernetes.Interface
				slice   *resourceapi.ResourceSlice
				allowed bool
				// wantText: a part of the denial's message.
				wantText string
			}{
				"own node":       {client: asPlugin, slice: slice("own", driver.name, &own), allowed: true},
				"other node":     {client: asPlugin, slice: slice("other", driver.name, &other), wantText: "ResourceSlices of node '" + other + "'"},
				"not node-local": {client: asPlugin, slice: slice("all", driver.name, nil), wantText: "not node-local"},
				"other driver":   {client: asPlugin, slice: slice("driver", "other.example.com", &own), wantText: "driver 'other.example.com'"},
				"other node's pool": {
					client: asPlugin, slice: func() *resourceapi.ResourceSlice {
						s := slice("pool", driver.name, &own)
						s.Spec.Pool.Name = other
						return s
					}(),
					wantText: "may not write a ResourceSlice of pool '" + other + "'",
				},
				"token without node": {
					client: impersonate(t, user, ""), slice: slice("nonode", driver.name, &own),
					wantText: "from a pod bound to a node",
				},
			} {
				_, err := tc.client.ResourceV1().ResourceSlices().Create(t.Context(), tc.slice, dryRun)
				switch {
				case tc.allowed && err != nil:
					t.Errorf("%s: create was denied: %v", name, err)
				case !tc.allowed && err == nil:
					t.Errorf("%s: create was admitted, want it denied by the policy", name)
				case !tc.allowed && (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantText)):
					t.Errorf("%s: got %v, want a denial naming %q", name, err, tc.wantText)
				}
			}

			// The other worker's own slices, as its plugin published them: updating or deleting
			// one (dry runs) is denied by the slice policy.
			published, err := client.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{
				FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + other + "," + resourceapi.ResourceSliceSelectorDriver + "=" + driver.name,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(published.Items) == 0 {
				t.Fatalf("%s published no ResourceSlice on %s", driver.name, other)
			}
			otherSlice := published.Items[0].DeepCopy()
			otherSlice.Spec.Devices = otherSlice.Spec.Devices[:0] // as if its devices were gone
			_, err = asPlugin.ResourceV1().ResourceSlices().Update(t.Context(), otherSlice, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), "ResourceSlices of node '"+other+"'") {
				t.Errorf("update of %s's slice %s as %s's plugin: %v, want a denial by the policy", other, otherSlice.Name, own, err)
			}
			err = asPlugin.ResourceV1().ResourceSlices().Delete(t.Context(), otherSlice.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), "ResourceSlices of node '"+other+"'") {
				t.Errorf("delete of %s's slice %s as %s's plugin: %v, want a denial by the policy", other, otherSlice.Name, own, err)
			}

			// DeviceTaintRules as the library writes them: its label, the writer's node in its
			// annotation, one device (none: the whole pool). The device is one that no driver
			// publishes: a rule that gets stored taints nothing.
			ctx := t.Context()
			// Named as the library names them: a label, a dot and the writer's node.
			taintRule := func(name, pool, node string, device *string) *resourceapi.DeviceTaintRule {
				return &resourceapi.DeviceTaintRule{
					ObjectMeta: metav1.ObjectMeta{
						Name: "privilege-test-" + driver.namespace + "-" + name + "." + node,
						Labels: map[string]string{
							failfastplugin.DeviceTaintRuleDriverLabel: driver.name,
							failfastplugin.DeviceTaintRuleNodeLabel:   failfastplugin.DeviceTaintRuleNodeLabelValue(node),
						},
						Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: node},
					},
					Spec: resourceapi.DeviceTaintRuleSpec{
						DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver.name), Pool: ptr.To(pool), Device: device},
						Taint: resourceapi.DeviceTaint{
							Key:    failfastplugin.DefaultDeviceFaultTaintKey,
							Value:  "privilege-test",
							Effect: resourceapi.DeviceTaintEffectNoSchedule,
						},
					},
				}
			}
			device := ptr.To("privilege-test-dev")
			for name, tc := range map[string]struct {
				client kubernetes.Interface
				rule   *resourceapi.DeviceTaintRule
				// wantText: a part of the denial's message.
				wantText string
			}{
				"rule for the other node's pool": {client: asPlugin, rule: taintRule("pool", other, own, device), wantText: "DeviceTaintRule for pool '" + other + "'"},
				"rule of the other node":         {client: asPlugin, rule: taintRule("node", own, other, device), wantText: "DeviceTaintRules of node '" + other + "'"},
				"rule for a whole pool":          {client: asPlugin, rule: taintRule("all", own, own, nil), wantText: "selects no device"},
				"rule under the other node's name": {
					client: asPlugin, rule: func() *resourceapi.DeviceTaintRule {
						rule := taintRule("squat", own, own, device)
						rule.Name = failfastplugin.DeviceTaintRuleName(driver.name, other, failfastplugin.DeviceID{Pool: other, Device: *device})
						return rule
					}(),
					wantText: "may not create the DeviceTaintRule '" + failfastplugin.DeviceTaintRuleName(driver.name, other, failfastplugin.DeviceID{Pool: other, Device: *device}) + "'",
				},
				"rule under a name without node": {
					client: asPlugin, rule: func() *resourceapi.DeviceTaintRule {
						rule := taintRule("nameless", own, own, device)
						rule.Name = strings.TrimSuffix(rule.Name, "."+own)
						return rule
					}(),
					wantText: "the names of its rules are one DNS label, a dot and its node",
				},
				"rule for another driver's device": {
					client: asPlugin, rule: func() *resourceapi.DeviceTaintRule {
						rule := taintRule("driver", own, own, device)
						rule.Spec.DeviceSelector.Driver = ptr.To("other.example.com")
						return rule
					}(),
					wantText: "for the devices of driver 'other.example.com'",
				},
				"rule with another annotation": {
					client: asPlugin, rule: func() *resourceapi.DeviceTaintRule {
						rule := taintRule("annotation", own, own, device)
						rule.Annotations["privilege-test"] = strings.Repeat("x", 1024)
						return rule
					}(),
					wantText: "with annotations other than dra-failfast.io/node",
				},
				"rule with the other node's label": {
					client: asPlugin, rule: func() *resourceapi.DeviceTaintRule {
						rule := taintRule("label", own, own, device)
						rule.Labels[failfastplugin.DeviceTaintRuleNodeLabel] = other
						return rule
					}(),
					wantText: "with labels other than dra-failfast.io/driver and dra-failfast.io/node=" + own,
				},
				"rule from a token without node": {
					client: impersonate(t, user, ""), rule: taintRule("nonode", own, own, device),
					wantText: "from a pod bound to a node",
				},
			} {
				_, err := tc.client.ResourceV1().DeviceTaintRules().Create(ctx, tc.rule, dryRun)
				switch {
				case err == nil:
					t.Errorf("%s: create was admitted, want it denied by the policy", name)
				case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantText):
					t.Errorf("%s: got %v, want a denial naming %q", name, err, tc.wantText)
				}
			}
			// The rule for a device of its own pool, for real: admitted, then neither updated nor
			// patched (RBAC), then deleted, all as the plugin.
			ownRule := taintRule("own", own, own, device)
			t.Cleanup(func() {
				_ = client.ResourceV1().DeviceTaintRules().Delete(context.WithoutCancel(ctx), ownRule.Name, metav1.DeleteOptions{})
			})
			if created, err := asPlugin.ResourceV1().DeviceTaintRules().Create(ctx, ownRule, metav1.CreateOptions{}); err != nil {
				t.Errorf("rule of its own node: create was denied: %v", err)
			} else {
				for verb, write := range map[string]func() error{
					"update": func() error {
						changed := created.DeepCopy()
						changed.Labels["privilege-test"] = "updated"
						_, err := asPlugin.ResourceV1().DeviceTaintRules().Update(ctx, changed, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
						return err
					},
					"patch": func() error {
						_, err := asPlugin.ResourceV1().DeviceTaintRules().Patch(ctx, created.Name, types.MergePatchType,
							[]byte(`{"metadata":{"labels":{"privilege-test":"patched"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
						return err
					},
				} {
					if err := write(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot `+verb+` resource "devicetaintrules"`) {
						t.Errorf("rule of its own node: %s got %v, want it refused by RBAC", verb, err)
					}
				}
				if err := asPlugin.ResourceV1().DeviceTaintRules().Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
					t.Errorf("rule of its own node: delete was denied: %v", err)
				}
			}
			// The other worker's rule, as its plugin writes it (here the admin): the policy checks
			// a delete against the stored rule.
			otherRule := taintRule("other", other, other, device)
			t.Cleanup(func() {
				_ = client.ResourceV1().DeviceTaintRules().Delete(context.WithoutCancel(ctx), otherRule.Name, metav1.DeleteOptions{})
			})
			if _, err := client.ResourceV1().DeviceTaintRules().Create(ctx, otherRule, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			err = asPlugin.ResourceV1().DeviceTaintRules().Delete(ctx, otherRule.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			if wantText := "may not delete the DeviceTaintRules of node '" + other + "'"; !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), wantText) {
				t.Errorf("rule of the other node: delete got %v, want a denial naming %q", err, wantText)
			}

			for _, tc := range []struct {
				verb, resource string
				allowed        bool
			}{
				{"create", "resourceslices", true},
				{"update", "resourceslices", true},
				{"delete", "resourceslices", true},
				{"get", "resourceclaims", true},
				{"patch", "resourceslices", false},
				{"deletecollection", "resourceslices", false},
				{"list", "resourceclaims", false},
				{"list", "devicetaintrules", true},
				{"get", "devicetaintrules", true},
				{"create", "devicetaintrules", true},
				{"delete", "devicetaintrules", true},
				{"watch", "devicetaintrules", false},
				{"update", "devicetaintrules", false},
				{"patch", "devicetaintrules", false},
				{"deletecollection", "devicetaintrules", false},
			} {
				review, err := client.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
					Spec: authorizationv1.SubjectAccessReviewSpec{
						User:   user,
						Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + driver.namespace, "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{
							Group: resourceapi.GroupName, Resource: tc.resource, Verb: tc.verb,
						},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if review.Status.Allowed != tc.allowed {
					t.Errorf("can %s %s %s: %v, want %v (%s)", user, tc.verb, tc.resource, review.Status.Allowed, tc.allowed, review.Status.Reason)
				}
			}
		})
	}
}

// impersonate returns a client that acts as the service account user, with the node-name extra
// of a token bound to a pod on node (none when node is empty).
func impersonate(t *testing.T, user, node string) kubernetes.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	config.Impersonate.UserName = user
	config.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + strings.Split(user, ":")[2], "system:authenticated"}
	if node != "" {
		config.Impersonate.Extra = map[string][]string{nodeNameExtra: {node}}
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// TestControlEndpointOnLoopbackOnly: the test driver's unauthenticated control endpoint
// (deploy/test-driver) listens on each node's loopback, not on the node's address: nothing that
// reaches the node over the network, pods included, can connect to it, while the tests reach it
// through the node (internal/kindnode).
func TestControlEndpointOnLoopbackOnly(t *testing.T) {
	_, workers := connect(t)
	_, port, err := net.SplitHostPort(kindnode.ControlAddress)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range workers {
		if err := w.driver.Healthz(t.Context()); err != nil {
			t.Errorf("%s: the control endpoint through the node: %v", w, err)
		}
		conn, err := (&net.Dialer{Timeout: 3 * time.Second}).DialContext(t.Context(), "tcp", net.JoinHostPort(w.address, port))
		if err == nil {
			_ = conn.Close()
			t.Errorf("%s: the test driver's control endpoint accepts connections on the node's address %s", w, w.address)
		}
	}
}

// pluginTokenClient returns a client that authenticates with a real token of the service account
// serviceAccount in namespace, bound to that driver's kubelet plugin pod (labels) on node, as the
// kubelet gives the pod: whoever takes over that node's plugin holds such a token. The API server
// must see the service account with node's name in its extra (a SelfSubjectReview, as `kubectl
// auth whoami`), or the test fails.
func pluginTokenClient(ctx context.Context, t *testing.T, admin kubernetes.Interface, namespace, serviceAccount, labels, node string) kubernetes.Interface {
	t.Helper()
	pods, err := admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: labels, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the %s plugin pod on %s: %v (%d pods)", namespace, node, err, len(pods.Items))
	}
	pod := pods.Items[0]
	token, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To(int64(600)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token bound to %s/%s: %v", namespace, pod.Name, err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	config = rest.AnonymousClientConfig(config)
	config.BearerToken = token.Status.Token
	// An attacker is not bound by client-side rate limits.
	config.QPS, config.Burst = 100, 200
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo
	if want := "system:serviceaccount:" + namespace + ":" + serviceAccount; user.Username != want || !slices.Equal(user.Extra[nodeNameExtra], authenticationv1.ExtraValue{node}) {
		t.Fatalf("the token of %s/%s authenticates as %q with %s %v, want %q on %s", namespace, pod.Name, user.Username, nodeNameExtra, user.Extra[nodeNameExtra], want, node)
	}
	return client
}

// attackTaintRules: the example driver's plugin on node attacker, with its pod's real token, tries
// to keep victim's gpu-0 from being tainted or to taint victim's devices: the rule under the name
// victim's fault on gpu-0 needs (for a device of its own, and for victim's gpu-0 with victim's
// annotation), a rule for a device victim's slices never published, and a rule for victim's whole
// pool. Every one must be denied; what is admitted is deleted again. The rules are real creates,
// not dry runs: a squatted name would make victim's next fault fail with AlreadyExists.
func attackTaintRules(ctx context.Context, t *testing.T, admin, attackerClient kubernetes.Interface, attacker, victim string) {
	t.Helper()
	victimRule := failfastplugin.DeviceTaintRuleName(gpuDriver, victim, failfastplugin.DeviceID{Pool: victim, Device: "gpu-0"})
	rule := func(name, node, pool string, device *string) *resourceapi.DeviceTaintRule {
		return &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					failfastplugin.DeviceTaintRuleDriverLabel: gpuDriver,
					failfastplugin.DeviceTaintRuleNodeLabel:   failfastplugin.DeviceTaintRuleNodeLabelValue(node),
				},
				Annotations: map[string]string{failfastplugin.DeviceTaintRuleNodeAnnotation: node},
			},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuDriver), Pool: ptr.To(pool), Device: device},
				Taint:          resourceapi.DeviceTaint{Key: "attack", Value: "privilege-test", Effect: resourceapi.DeviceTaintEffectNoExecute},
			},
		}
	}
	for name, tc := range map[string]struct {
		rule     *resourceapi.DeviceTaintRule
		wantText string
	}{
		"squat the victim's rule name with a rule for its own gpu-0": {
			rule:     rule(victimRule, attacker, attacker, ptr.To("gpu-0")),
			wantText: "may not create the DeviceTaintRule '" + victimRule + "'",
		},
		"forge the victim's rule for its gpu-0": {
			rule:     rule(victimRule, victim, victim, ptr.To("gpu-0")),
			wantText: "may not create the DeviceTaintRules of node '" + victim + "'",
		},
		"taint a device the victim never published": {
			rule:     rule("gpu-99-privilege-test."+attacker, attacker, victim, ptr.To("gpu-99")),
			wantText: "DeviceTaintRule for pool '" + victim + "'",
		},
		"taint the victim's whole pool": {
			rule:     rule("pool-privilege-test."+attacker, attacker, victim, nil),
			wantText: "DeviceTaintRule for pool '" + victim + "'",
		},
	} {
		created, err := attackerClient.ResourceV1().DeviceTaintRules().Create(ctx, tc.rule, metav1.CreateOptions{})
		switch {
		case err == nil:
			t.Errorf("attack from %s, %s: rule %s created, want it denied", attacker, name, created.Name)
			if err := admin.ResourceV1().DeviceTaintRules().Delete(context.WithoutCancel(ctx), created.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting the attacker's rule %s: %v", created.Name, err)
			}
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantText):
			t.Errorf("attack from %s, %s: got %v, want a denial naming %q", attacker, name, err, tc.wantText)
		default:
			t.Logf("attack from %s, %s: denied", attacker, name)
		}
	}
}

// deleteVictimRules: the attacker's plugin tries to delete every DeviceTaintRule victim's plugin
// wrote; every delete must be denied.
func deleteVictimRules(ctx context.Context, t *testing.T, admin, attackerClient kubernetes.Interface, attacker, victim string) {
	t.Helper()
	rules, err := admin.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: failfastplugin.DeviceTaintRuleDriverLabel + "=" + gpuDriver})
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, rule := range rules.Items {
		if rule.Annotations[failfastplugin.DeviceTaintRuleNodeAnnotation] != victim {
			continue
		}
		tried++
		err := attackerClient.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{})
		if wantText := "may not delete the DeviceTaintRules of node '" + victim + "'"; err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), wantText) {
			t.Errorf("attack from %s: deleting %s's rule %s: %v, want a denial naming %q", attacker, victim, rule.Name, err, wantText)
		}
	}
	if tried == 0 {
		t.Errorf("%s has no DeviceTaintRule for the attack from %s to try to delete", victim, attacker)
	}
}
