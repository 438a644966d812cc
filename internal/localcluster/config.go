// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ModulePath is the Go module whose checkout holds _output/ (binaries, images, state).
const ModulePath = "github.com/dra-failfast/dra-failfast"

// Image names of the local images; pods must use imagePullPolicy: Never.
const (
	PauseImage    = "dra-failfast.local/pause:v1"
	WorkloadImage = "dra-failfast.local/workload:v1"
)

// Ports the cluster listens on. Only one cluster can run on a machine at a time.
const (
	EtcdClientPort        = 2379
	EtcdPeerPort          = 2380
	APIServerPort         = 6443
	KubeletPort           = 10250
	KubeletHealthzPort    = 10248
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// Network settings.
const (
	ServiceClusterIPRange = "10.0.0.0/24"
	PodSubnet             = "10.244.0.0/24"
	// BridgeName is the Linux bridge the CNI bridge plugin creates for pods.
	BridgeName = "draff0"
	// CNINetworkName names the CNI network (and its cache files in /var/lib/cni/results).
	CNINetworkName = "dra-failfast"
)

// Config describes a local cluster. The zero value is usable: Up fills in the defaults.
type Config struct {
	// StateDir holds everything the cluster writes: PKI, kubeconfigs, etcd data, containerd's
	// root and state, the kubelet's root dir, CDI specs and logs/. Default: <repo>/_output/local-cluster.
	StateDir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
	// containerd, containerd-shim-runc-v2 and ctr. Default: $LOCAL_CLUSTER_BIN_DIR, else
	// <repo>/_output/bin.
	BinDir string
	// KubeletPath is the kubelet binary: the fork (default <BinDir>/kubelet) or the stock one
	// (<BinDir>/kubelet-stock). It is the only difference between the two kinds of cluster.
	KubeletPath string
	// KubeletFeatureGates are the kubelet's feature gates. Pass only gates that KubeletPath
	// knows: a kubelet refuses to start with an unknown gate.
	KubeletFeatureGates map[string]bool
	// KubeletSyncFrequency is the kubelet's syncFrequency: how often it syncs every pod, which
	// is also when it retries a failed NodePrepareResources (plus up to 50% jitter). Zero:
	// the kubelet's default, 1m, as on a real node.
	KubeletSyncFrequency time.Duration
	// KubeletDriverPolicy is the fork's DRA driver failure policy file, given to the kubelet
	// as DRA_FAILFAST_DRIVER_POLICY (the kubelet takes a new version a second after it last
	// changed). Empty: none, and the variable is never passed on from the caller's environment.
	KubeletDriverPolicy string
	// KubeletAPIQPS is the kubelet's kubeAPIQPS, its kubeAPIBurst twice that. Zero: the
	// kubelet's defaults (50 and 100), as on a real node. Every request the kubelet makes for
	// a pod (status, claims, tokens) waits for this limiter; Events have their own.
	KubeletAPIQPS int
	// ControlPlaneAPIQPS is the --kube-api-qps of kube-controller-manager and kube-scheduler,
	// their --kube-api-burst twice that. Zero: their defaults (20/30 and 50/100). Each
	// controller has a client of its own at that rate: the resourceclaim controller at 20 QPS
	// needs about 20 s to create the claims of 200 pods and record them in the pods' status.
	ControlPlaneAPIQPS int
	// ControlPlaneFeatureGates go to kube-apiserver, kube-controller-manager and kube-scheduler,
	// on top of $LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES ("A=true,B=false").
	ControlPlaneFeatureGates map[string]bool
	// ControlPlaneRuntimeConfig is kube-apiserver's --runtime-config. Default:
	// $LOCAL_CLUSTER_RUNTIME_CONFIG, else none. hack/lib.sh sets both variables for a Kubernetes
	// version whose control plane needs them (DeviceTaintRules before 1.37).
	ControlPlaneRuntimeConfig string
	// Verbosity is the kubelet's -v. Default 2.
	Verbosity int
	// KubeletVModule is the kubelet's --vmodule (pattern=N,...): more detail from a few
	// source files without the volume of a higher -v. Empty: none.
	KubeletVModule string
	// ControlPlaneVerbosity is the -v of the other Kubernetes daemons. Default 1.
	ControlPlaneVerbosity int
	// NodeName is the node's name. Default: the host name, lower-cased.
	NodeName string
	// NodeIP is the node's InternalIP. Default: eth0's IPv4 address (or the first non-loopback one).
	NodeIP string
	// ImageDir holds the image tarballs imported into containerd (pause.tar, workload.tar).
	// Default: <repo>/_output/images.
	ImageDir string
	// Progress receives one line per bring-up/teardown step, with elapsed times. Default: os.Stderr.
	Progress io.Writer
}

// RepoRoot returns the checkout of ModulePath that contains the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(data) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no checkout of %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// Environment variables with defaults of the control plane's settings (hack/lib.sh).
const (
	ControlPlaneFeatureGatesEnv  = "LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES"
	ControlPlaneRuntimeConfigEnv = "LOCAL_CLUSTER_RUNTIME_CONFIG"
)

// BinDirEnv names the environment variable that overrides the default BinDir: hack/lib.sh
// sets it to _output/bin/<version> for a KUBE_VERSION other than the default.
const BinDirEnv = "LOCAL_CLUSTER_BIN_DIR"

// OutputDir returns the directory of everything built or written by the
// project: $OUTPUT_DIR when set (relative paths are taken from the
// repository root), else <repo>/_output. hack/lib.sh resolves it the same
// way; this is the one place the Go side does.
func OutputDir() (string, error) {
	dir := os.Getenv("OUTPUT_DIR")
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir), nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("finding the output directory: %w", err)
	}
	if dir == "" {
		dir = "_output"
	}
	return filepath.Join(root, dir), nil
}

