// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package localcluster runs a real single-node Kubernetes cluster on this machine: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd (with runc and the CNI
// bridge plugin) and a kubelet, all as root processes, every file under one state directory.
//
// The kubelet binary is the only thing that varies: the patched fork or the stock one, so that
// every comparison with upstream is made on the same node. The same code serves the e2e_node
// tests (Up/Down), the demo and the benchmarks (through cmd/local-cluster).
//
// Only one cluster can run on a machine at a time (fixed ports, the kubepods cgroups).
// Binaries come from hack/build-cluster-binaries.sh and hack/build-kubelet.sh.
package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a running local cluster.
type Cluster struct {
	cfg     Config
	p       paths
	created []string
	sysctls map[string]string
	pr      *progress
	// daemons started by this process, by role; a cluster attached to from another
	// process has none and finds its processes in /proc.
	daemons    map[string]*daemon
	restConfig *rest.Config
	client     kubernetes.Interface
}

// savedState is cluster.json: what Attach, Down and RestartKubelet need to know about a cluster
// that another process started.
type savedState struct {
	StartedAt                 time.Time       `json:"startedAt"`
	BinDir                    string          `json:"binDir"`
	ImageDir                  string          `json:"imageDir"`
	KubeletPath               string          `json:"kubeletPath"`
	KubeletFeatureGates       map[string]bool `json:"kubeletFeatureGates,omitempty"`
	KubeletSyncFrequency      time.Duration   `json:"kubeletSyncFrequency,omitempty"`
	KubeletDriverPolicy       string          `json:"kubeletDriverPolicy,omitempty"`
	KubeletAPIQPS             int             `json:"kubeletAPIQPS,omitempty"`
	ControlPlaneAPIQPS        int             `json:"controlPlaneAPIQPS,omitempty"`
	ControlPlaneFeatureGates  map[string]bool `json:"controlPlaneFeatureGates,omitempty"`
	ControlPlaneRuntimeConfig string          `json:"controlPlaneRuntimeConfig,omitempty"`
	Verbosity                 int             `json:"verbosity"`
	KubeletVModule            string          `json:"kubeletVModule,omitempty"`
	ControlPlaneVerbosity     int             `json:"controlPlaneVerbosity"`
	NodeName                  string          `json:"nodeName"`
	NodeIP                    string          `json:"nodeIP"`
	// CreatedOutside lists the directories outside the state directory that this cluster created.
	CreatedOutside []string `json:"createdOutside,omitempty"`
	// Sysctls holds the values of the sysctls the stack may change, from before it started.
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

// progress prints one line per step with the time elapsed since its start.
type progress struct {
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

func (pr *progress) step(format string, args ...any) {
	if pr == nil || pr.w == nil {
		return
	}
	fmt.Fprintf(pr.w, "localcluster [%5.1fs] %s\n", time.Since(pr.start).Seconds(), fmt.Sprintf(format, args...))
}

// Up starts a cluster as cfg describes and waits until its node is Ready and the default
// ServiceAccount exists. Whatever a previous cluster with the same state directory left behind
// (crashed or not) is torn down first. On error nothing is left running; the logs stay in
// <StateDir>/logs.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errNotRoot
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, p: paths{cfg.StateDir}, pr: newProgress(cfg.Progress), daemons: map[string]*daemon{}}
	if err := c.checkFiles(); err != nil {
		return nil, err
	}
	c.pr.step("state %s, kubelet %s, node %s (%s)", cfg.StateDir, cfg.KubeletPath, cfg.NodeName, cfg.NodeIP)

	// A previous cluster's leftovers, with the outside paths it recorded as created.
	var prev savedState
	_ = readState(c.p, &prev)
	if err := teardown(ctx, c.p, prev.CreatedOutside, prev.Sysctls, c.pr); err != nil {
		return nil, fmt.Errorf("cleaning up the previous cluster in %s: %w", cfg.StateDir, err)
	}
	if err := checkPortsFree(); err != nil {
		return nil, err
	}
	c.created = missingOutsidePaths()
	c.sysctls = readSysctls()

	if err := c.start(ctx); err != nil {
		c.pr.step("bring-up failed, tearing down (logs stay in %s)", c.p.logs())
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := teardown(tctx, c.p, c.created, c.sysctls, c.pr); derr != nil {
			err = fmt.Errorf("%w (and teardown: %v)", err, derr)
		}
		return nil, err
	}
	return c, nil
}

