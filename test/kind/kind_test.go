// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kind checks the kind recipe (deploy/kind) without a container
// engine: the cluster configs (cluster.yaml, all fork, mixed-cluster.yaml,
// a fleet mid-rollout, and make test-real-driver's) decode strictly with kind's own API types, each kubeadm
// patch decodes strictly as the type it patches, the fork's gate reaches the
// fork's kubelets and no other component (a stock kubelet refuses it), CDI is
// on, and the node images are the ones hack/kind-image.sh builds.
package kind

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeadmv1beta4 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"
	kinddefaults "sigs.k8s.io/kind/pkg/apis/config/defaults"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/dra-failfast/dra-failfast/api/decision"
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

// clusterConfigs are the kind cluster configs, by subtest name: deploy/kind's, every node on the
// fork and a fleet mid-rollout with a stock worker, and make test-real-driver's (one worker each:
// the gates and API dra-example-driver's suite needs, the label dra-driver-google-tpu's needs).
var clusterConfigs = map[string]string{
	"cluster.yaml":                    "deploy/kind/cluster.yaml",
	"mixed-cluster.yaml":              "deploy/kind/mixed-cluster.yaml",
	"realdriver-example-cluster.yaml": "test/realdriver/example/cluster.yaml",
	"realdriver-tpu-cluster.yaml":     "test/realdriver/tpu/cluster.yaml",
}

// realDriverCluster says whether the running subtest checks one of test/realdriver's clusters.
func realDriverCluster(t *testing.T) bool { return strings.Contains(t.Name(), "/realdriver-") }

// forEachCluster runs check on each of clusterConfigs, decoded strictly, as a subtest.
func forEachCluster(t *testing.T, check func(t *testing.T, cluster *kindv1alpha4.Cluster)) {
	for _, name := range slices.Sorted(maps.Keys(clusterConfigs)) {
		path := clusterConfigs[name]
		t.Run(name, func(t *testing.T) {
			var cluster kindv1alpha4.Cluster
			if err := yaml.UnmarshalStrict(repoFile(t, strings.Split(path, "/")...), &cluster); err != nil {
				t.Fatalf("%s is not a kind Cluster: %v", path, err)
			}
			if cluster.Kind != "Cluster" || cluster.APIVersion != "kind.x-k8s.io/v1alpha4" {
				t.Fatalf("kind %q apiVersion %q", cluster.Kind, cluster.APIVersion)
			}
			check(t, &cluster)
		})
	}
}

