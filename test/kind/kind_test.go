// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kind checks the kind recipe (deploy/kind) without a container
// engine: the cluster config decodes strictly with kind's own API types,
// each kubeadm patch decodes strictly as the type it patches, the fork's gate
// reaches the kubelets and no other component, CDI is on, and the node
// images are the ones hack/kind-image.sh builds.
package kind

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeadmv1beta4 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

var gate = string(failfastdra.DRAHandlePermanentDriverFailures)

func repoFile(t *testing.T, path ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadCluster(t *testing.T) *kindv1alpha4.Cluster {
	t.Helper()
	var cluster kindv1alpha4.Cluster
	if err := yaml.UnmarshalStrict(repoFile(t, "deploy", "kind", "cluster.yaml"), &cluster); err != nil {
		t.Fatalf("deploy/kind/cluster.yaml is not a kind Cluster: %v", err)
	}
	if cluster.Kind != "Cluster" || cluster.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Fatalf("kind %q apiVersion %q", cluster.Kind, cluster.APIVersion)
	}
	return &cluster
}

// patchTarget is what every kubeadm config patch names.
type patchTarget struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// components lists, per component, whether a patch gives it the gate.
type components map[string]bool

// checkPatch decodes one kubeadm config patch strictly as the type it
// patches and records which components it gives the gate to.
func checkPatch(t *testing.T, patch string, got components) {
	t.Helper()
	var target patchTarget
	if err := yaml.Unmarshal([]byte(patch), &target); err != nil {
		t.Fatalf("patch is not YAML: %v\n%s", err, patch)
	}
	mentions := strings.Contains(patch, gate)
	switch target.Kind {
	case "KubeletConfiguration":
		var config kubeletv1beta1.KubeletConfiguration
		if err := yaml.UnmarshalStrict([]byte(patch), &config); err != nil {
			t.Fatalf("KubeletConfiguration patch: %v", err)
		}
		if target.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
			t.Errorf("KubeletConfiguration patch apiVersion %q, want %s (kind matches patches by it)", target.APIVersion, kubeletv1beta1.SchemeGroupVersion)
		}
		got["kubelet"] = got["kubelet"] || config.FeatureGates[gate]
	case "InitConfiguration", "JoinConfiguration":
		var registration *kubeadmv1beta4.NodeRegistrationOptions
		var into any
		if target.Kind == "InitConfiguration" {
			config := &kubeadmv1beta4.InitConfiguration{}
			into, registration = config, &config.NodeRegistration
		} else {
			config := &kubeadmv1beta4.JoinConfiguration{}
			into, registration = config, &config.NodeRegistration
		}
		if err := yaml.UnmarshalStrict([]byte(patch), into); err != nil {
			t.Fatalf("%s patch: %v", target.Kind, err)
		}
		for _, arg := range registration.KubeletExtraArgs {
			got["kubelet"] = got["kubelet"] || arg.Name == "feature-gates" && strings.Contains(arg.Value, gate+"=true")
		}
	case "ClusterConfiguration":
		var config kubeadmv1beta4.ClusterConfiguration
		if err := yaml.UnmarshalStrict([]byte(patch), &config); err != nil {
			t.Fatalf("ClusterConfiguration patch: %v", err)
		}
		for name, args := range map[string][]kubeadmv1beta4.Arg{
			"kube-apiserver": config.APIServer.ExtraArgs, "kube-controller-manager": config.ControllerManager.ExtraArgs,
			"kube-scheduler": config.Scheduler.ExtraArgs, "etcd": nil,
		} {
			for _, arg := range args {
				got[name] = got[name] || strings.Contains(arg.Value, gate)
			}
		}
		got["control plane (FeatureGates)"] = got["control plane (FeatureGates)"] || config.FeatureGates[gate]
	default:
		t.Fatalf("patch of unexpected kind %q (apiVersion %q)", target.Kind, target.APIVersion)
	}
	if mentions && target.Kind != "KubeletConfiguration" && target.Kind != "InitConfiguration" && target.Kind != "JoinConfiguration" {
		got[target.Kind+" text"] = true
	}
}