// Attach returns the cluster that runs (or ran) with cfg's state directory, as recorded by Up;
// the fields of cfg left empty are taken from that record. The error wraps os.ErrNotExist when
// there is no record.
func Attach(cfg Config) (*Cluster, error) {
	if cfg.StateDir == "" {
		dir, err := OutputPath("local-cluster")
		if err != nil {
			return nil, err
		}
		cfg.StateDir = dir
	}
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	p := paths{stateDir}
	var st savedState
	if err := readState(p, &st); err != nil {
		return nil, err
	}
	cfg.StateDir = stateDir
	setDefault(&cfg.BinDir, st.BinDir)
	setDefault(&cfg.ImageDir, st.ImageDir)
	setDefault(&cfg.KubeletPath, st.KubeletPath)
	setDefault(&cfg.NodeName, st.NodeName)
	setDefault(&cfg.NodeIP, st.NodeIP)
	if cfg.KubeletFeatureGates == nil {
		cfg.KubeletFeatureGates = st.KubeletFeatureGates
	}
	if cfg.ControlPlaneFeatureGates == nil {
		cfg.ControlPlaneFeatureGates = st.ControlPlaneFeatureGates
	}
	setDefault(&cfg.ControlPlaneRuntimeConfig, st.ControlPlaneRuntimeConfig)
	if cfg.Verbosity == 0 {
		cfg.Verbosity = st.Verbosity
	}
	setDefault(&cfg.KubeletVModule, st.KubeletVModule)
	if cfg.KubeletSyncFrequency == 0 {
		cfg.KubeletSyncFrequency = st.KubeletSyncFrequency
	}
	if cfg.KubeletDriverPolicy == "" {
		cfg.KubeletDriverPolicy = st.KubeletDriverPolicy
	}
	if cfg.KubeletAPIQPS == 0 {
		cfg.KubeletAPIQPS = st.KubeletAPIQPS
	}
	if cfg.ControlPlaneAPIQPS == 0 {
		cfg.ControlPlaneAPIQPS = st.ControlPlaneAPIQPS
	}
	if cfg.ControlPlaneVerbosity == 0 {
		cfg.ControlPlaneVerbosity = st.ControlPlaneVerbosity
	}
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, p: p, created: st.CreatedOutside, sysctls: st.Sysctls, pr: newProgress(cfg.Progress),
		daemons: map[string]*daemon{}}
	if err := c.connect(); err != nil {
		return nil, err
	}
	return c, nil
}