// nodeImages returns the fork's and the stock node image names that hack/kind-image.sh builds:
// dra-failfast/kind-node:<KUBE_VERSION>-dra-failfast.<FORK_REVISION> and <KUBE_VERSION>-stock, for
// the default KUBE_VERSION (the one deploy/kind's configs name).
func nodeImages(t *testing.T) (fork, stock string) {
	t.Helper()
	lib := string(repoFile(t, "hack", "lib.sh"))
	version := regexp.MustCompile(`(?m)^DEFAULT_KUBE_VERSION=(\S+)$`).FindStringSubmatch(lib)
	revision := regexp.MustCompile(`(?m)^FORK_REVISION=(\S+)$`).FindStringSubmatch(lib)
	if version == nil || revision == nil {
		t.Fatal("hack/lib.sh sets no DEFAULT_KUBE_VERSION or FORK_REVISION")
	}
	return "dra-failfast/kind-node:" + version[1] + "-dra-failfast." + revision[1], "dra-failfast/kind-node:" + version[1] + "-stock"
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

// The gate reaches every kubelet of a fork node and nothing else: not the control plane (a stock
// control plane refuses a gate it does not know), not a stock node's kubelet (it refuses it too).
func TestGateReachesKubeletsOnly(t *testing.T) {
	fork, stock := nodeImages(t)
	forEachCluster(t, func(t *testing.T, cluster *kindv1alpha4.Cluster) {
		if cluster.FeatureGates[gate] {
			t.Error("top-level featureGates: kind gives them to every component")
		}
		if len(cluster.RuntimeConfig) > 0 && !realDriverCluster(t) {
			t.Errorf("runtimeConfig %v: the recipe needs no API change", cluster.RuntimeConfig)
		}
		if len(cluster.KubeadmConfigPatchesJSON6902) > 0 {
			t.Error("JSON 6902 patches are not checked here; use kubeadmConfigPatches")
		}
		clusterWide := components{}
		for _, patch := range cluster.KubeadmConfigPatches {
			checkPatch(t, patch, clusterWide)
		}
		workers, controlPlanes := 0, 0
		for i, node := range cluster.Nodes {
			got := components{}
			for component, on := range clusterWide {
				got[component] = on
			}
			for _, patch := range node.KubeadmConfigPatches {
				checkPatch(t, patch, got)
			}
			if len(node.KubeadmConfigPatchesJSON6902) > 0 {
				t.Errorf("node %d: JSON 6902 patches are not checked here; use kubeadmConfigPatches", i)
			}
			switch node.Image {
			case fork:
				if !got["kubelet"] {
					t.Errorf("node %d (%s): its kubelet does not get %s=true", i, node.Image, gate)
				}
			case stock:
				if got["kubelet"] {
					t.Errorf("node %d (%s): a stock kubelet gets %s and refuses to start", i, node.Image, gate)
				}
			default:
				t.Errorf("node %d: image %q is neither %s nor %s", i, node.Image, fork, stock)
			}
			for component, on := range got {
				if component != "kubelet" && on {
					t.Errorf("node %d: %s gets %s: a stock control plane refuses a gate it does not know", i, component, gate)
				}
			}
			switch node.Role {
			case kindv1alpha4.ControlPlaneRole:
				controlPlanes++
			case kindv1alpha4.WorkerRole:
				workers++
			}
		}
		wantWorkers := 2
		if realDriverCluster(t) {
			wantWorkers = 1 // as the driver's own e2e cluster
		}
		if controlPlanes != 1 || workers != wantWorkers {
			t.Errorf("%d control-plane and %d worker nodes, want 1 and %d", controlPlanes, workers, wantWorkers)
		}
	})
}

func TestCDIEnabled(t *testing.T) {
	forEachCluster(t, func(t *testing.T, cluster *kindv1alpha4.Cluster) {
		// kind's containerd config is in the version 2 format: the CRI plugin is io.containerd.grpc.v1.cri.
		section := regexp.MustCompile(`(?m)^\s*\[plugins\."io\.containerd\.grpc\.v1\.cri"\]\s*$`)
		enabled := regexp.MustCompile(`(?m)^\s*enable_cdi\s*=\s*true\s*$`)
		for _, patch := range cluster.ContainerdConfigPatches {
			if section.MatchString(patch) && enabled.MatchString(patch) {
				return
			}
		}
		t.Errorf("no containerd config patch sets enable_cdi = true in the CRI plugin: %q", cluster.ContainerdConfigPatches)
	})
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

// The nodes run the images that hack/kind-image.sh builds: cluster.yaml the fork's on every node,
// mixed-cluster.yaml the stock one on its second worker only.
func TestNodeImagesAreTheForks(t *testing.T) {
	fork, stock := nodeImages(t)
	if got := kindSetting(t, "KIND_NODE_IMAGE"); got != "dra-failfast/kind-node:${FORK_VERSION}" {
		t.Errorf("hack/kind/lib.sh names the node image %q, want dra-failfast/kind-node:${FORK_VERSION}", got)
	}
	if got := kindSetting(t, "KIND_STOCK_NODE_IMAGE"); got != "dra-failfast/kind-node:${KUBE_VERSION}-stock" {
		t.Errorf("hack/kind/lib.sh names the stock node image %q, want dra-failfast/kind-node:${KUBE_VERSION}-stock", got)
	}
	forEachCluster(t, func(t *testing.T, cluster *kindv1alpha4.Cluster) {
		var images []string
		for _, node := range cluster.Nodes {
			images = append(images, node.Image)
		}
		want := []string{fork, fork, fork}
		switch {
		case strings.HasPrefix(t.Name(), "TestNodeImagesAreTheForks/mixed"):
			want[2] = stock
		case realDriverCluster(t):
			want = want[:2]
		}
		if !slices.Equal(images, want) {
			t.Errorf("node images %q, want %q", images, want)
		}
	})
	// The registry route: kind v0.33.0 publishes kindest/node:v1.37.0 and no v1.37.2; the
	// Dockerfile's base is kind's own default node image, pinned by its digest.
	dockerfile := string(repoFile(t, "deploy", "kind", "Dockerfile"))
	if !strings.HasPrefix(kinddefaults.Image, "kindest/node:v1.37.0@sha256:") {
		t.Errorf("kind's default node image is %s: the registry route in deploy/kind/Dockerfile and docs/kind.md needs a new base", kinddefaults.Image)
	}
	if !regexp.MustCompile(`(?m)^ARG KIND_NODE_IMAGE=` + regexp.QuoteMeta(kinddefaults.Image) + `$`).MatchString(dockerfile) {
		t.Errorf("deploy/kind/Dockerfile's default base is not %s, the v1.37 image kind publishes (by digest)", kinddefaults.Image)
	}
}

// Nothing is pulled: kubeadm's imageRepository is the name the node images preload their images
// under, and the kubelets start on cgroup v1 hosts.
func TestImagesArePreloadedNames(t *testing.T) {
	repository := kindSetting(t, "KIND_IMAGE_REPOSITORY")
	forEachCluster(t, func(t *testing.T, cluster *kindv1alpha4.Cluster) {
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
	})
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
	forEachCluster(t, func(t *testing.T, cluster *kindv1alpha4.Cluster) {
		for i, node := range cluster.Nodes {
			mounted := false
			for _, m := range node.ExtraMounts {
				if m.ContainerPath == wantDir {
					mounted = true
					data := repoFile(t, m.HostPath, filepath.Base(failfastdra.DefaultDriverPolicyPath))
					if _, err := decision.ParseDriverPolicy(data); err != nil {
						t.Errorf("node %d: %s: %v", i, m.HostPath, err)
					}
				}
			}
			if !mounted {
				t.Errorf("node %d mounts nothing at %s: its kubelet gets no driver failure policy", i, wantDir)
			}
		}
	})
}

// On another Kubernetes version than the default, make kind-up creates the cluster from a copy of
// the config (hack/kind/lib.sh, kind_cluster_config) that names that version's node images and
// gives the control plane the gates and API version that serve DeviceTaintRules there; nothing
// else of the config changes.
func TestClusterConfigOfAnotherVersion(t *testing.T) {
	lib := string(repoFile(t, "hack", "lib.sh"))
	versions := regexp.MustCompile(`(?m)^SUPPORTED_KUBE_VERSIONS=\(([^)]*)\)$`).FindStringSubmatch(lib)
	_, defaultStock := nodeImages(t)
	def := strings.TrimSuffix(strings.TrimPrefix(defaultStock, "dra-failfast/kind-node:"), "-stock")
	if versions == nil {
		t.Fatal("hack/lib.sh sets no SUPPORTED_KUBE_VERSIONS")
	}
	wantServed := map[string]struct {
		gates         map[string]bool
		runtimeConfig map[string]string
	}{
		"v1.36": {map[string]bool{"DRADeviceTaintRules": true}, map[string]string{"resource.k8s.io/v1beta2": "true"}},
		"v1.35": {map[string]bool{"DRADeviceTaints": true, "DRADeviceTaintRules": true}, map[string]string{"resource.k8s.io/v1alpha3": "true"}},
		// GA from 1.37, served with the defaults: nothing added.
		"v1.38": {map[string]bool{}, map[string]string{}},
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range strings.Fields(versions[1]) {
		if version == def {
			continue
		}
		for _, config := range []string{"deploy/kind/cluster.yaml", "deploy/kind/mixed-cluster.yaml"} {
			t.Run(version+"/"+filepath.Base(config), func(t *testing.T) {
				dir := t.TempDir()
				// Named as the script that calls it: lib.sh lets only some scripts run on another version.
				script := filepath.Join(dir, "kind-up.sh")
				body := "source " + filepath.Join(root, "hack", "lib.sh") + "\nsource " + filepath.Join(root, "hack", "kind", "lib.sh") +
					"\ncd " + root + "\nkind_cluster_config\n"
				if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
					t.Fatal(err)
				}
				cmd := exec.CommandContext(t.Context(), "bash", script)
				cmd.Env = append(os.Environ(), "KUBE_VERSION="+version, "OUTPUT_DIR="+dir, "KIND_CONFIG="+config)
				// The path is on stdout; stderr has logs, and on a cold machine the go
				// command's toolchain download for a 1.38 tree ("go: downloading go1.27.3").
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("kind_cluster_config: %v\n%s%s", err, out, stderr.String())
				}
				path := strings.TrimSpace(string(out))
				if !strings.HasPrefix(path, dir) {
					t.Fatalf("kind_cluster_config wrote %s, outside OUTPUT_DIR", path)
				}
				written, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				var got, orig kindv1alpha4.Cluster
				if err := yaml.UnmarshalStrict(written, &got); err != nil {
					t.Fatalf("not a kind Cluster: %v\n%s", err, written)
				}
				if err := yaml.UnmarshalStrict(repoFile(t, strings.Split(config, "/")...), &orig); err != nil {
					t.Fatal(err)
				}
				// The minor: "v1.38" of "v1.38.0-beta.0" as of "v1.38.2".
				want := wantServed[strings.Join(strings.SplitN(version, ".", 3)[:2], ".")]
				if want.gates == nil {
					t.Fatalf("this test does not know what %s's control plane needs", version)
				}
				if !maps.Equal(got.FeatureGates, want.gates) || !maps.Equal(got.RuntimeConfig, want.runtimeConfig) {
					t.Errorf("featureGates %v runtimeConfig %v, want %v %v", got.FeatureGates, got.RuntimeConfig, want.gates, want.runtimeConfig)
				}
				if len(got.Nodes) != len(orig.Nodes) {
					t.Fatalf("%d nodes, the config has %d", len(got.Nodes), len(orig.Nodes))
				}
				for i, node := range got.Nodes {
					wantImage := strings.Replace(orig.Nodes[i].Image, def, version, 1)
					if node.Image != wantImage || wantImage == orig.Nodes[i].Image {
						t.Errorf("node %d runs %s, want %s", i, node.Image, wantImage)
					}
					node.Image = orig.Nodes[i].Image
					if beforeKubeadmV1beta4(version) {
						// kind writes kubeadm v1beta3 for this node: its kubeletExtraArgs is a map.
						checkV1beta3Patches(t, node.KubeadmConfigPatches, orig.Nodes[i].KubeadmConfigPatches)
						node.KubeadmConfigPatches = orig.Nodes[i].KubeadmConfigPatches
					}
					if !reflect.DeepEqual(node, orig.Nodes[i]) {
						t.Errorf("node %d differs from the config's beyond its image:\n%+v\n%+v", i, node, orig.Nodes[i])
					}
				}
				got.FeatureGates, got.RuntimeConfig, got.Nodes, orig.Nodes = nil, nil, nil, nil
				if !reflect.DeepEqual(got, orig) {
					t.Errorf("the config differs beyond nodes' images, gates and runtimeConfig:\n%+v\n%+v", got, orig)
				}
			})
		}
	}
}

// beforeKubeadmV1beta4 says whether kind (v0.33) configures a node of version with kubeadm's
// v1beta3 (below 1.36).
func beforeKubeadmV1beta4(version string) bool {
	minor := strings.Split(strings.TrimPrefix(version, "v"), ".")
	return len(minor) > 1 && minor[0] == "1" && len(minor[1]) == 2 && minor[1] < "36"
}

// v1beta3Registration is kubeadm v1beta3's node registration as far as deploy/kind's patches use
// it (this module's kubeadm has no v1beta3 types): kubeletExtraArgs a map, not v1beta4's list.
type v1beta3Registration struct {
	Kind             string `json:"kind"`
	NodeRegistration struct {
		KubeletExtraArgs map[string]string `json:"kubeletExtraArgs"`
	} `json:"nodeRegistration"`
}

// checkV1beta3Patches: each of a node's patches as kind_cluster_config wrote it for a v1beta3 node
// decodes strictly in the map form and carries exactly the kubelet flags of the original
// (v1beta4) patch.
func checkV1beta3Patches(t *testing.T, got, orig []string) {
	t.Helper()
	if len(got) != len(orig) {
		t.Fatalf("%d kubeadm patches, the config has %d", len(got), len(orig))
	}
	for i := range got {
		var registration v1beta3Registration
		if err := yaml.UnmarshalStrict([]byte(got[i]), &registration); err != nil {
			t.Errorf("patch %d does not decode in kubeadm v1beta3's form: %v\n%s", i, err, got[i])
			continue
		}
		var want kubeadmv1beta4.JoinConfiguration
		if err := yaml.Unmarshal([]byte(orig[i]), &want); err != nil {
			t.Fatal(err)
		}
		wantArgs := map[string]string{}
		for _, arg := range want.NodeRegistration.KubeletExtraArgs {
			wantArgs[arg.Name] = arg.Value
		}
		if len(wantArgs) == 0 || !maps.Equal(registration.NodeRegistration.KubeletExtraArgs, wantArgs) {
			t.Errorf("patch %d: kubeletExtraArgs %v, want %v (the original's)", i, registration.NodeRegistration.KubeletExtraArgs, wantArgs)
		}
	}
}
