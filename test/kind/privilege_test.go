// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"os"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// nodeNameExtra is the user extra that a service account token bound to a pod carries: the
// pod's node. The drivers' ValidatingAdmissionPolicy (deploy/*/rbac.yaml) compares it with the
// node of every slice the plugin writes.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// TestSliceWritesBoundToNode: the kubelet plugins' service accounts, as deployed from deploy/,
// may write the ResourceSlices of their own node and driver only. Each write is a server-side dry
// run made as the plugin's service account on the first worker (impersonated, with the node-name
// extra its pod's token carries): one for its own node (admitted), one for the other worker's
// node, one not node-local and one of another driver (all denied by the policy); a token with no
// node is denied too. RBAC (a SubjectAccessReview, as `kubectl auth can-i`) refuses what the
// plugins never call: patch, deletecollection, listing claims, writing DeviceTaintRules.
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
				{"create", "devicetaintrules", false},
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