// Cleanup tears down whatever a cluster with cfg's state directory left behind, with or without
// a record of it, and verifies that nothing is left.
func Cleanup(ctx context.Context, cfg Config) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	if c, err := Attach(cfg); err == nil {
		return c.Down(ctx)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	pr := newProgress(cfg.Progress)
	if err := teardown(ctx, paths{cfg.StateDir}, nil, nil, pr); err != nil {
		return err
	}
	pr.step("no cluster recorded in %s; cleaned up, nothing left", cfg.StateDir)
	return nil
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

// Down stops every process of the cluster (daemons, shims, containers), unmounts everything
// below the state directory, removes the network namespaces, the bridge, the pod cgroups and
// the files the stack wrote outside the state directory, then removes the state directory except
// its logs/. It returns an error naming whatever is left.
func (c *Cluster) Down(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	start := time.Now()
	c.pr.step("tearing down")
	if err := teardown(ctx, c.p, c.created, c.sysctls, c.pr); err != nil {
		return err
	}
	c.pr.step("down in %.1fs, nothing left", time.Since(start).Seconds())
	return nil
}

// Kubeconfig is the admin kubeconfig (user kubernetes-admin in system:masters).
func (c *Cluster) Kubeconfig() string { return c.p.kubeconfig(userAdmin) }

// RESTConfig is the admin REST config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client is an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// NodeName is the name of the cluster's only node.
func (c *Cluster) NodeName() string { return c.cfg.NodeName }

// NodeIP is the node's InternalIP.
func (c *Cluster) NodeIP() string { return c.cfg.NodeIP }

// StateDir is the directory holding everything the cluster writes.
func (c *Cluster) StateDir() string { return c.cfg.StateDir }

// LogDir holds one <daemon>.log per daemon.
func (c *Cluster) LogDir() string { return c.p.logs() }

// KubeletRootDir is the kubelet's --root-dir. DRA drivers register in
// <KubeletRootDir>/plugins_registry and put their sockets in <KubeletRootDir>/plugins/<driver>.
func (c *Cluster) KubeletRootDir() string { return c.p.kubeletRoot() }

// PluginsRegistryDir is <KubeletRootDir>/plugins_registry.
func (c *Cluster) PluginsRegistryDir() string {
	return filepath.Join(c.p.kubeletRoot(), "plugins_registry")
}

// PluginsDir is <KubeletRootDir>/plugins.
func (c *Cluster) PluginsDir() string { return filepath.Join(c.p.kubeletRoot(), "plugins") }

// CDISpecDir is the directory containerd reads CDI specs from.
func (c *Cluster) CDISpecDir() string { return c.p.cdiDir() }

// ContainerdAddress is containerd's socket.
func (c *Cluster) ContainerdAddress() string { return c.p.containerdSocket() }

// KubeletPath is the kubelet binary that runs (or ran last).
func (c *Cluster) KubeletPath() string { return c.cfg.KubeletPath }

// KubeletFeatureGates are the kubelet's current feature gates.
func (c *Cluster) KubeletFeatureGates() map[string]bool { return maps.Clone(c.cfg.KubeletFeatureGates) }

// KubeletPID returns the pid of the running kubelet (to read its CPU time
// from /proc, for example).
func (c *Cluster) KubeletPID() (int, error) {
	procs := withoutForkedChildren(clusterProcs(c.p.state, roleKubelet))
	if len(procs) != 1 {
		return 0, fmt.Errorf("%d kubelet processes running, want 1", len(procs))
	}
	return procs[0].pid, nil
}

// BinDir is the directory of the cluster's binaries (kubectl among them).
func (c *Cluster) BinDir() string { return c.cfg.BinDir }

// Kubectl returns a kubectl command (the pinned one from BinDir) against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig()}, args...)...)
	return cmd
}

// Env returns NAME=VALUE settings for a shell using the cluster: KUBECONFIG, PATH with BinDir
// first (for the pinned kubectl), and the cluster's paths.
func (c *Cluster) Env() []string {
	return []string{
		"KUBECONFIG=" + c.Kubeconfig(),
		"PATH=" + c.cfg.BinDir + ":" + os.Getenv("PATH"),
		"LOCAL_CLUSTER_STATE_DIR=" + c.cfg.StateDir,
		"LOCAL_CLUSTER_NODE_NAME=" + c.cfg.NodeName,
		"LOCAL_CLUSTER_NODE_IP=" + c.cfg.NodeIP,
		"LOCAL_CLUSTER_KUBELET=" + c.cfg.KubeletPath,
		"LOCAL_CLUSTER_KUBELET_ROOT_DIR=" + c.KubeletRootDir(),
		"LOCAL_CLUSTER_CDI_SPEC_DIR=" + c.CDISpecDir(),
		"LOCAL_CLUSTER_CONTAINERD_ADDRESS=" + c.ContainerdAddress(),
		"LOCAL_CLUSTER_LOG_DIR=" + c.LogDir(),
	}
}

// checkFiles fails early, naming the build step, when a binary or an image is missing.
func (c *Cluster) checkFiles() error {
	var missing []string
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
		"kubectl", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(c.bin(name)); err != nil {
			missing = append(missing, c.bin(name))
		}
	}
	for _, name := range []string{"pause.tar", "workload.tar"} {
		if _, err := os.Stat(filepath.Join(c.cfg.ImageDir, name)); err != nil {
			missing = append(missing, filepath.Join(c.cfg.ImageDir, name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run hack/build-cluster-binaries.sh", strings.Join(missing, ", "))
	}
	if _, err := os.Stat(c.cfg.KubeletPath); err != nil {
		return fmt.Errorf("missing kubelet %s: run hack/build-kubelet.sh (--stock for kubelet-stock)", c.cfg.KubeletPath)
	}
	for _, tool := range []string{"runc", "ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat(filepath.Join("/usr/sbin", tool)); err != nil {
				return fmt.Errorf("%s not found: run hack/build-cluster-binaries.sh (installs Debian's runc)", tool)
			}
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", plugin)); err != nil {
			return fmt.Errorf("CNI plugin /usr/lib/cni/%s not found: run hack/build-cluster-binaries.sh", plugin)
		}
	}
	return nil
}