// OutputPath returns elem joined to OutputDir, e.g. OutputPath("bin", "kubelet").
func OutputPath(elem ...string) (string, error) {
	dir, err := OutputDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{dir}, elem...)...), nil
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// withDefaults returns cfg with every empty field set and every path absolute.
func (cfg Config) withDefaults() (Config, error) {
	var out string
	if cfg.StateDir == "" || cfg.BinDir == "" || cfg.ImageDir == "" {
		var err error
		if out, err = OutputDir(); err != nil {
			return cfg, fmt.Errorf("finding default paths: %w", err)
		}
	}
	abs := func(p *string, def string) error {
		if *p == "" {
			*p = def
		}
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
		return nil
	}
	if err := abs(&cfg.StateDir, filepath.Join(out, "local-cluster")); err != nil {
		return cfg, err
	}
	defaultBinDir := filepath.Join(out, "bin")
	if dir := os.Getenv(BinDirEnv); dir != "" {
		// Another Kubernetes version's binaries (hack/lib.sh sets it for KUBE_VERSION).
		defaultBinDir = dir
	}
	if err := abs(&cfg.BinDir, defaultBinDir); err != nil {
		return cfg, err
	}
	if err := abs(&cfg.ImageDir, filepath.Join(out, "images")); err != nil {
		return cfg, err
	}
	if err := abs(&cfg.KubeletPath, filepath.Join(cfg.BinDir, "kubelet")); err != nil {
		return cfg, err
	}
	if gates := os.Getenv(ControlPlaneFeatureGatesEnv); gates != "" {
		base, err := ParseFeatureGates(gates)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", ControlPlaneFeatureGatesEnv, err)
		}
		for name, on := range cfg.ControlPlaneFeatureGates {
			base[name] = on
		}
		cfg.ControlPlaneFeatureGates = base
	}
	if cfg.ControlPlaneRuntimeConfig == "" {
		cfg.ControlPlaneRuntimeConfig = os.Getenv(ControlPlaneRuntimeConfigEnv)
	}
	if cfg.Verbosity == 0 {
		cfg.Verbosity = 2
	}
	if cfg.ControlPlaneVerbosity == 0 {
		cfg.ControlPlaneVerbosity = 1
	}
	if cfg.NodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return cfg, fmt.Errorf("node name: %w", err)
		}
		cfg.NodeName = strings.ToLower(host)
	}
	if cfg.NodeIP == "" {
		ip, err := defaultNodeIP()
		if err != nil {
			return cfg, err
		}
		cfg.NodeIP = ip
	}
	if cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	return cfg, nil
}

// defaultNodeIP returns eth0's IPv4 address or, without eth0, the first non-loopback IPv4
// address of an interface that is up and is not the pod bridge.
func defaultNodeIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing network interfaces: %w", err)
	}
	sort.SliceStable(ifaces, func(i, j int) bool { return ifaces[i].Name == "eth0" && ifaces[j].Name != "eth0" })
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 || iface.Name == BridgeName ||
			strings.HasPrefix(iface.Name, "veth") {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address for the node IP: set Config.NodeIP")
}

// featureGatesFlag renders gates as Name=bool,... in a stable order ("" when empty).
func featureGatesFlag(gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for name := range gates {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s=%t", name, gates[name]))
	}
	return strings.Join(parts, ",")
}

// ParseFeatureGates parses "A=true,B=false" (the kubelet's --feature-gates syntax).
func ParseFeatureGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("feature gate %q: want Name=true|false", part)
		}
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			gates[strings.TrimSpace(name)] = true
		case "false":
			gates[strings.TrimSpace(name)] = false
		default:
			return nil, fmt.Errorf("feature gate %q: value must be true or false", part)
		}
	}
	return gates, nil
}
