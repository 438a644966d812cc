// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The kubeconfig users; each has pki/<user>.{crt,key}.
const (
	userAdmin             = "admin"
	userKubelet           = "kubelet"
	userControllerManager = "controller-manager"
	userScheduler         = "scheduler"
)

func apiServerURL() string { return "https://127.0.0.1:" + strconv.Itoa(APIServerPort) }

// writeKubeconfigs writes one kubeconfig per user, each with its certificate embedded.
func writeKubeconfigs(p paths) error {
	caData, err := os.ReadFile(p.pki("ca.crt"))
	if err != nil {
		return err
	}
	for _, user := range []string{userAdmin, userKubelet, userControllerManager, userScheduler} {
		certData, err := os.ReadFile(p.pki(user + ".crt"))
		if err != nil {
			return err
		}
		keyData, err := os.ReadFile(p.pki(user + ".key"))
		if err != nil {
			return err
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: apiServerURL(), CertificateAuthorityData: caData}
		cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certData, ClientKeyData: keyData}
		cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
		cfg.CurrentContext = "local"
		path := p.kubeconfig(user)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// containerdConfig is containerd's config (version 3): every path under the state directory,
// CDI on with the specs in cdiDir, NRI off, the local pause image as sandbox image.
func containerdConfig(p paths, cdiDir string) string {
	q := strconv.Quote
	dir := p.containerdDir()
	return strings.Join([]string{
		`version = 3`,
		`root = ` + q(filepath.Join(dir, "root")),
		`state = ` + q(filepath.Join(dir, "state")),
		`temp = ` + q(filepath.Join(dir, "tmp")),
		``,
		`[grpc]`,
		`  address = ` + q(p.containerdSocket()),
		`[ttrpc]`,
		`  address = ` + q(p.containerdSocket()+".ttrpc"),
		`[debug]`,
		`  level = "info"`,
		``,
		`[plugins]`,
		`  [plugins.'io.containerd.internal.v1.opt']`,
		`    path = ` + q(filepath.Join(dir, "opt")),
		`  [plugins.'io.containerd.nri.v1.nri']`,
		`    disable = true`,
		`  [plugins.'io.containerd.cri.v1.images']`,
		`    snapshotter = "overlayfs"`,
		`    [plugins.'io.containerd.cri.v1.images'.pinned_images]`,
		`      sandbox = ` + q(PauseImage),
		`  [plugins.'io.containerd.cri.v1.runtime']`,
		// The VM lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj.
		`    restrict_oom_score_adj = true`,
		`    enable_cdi = true`,
		`    cdi_spec_dirs = [` + q(cdiDir) + `]`,
		`    netns_mounts_under_state_dir = true`,
		`    [plugins.'io.containerd.cri.v1.runtime'.containerd]`,
		`      default_runtime_name = "runc"`,
		`      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]`,
		`        runtime_type = "io.containerd.runc.v2"`,
		`        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]`,
		`          Root = ` + q(filepath.Join(dir, "runc")),
		`          SystemdCgroup = false`,
		`    [plugins.'io.containerd.cri.v1.runtime'.cni]`,
		`      bin_dirs = ["/usr/lib/cni"]`,
		`      conf_dir = ` + q(p.cniConfDir()),
		`  [plugins.'io.containerd.grpc.v1.cri']`,
		`    stream_server_address = "127.0.0.1"`,
		``,
	}, "\n")
}

// writeRuntimeConfigs writes containerd's config (CDI specs in cdiDir) and the CNI network's.
func writeRuntimeConfigs(p paths, cdiDir string) error {
	if err := writeFile(p.containerdConfig(), []byte(containerdConfig(p, cdiDir)), 0o644); err != nil {
		return err
	}
	conflist, err := cniConfList(p)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(p.cniConfDir(), "10-"+CNINetworkName+".conflist"), conflist, 0o644)
}

// cniConfList is the pod network: a bridge with host-local IPAM, no masquerading (pods have no
// business outside the node), IPAM state under the state directory.
func cniConfList(p paths) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       CNINetworkName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodSubnet}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": p.cniIPAMDir(),
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the KubeletConfiguration. JSON is valid YAML.
func kubeletConfig(p paths, cfg Config) ([]byte, error) {
	gates := cfg.KubeletFeatureGates
	if gates == nil {
		gates = map[string]bool{}
	}
	conf := map[string]any{
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"kind":               "KubeletConfiguration",
		"address":            "0.0.0.0",
		"port":               KubeletPort,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        KubeletHealthzPort,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": p.pki("ca.crt")},
		},
		"authorization":            map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint": "unix://" + p.containerdSocket(),
		"cgroupDriver":             "cgroupfs",
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"clusterDomain":            "cluster.local",
		"podLogsDir":               p.podLogs(),
		"volumePluginDir":          p.volumePluginDir(),
		// Local images cannot be pulled again: never garbage-collect them.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// A test machine's disk may be nearly full; do not taint the node for it.
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		// A restarted kubelet may post NotReady (PLEG not yet run) first; the next status update
		// turns it Ready. Default 10s; status is still only posted when it changes.
		"nodeStatusUpdateFrequency": "2s",
		"serializeImagePulls":       false,
		// The e2e fault matrix runs 150 pods at once; the pod subnet (a /24) has room for them.
		"maxPods":             256,
		"shutdownGracePeriod": "0s",
		"featureGates":        gates,
	}
	if cfg.KubeletSyncFrequency > 0 {
		conf["syncFrequency"] = cfg.KubeletSyncFrequency.String()
	}
	if cfg.KubeletAPIQPS > 0 {
		conf["kubeAPIQPS"], conf["kubeAPIBurst"] = cfg.KubeletAPIQPS, 2*cfg.KubeletAPIQPS
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeFile writes data to path, creating its directory.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