// checkPortsFree fails when another cluster (or anything else) holds one of our ports.
func checkPortsFree() error {
	for _, port := range []int{EtcdClientPort, EtcdPeerPort, APIServerPort, KubeletPort, KubeletHealthzPort,
		ControllerManagerPort, SchedulerPort} {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			return fmt.Errorf("port %d is in use (another local cluster with another state directory? see `ss -ltnp`): %w", port, err)
		}
		l.Close()
	}
	return nil
}

// start brings the cluster up from an empty state directory.
func (c *Cluster) start(ctx context.Context) error {
	start := time.Now()
	if err := c.prepare(); err != nil {
		return err
	}
	env := daemonEnv(c.cfg.BinDir)

	etcd, err := startDaemon(c.p, roleEtcd, c.bin("etcd"), etcdArgs(c.p), env)
	if err != nil {
		return err
	}
	// containerd does not depend on the control plane: start it right away.
	containerd, err := startDaemon(c.p, roleContainerd, c.bin("containerd"), c.containerdArgs(), env)
	if err != nil {
		return err
	}
	c.daemons[roleEtcd], c.daemons[roleContainerd] = etcd, containerd
	if err := c.waitFor(ctx, etcd, 30*time.Second, c.etcdHealthy); err != nil {
		return err
	}
	c.pr.step("etcd ready")

	audit, err := c.auditArgs()
	if err != nil {
		return err
	}
	apiserver, err := startDaemon(c.p, roleAPIServer, c.bin("kube-apiserver"), append(c.apiServerArgs(), audit...), env)
	if err != nil {
		return err
	}
	c.daemons[roleAPIServer] = apiserver
	if err := c.connect(); err != nil {
		return err
	}

	if err := c.waitFor(ctx, containerd, 30*time.Second, c.containerdReady); err != nil {
		return err
	}
	c.pr.step("containerd ready")
	if err := c.importImages(ctx, []string{filepath.Join(c.cfg.ImageDir, "pause.tar"), filepath.Join(c.cfg.ImageDir, "workload.tar")}); err != nil {
		return err
	}
	c.pr.step("images imported: %s, %s", PauseImage, WorkloadImage)

	if err := c.waitFor(ctx, apiserver, 60*time.Second, c.apiServerReady); err != nil {
		return err
	}
	c.pr.step("kube-apiserver ready")

	kcm, err := startDaemon(c.p, roleControllerManager, c.bin("kube-controller-manager"), c.controllerManagerArgs(), env)
	if err != nil {
		return err
	}
	sched, err := startDaemon(c.p, roleScheduler, c.bin("kube-scheduler"), c.schedulerArgs(), env)
	if err != nil {
		return err
	}
	c.daemons[roleControllerManager], c.daemons[roleScheduler] = kcm, sched
	if err := c.startKubelet(); err != nil {
		return err
	}

	if err := c.waitFor(ctx, kcm, 30*time.Second, httpsHealthy(ControllerManagerPort)); err != nil {
		return err
	}
	if err := c.waitFor(ctx, sched, 30*time.Second, httpsHealthy(SchedulerPort)); err != nil {
		return err
	}
	c.pr.step("kube-controller-manager and kube-scheduler healthy")
	if err := c.waitKubeletReady(ctx, time.Time{}); err != nil {
		return err
	}
	c.pr.step("node %s Ready", c.cfg.NodeName)
	if err := c.waitFor(ctx, kcm, 60*time.Second, c.defaultServiceAccount); err != nil {
		return err
	}
	c.pr.step("default ServiceAccount and kube-root-ca.crt present: cluster up in %.1fs, RSS %s",
		time.Since(start).Seconds(), formatBytes(c.totalRSS()))
	return nil
}