func TestGateReachesKubeletsOnly(t *testing.T) {
	cluster := loadCluster(t)
	got := components{}
	if cluster.FeatureGates[gate] {
		got["every component (top-level featureGates)"] = true
	}
	if len(cluster.RuntimeConfig) > 0 {
		t.Errorf("runtimeConfig %v: the recipe needs no API change", cluster.RuntimeConfig)
	}
	for _, patch := range cluster.KubeadmConfigPatches {
		checkPatch(t, patch, got)
	}
	workers, controlPlanes := 0, 0
	for i, node := range cluster.Nodes {
		for _, patch := range node.KubeadmConfigPatches {
			nodeGot := components{}
			checkPatch(t, patch, nodeGot)
			for component, on := range nodeGot {
				if component != "kubelet" && on {
					got[component] = true
				}
			}
		}
		if len(node.KubeadmConfigPatchesJSON6902) > 0 {
			t.Errorf("node %d: JSON 6902 patches are not checked here; use kubeadmConfigPatches", i)
		}
		switch node.Role {
		case kindv1alpha4.ControlPlaneRole:
			controlPlanes++
		case kindv1alpha4.WorkerRole:
			workers++
		}
	}
	if len(cluster.KubeadmConfigPatchesJSON6902) > 0 {
		t.Error("JSON 6902 patches are not checked here; use kubeadmConfigPatches")
	}
	if !got["kubelet"] {
		t.Errorf("the kubelets do not get %s=true", gate)
	}
	for component, on := range got {
		if component != "kubelet" && on {
			t.Errorf("%s gets %s: a stock control plane refuses a gate it does not know", component, gate)
		}
	}
	if controlPlanes != 1 || workers != 2 {
		t.Errorf("%d control-plane and %d worker nodes, want the 3-node cluster of docs/kind.md", controlPlanes, workers)
	}
}

func TestCDIEnabled(t *testing.T) {
	cluster := loadCluster(t)
	// kind's containerd config is in the version 2 format: the CRI plugin is io.containerd.grpc.v1.cri.
	section := regexp.MustCompile(`(?m)^\s*\[plugins\."io\.containerd\.grpc\.v1\.cri"\]\s*$`)
	enabled := regexp.MustCompile(`(?m)^\s*enable_cdi\s*=\s*true\s*$`)
	for _, patch := range cluster.ContainerdConfigPatches {
		if section.MatchString(patch) && enabled.MatchString(patch) {
			return
		}
	}
	t.Errorf("no containerd config patch sets enable_cdi = true in the CRI plugin: %q", cluster.ContainerdConfigPatches)
}

// kindSetting returns the value of NAME=VALUE in hack/kind/lib.sh, quotes removed.
func kindSetting(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindStringSubmatch(string(repoFile(t, "hack", "kind", "lib.sh")))
	if m == nil {
		t.Fatalf("hack/kind/lib.sh sets no %s", name)
	}
	return strings.Trim(m[1], `"`)
}

// The nodes run the image that hack/kind-image.sh builds:
// dra-failfast/kind-node:<KUBE_VERSION>-dra-failfast.<FORK_REVISION>, as set in hack/lib.sh.
func TestNodeImagesAreTheForks(t *testing.T) {
	lib := string(repoFile(t, "hack", "lib.sh"))
	version := regexp.MustCompile(`(?m)^KUBE_VERSION=(\S+)$`).FindStringSubmatch(lib)
	revision := regexp.MustCompile(`(?m)^FORK_REVISION=(\S+)$`).FindStringSubmatch(lib)
	if version == nil || revision == nil {
		t.Fatal("hack/lib.sh sets no KUBE_VERSION or FORK_REVISION")
	}
	want := "dra-failfast/kind-node:" + version[1] + "-dra-failfast." + revision[1]
	if got := kindSetting(t, "KIND_NODE_IMAGE"); got != "dra-failfast/kind-node:${FORK_VERSION}" {
		t.Errorf("hack/kind/lib.sh names the node image %q, want dra-failfast/kind-node:${FORK_VERSION}", got)
	}
	for i, node := range loadCluster(t).Nodes {
		if node.Image != want {
			t.Errorf("node %d image %q, want %q", i, node.Image, want)
		}
	}
	// The registry route: kind publishes kindest/node:v1.37.0 for kind v0.33.0, and no v1.37.1.
	dockerfile := string(repoFile(t, "deploy", "kind", "Dockerfile"))
	if !regexp.MustCompile(`(?m)^ARG KIND_NODE_IMAGE=kindest/node:v1\.37\.0$`).MatchString(dockerfile) {
		t.Error("deploy/kind/Dockerfile's default base is not kindest/node:v1.37.0, the v1.37 image kind v0.33.0 publishes")
	}
}