// prepare writes PKI, kubeconfigs and configs into a fresh state directory.
func (c *Cluster) prepare() error {
	p := c.p
	if err := os.MkdirAll(p.state, 0o755); err != nil {
		return err
	}
	// Keep the logs of the previous run next to the new ones.
	if _, err := os.Stat(p.logs()); err == nil {
		prev := p.file("logs.previous")
		if err := os.RemoveAll(prev); err != nil {
			return err
		}
		if err := os.Rename(p.logs(), prev); err != nil {
			return err
		}
	}
	for _, dir := range []string{p.logs(), p.cdiDir(), p.kubeletRoot(), p.podLogs(), p.volumePluginDir(),
		p.cniConfDir(), p.cniIPAMDir(), p.file("pids")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := c.saveState(); err != nil {
		return err
	}
	nodeIP := net.ParseIP(c.cfg.NodeIP)
	if nodeIP == nil {
		return fmt.Errorf("node IP %q is not an IP address", c.cfg.NodeIP)
	}
	if err := writePKI(p, c.cfg.NodeName, nodeIP); err != nil {
		return err
	}
	if err := writeKubeconfigs(p); err != nil {
		return err
	}
	if err := writeRuntimeConfigs(p, p.cdiDir()); err != nil {
		return err
	}
	c.pr.step("PKI, kubeconfigs and configs written")
	return nil
}

func (c *Cluster) saveState() error {
	st := savedState{
		StartedAt:                 time.Now(),
		BinDir:                    c.cfg.BinDir,
		ImageDir:                  c.cfg.ImageDir,
		KubeletPath:               c.cfg.KubeletPath,
		KubeletFeatureGates:       c.cfg.KubeletFeatureGates,
		KubeletSyncFrequency:      c.cfg.KubeletSyncFrequency,
		KubeletDriverPolicy:       c.cfg.KubeletDriverPolicy,
		KubeletAPIQPS:             c.cfg.KubeletAPIQPS,
		ControlPlaneAPIQPS:        c.cfg.ControlPlaneAPIQPS,
		ControlPlaneFeatureGates:  c.cfg.ControlPlaneFeatureGates,
		ControlPlaneRuntimeConfig: c.cfg.ControlPlaneRuntimeConfig,
		Verbosity:                 c.cfg.Verbosity,
		KubeletVModule:            c.cfg.KubeletVModule,
		ControlPlaneVerbosity:     c.cfg.ControlPlaneVerbosity,
		NodeName:                  c.cfg.NodeName,
		NodeIP:                    c.cfg.NodeIP,
		CreatedOutside:            c.created,
		Sysctls:                   c.sysctls,
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(c.p.stateFile(), append(data, '\n'), 0o644)
}

func readState(p paths, st *savedState) error {
	data, err := os.ReadFile(p.stateFile())
	if err != nil {
		return fmt.Errorf("no local cluster recorded in %s: %w", p.state, err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return fmt.Errorf("reading %s: %w", p.stateFile(), err)
	}
	return nil
}

// connect loads the admin kubeconfig.
func (c *Cluster) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return fmt.Errorf("loading %s: %w", c.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c.restConfig, c.client = cfg, client
	return nil
}

// ProcessStatus describes one process of the cluster.
type ProcessStatus struct {
	Role     string
	PID      int
	RSSBytes int64
}

// Status describes a cluster.
type Status struct {
	Processes []ProcessStatus
	// RSSBytes sums the RSS of the processes (containers excluded).
	RSSBytes int64
	// NodeReady is the node's Ready condition ("" when the API server cannot be reached).
	NodeReady string
	// NodeReadyMessage is the condition's reason and message, or why it is unknown.
	NodeReadyMessage string
}

// Status reports the cluster's processes and its node's readiness.
func (c *Cluster) Status(ctx context.Context) Status {
	var st Status
	for _, pr := range clusterProcs(c.p.state) {
		rss := rssBytes(pr.pid)
		st.Processes = append(st.Processes, ProcessStatus{Role: pr.role, PID: pr.pid, RSSBytes: rss})
		st.RSSBytes += rss
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	node, err := c.client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		st.NodeReadyMessage = "node not registered"
	case err != nil:
		st.NodeReadyMessage = err.Error()
	default:
		for _, cond := range node.Status.Conditions {
			if cond.Type == v1.NodeReady {
				st.NodeReady = string(cond.Status)
				st.NodeReadyMessage = cond.Reason + ": " + cond.Message
			}
		}
	}
	return st
}

func (c *Cluster) totalRSS() int64 {
	var total int64
	for _, pr := range clusterProcs(c.p.state) {
		total += rssBytes(pr.pid)
	}
	return total
}

func formatBytes(n int64) string {
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