// Nothing is pulled: kubeadm's imageRepository is the name the node images preload their images
// under, and the kubelets start on cgroup v1 hosts.
func TestImagesArePreloadedNames(t *testing.T) {
	cluster := loadCluster(t)
	repository := kindSetting(t, "KIND_IMAGE_REPOSITORY")
	var imageRepository string
	failCgroupV1 := true
	for _, patch := range cluster.KubeadmConfigPatches {
		var target patchTarget
		if err := yaml.Unmarshal([]byte(patch), &target); err != nil {
			t.Fatal(err)
		}
		switch target.Kind {
		case "ClusterConfiguration":
			var config kubeadmv1beta4.ClusterConfiguration
			if err := yaml.UnmarshalStrict([]byte(patch), &config); err != nil {
				t.Fatal(err)
			}
			imageRepository = config.ImageRepository
		case "KubeletConfiguration":
			var config kubeletv1beta1.KubeletConfiguration
			if err := yaml.UnmarshalStrict([]byte(patch), &config); err != nil {
				t.Fatal(err)
			}
			if config.FailCgroupV1 != nil {
				failCgroupV1 = *config.FailCgroupV1
			}
		}
	}
	if imageRepository != repository {
		t.Errorf("kubeadm imageRepository %q, want %q (hack/kind/lib.sh KIND_IMAGE_REPOSITORY)", imageRepository, repository)
	}
	if failCgroupV1 {
		t.Error("the KubeletConfiguration patch does not set failCgroupV1: false: kubelets refuse to start on cgroup v1 hosts")
	}
	if cluster.Networking.DisableDefaultCNI {
		t.Error("disableDefaultCNI: the node image's pod network (deploy/kind/node/manifests/default-cni.yaml) would not be installed")
	}
}

// The pod network kind installs from the node image: kind fills in the pod subnet only when the
// manifest carries its template marker, and the flannel image is the one make kind-image packs.
func TestPodNetworkManifest(t *testing.T) {
	manifest := string(repoFile(t, "deploy", "kind", "node", "manifests", "default-cni.yaml"))
	for _, want := range []string{
		"would you kindly template this file",
		`"Network": "{{ .PodSubnet }}"`,
		"image: " + kindSetting(t, "KIND_IMAGE_REPOSITORY") + "/flannel:" + kindSetting(t, "FLANNEL_VERSION"),
	} {
		if !strings.Contains(manifest, want) {
			t.Errorf("deploy/kind/node/manifests/default-cni.yaml lacks %q", want)
		}
	}
	for i, doc := range strings.Split(manifest, "\n---\n") {
		var object map[string]any
		if err := yaml.Unmarshal([]byte(doc), &object); err != nil || object["kind"] == nil {
			t.Errorf("document %d of default-cni.yaml is not a Kubernetes object: %v", i, err)
		}
	}
}

// Every node mounts the policy directory where the kubelet looks for its DRA driver failure
// policy, and the shipped policy is valid: an invalid one would stop every kubelet.
func TestDriverPolicyMounted(t *testing.T) {
	wantDir := filepath.Dir(failfastdra.DefaultDriverPolicyPath)
	for i, node := range loadCluster(t).Nodes {
		mounted := false
		for _, m := range node.ExtraMounts {
			if m.ContainerPath == wantDir {
				mounted = true
				data := repoFile(t, m.HostPath, filepath.Base(failfastdra.DefaultDriverPolicyPath))
				if _, err := failfastdra.ParseDriverPolicy(data); err != nil {
					t.Errorf("node %d: %s: %v", i, m.HostPath, err)
				}
			}
		}
		if !mounted {
			t.Errorf("node %d mounts nothing at %s: its kubelet gets no driver failure policy", i, wantDir)
		}
	}
}
