// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gpu-driver is an example DRA driver built with the dra-failfast
// driver library: copy it to start a driver that reports permanent failures.
// It hands out the GPUs of its node ("gpu-0", "gpu-1", ...: nothing real) by
// writing CDI specs that set environment variables in the containers, and
//   - validates its opaque config (GPUConfig) with one function, in an
//     admission webhook (-mode=webhook) and when preparing a claim, where
//     invalid config fails the pod permanently;
//   - reports a broken GPU with failfastplugin.DeviceFault: the GPU gets a
//     NoSchedule taint (a DeviceTaintRule) before the pod fails, so that its
//     replacement gets another GPU; the taint outlives the driver process,
//     and the driver clears it once the GPU is healthy again (at start and
//     at every health check, -health-interval);
//   - serves /metrics and /healthz.
//
// Run one kubelet plugin per node (a DaemonSet) and the webhook once (a
// Deployment behind a Service), from the same image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

const driverName = "gpu.example.com"

type options struct {
	mode       string
	nodeName   string
	kubeconfig string
	gpus       int
	memory     string

	cdiDir            string
	registryDir       string
	pluginDir         string
	brokenDevicesFile string
	healthInterval    time.Duration
	httpAddress       string
	podUID            string

	webhookAddress string
	webhookCert    string
	webhookKey     string

	// The kubeletplugin helper reads every claim it prepares from the API:
	// the client's rate bounds how many claims the node prepares per second.
	apiQPS   float64
	apiBurst int
}

func main() {
	klog.InitFlags(nil)
	var opts options
	flag.StringVar(&opts.mode, "mode", "kubelet-plugin", "kubelet-plugin (one per node) or webhook (the admission webhook)")
	flag.StringVar(&opts.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node this kubelet plugin runs on (default: $NODE_NAME)")
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: the pod's service account")
	flag.IntVar(&opts.gpus, "gpus", 4, "how many GPUs the node has")
	flag.StringVar(&opts.memory, "gpu-memory", "16Gi", "the memory of each GPU (its capacity)")
	flag.StringVar(&opts.cdiDir, "cdi-dir", "/var/run/cdi", "where the container runtime reads CDI specs")
	flag.StringVar(&opts.registryDir, "plugin-registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registry")
	flag.StringVar(&opts.pluginDir, "plugin-dir", kubeletplugin.KubeletPluginsDir+"/"+driverName, "where the plugin's socket goes")
	flag.StringVar(&opts.brokenDevicesFile, "broken-devices-file", "", "file naming the broken GPUs, one per line, read at every prepare (simulates a health check)")
	flag.DurationVar(&opts.healthInterval, "health-interval", 30*time.Second, "how often the health check runs to untaint GPUs that are healthy again (0: only at start)")
	flag.StringVar(&opts.httpAddress, "http-address", ":8080", "kubelet-plugin mode: where /metrics and /healthz are served")
	flag.StringVar(&opts.podUID, "pod-uid", os.Getenv("POD_UID"), "kubelet-plugin mode: this pod's UID (default: $POD_UID); when set, a new instance of the DaemonSet starts beside the old one during a roll (kubeletplugin.RollingUpdate, Kubernetes 1.33 or later)")
	flag.StringVar(&opts.webhookAddress, "webhook-address", admission.DefaultAddress, "webhook mode: where the webhook listens (HTTPS; also /healthz, /readyz, /metrics)")
	flag.StringVar(&opts.webhookCert, "webhook-cert", "/etc/webhook/tls.crt", "webhook mode: serving certificate")
	flag.StringVar(&opts.webhookKey, "webhook-key", "/etc/webhook/tls.key", "webhook mode: its key")
	flag.Float64Var(&opts.apiQPS, "kube-api-qps", 50, "queries per second to the API server (the plugin reads each claim it prepares)")
	flag.IntVar(&opts.apiBurst, "kube-api-burst", 100, "burst of queries to the API server above -kube-api-qps")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName(driverName))
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Driver failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

func run(ctx context.Context, opts options) error {
	switch opts.mode {
	case "webhook":
		return runWebhook(ctx, opts)
	case "kubelet-plugin":
		return runPlugin(ctx, opts)
	default:
		return fmt.Errorf("-mode: %q is neither kubelet-plugin nor webhook", opts.mode)
	}
}

// runWebhook serves the admission webhook until ctx ends. It validates with
// the same function as prepare. A claim generated for a pod from a template
// the webhook never saw (it was down) is let through for bare pods and Jobs,
// which then fail at prepare, and denied for pods of other controllers,
// which would replace a Failed pod at once (admission.GeneratedClaimsByOwner:
// the webhook gets pods).
func runWebhook(ctx context.Context, opts options) error {
	client, err := newClient(opts)
	if err != nil {
		return err
	}
	server, err := admission.Start(ctx, admission.ServerConfig{
		DriverName:      driverName,
		Validate:        validateConfig,
		Address:         opts.webhookAddress,
		CertFile:        opts.webhookCert,
		KeyFile:         opts.webhookKey,
		GeneratedClaims: admission.GeneratedClaimsByOwner,
		KubeClient:      client,
	})
	if err != nil {
		return err
	}
	<-server.Done()
	return server.Err()
}

// runPlugin runs the kubelet plugin until ctx ends.
func runPlugin(ctx context.Context, opts options) error {
	if opts.nodeName == "" {
		return errors.New("-node-name (or $NODE_NAME) must be set")
	}
	if opts.gpus < 1 {
		return fmt.Errorf("-gpus must be at least 1, got %d", opts.gpus)
	}
	memory, err := resource.ParseQuantity(opts.memory)
	if err != nil {
		return fmt.Errorf("-gpu-memory: %w", err)
	}
	client, err := newClient(opts)
	if err != nil {
		return err
	}
	// The kubelet creates neither directory for a driver.
	if err := os.MkdirAll(opts.cdiDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.pluginDir, 0o750); err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	plugin := &driver{pool: opts.nodeName, cdiDir: opts.cdiDir, broken: brokenFromFile(opts.brokenDevicesFile), stop: cancel}
	// StartWithDeviceFaults instead of kubeletplugin.Start: permanent errors
	// reach the kubelet as such, and DeviceFault taints the GPUs.
	// Two instances may run at once during a roll: each call is stateless (a
	// claim's CDI spec is written whole, the broken GPUs read at every
	// prepare), kubeletplugin serializes calls across them by a file lock,
	// and both find the same DeviceTaintRules by name.
	helper, err := failfastplugin.StartWithDeviceFaults(ctx, plugin,
		failfastplugin.DeviceFaultConfig{DriverName: driverName, NodeName: opts.nodeName, KubeClient: client},
		kubeletplugin.RegistrarDirectoryPath(opts.registryDir),
		kubeletplugin.PluginDataDirectoryPath(opts.pluginDir),
		kubeletplugin.RollingUpdate(types.UID(opts.podUID)),
	)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	defer helper.Stop()
	// A GPU stays tainted until its fault is cleared: clear those that are
	// healthy again, once the library read the earlier instances' faults,
	// then at every health check (in the background: the plugin serves
	// meanwhile). When the library could not read them (LoadErr, logged
	// by the library), the faults of this process are still cleared:
	// TaintedDevices has those.
	go func() {
		select {
		case <-helper.Loaded():
		case <-ctx.Done():
			return
		}
		plugin.watchRepairs(ctx, helper, opts.healthInterval)
	}()
	if err := helper.PublishResources(ctx, nodeGPUs(opts.nodeName, opts.gpus, memory)); err != nil {
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}

	server := &http.Server{Addr: opts.httpAddress, Handler: httpHandler(helper), ReadHeaderTimeout: 10 * time.Second}
	listener, err := net.Listen("tcp", opts.httpAddress)
	if err != nil {
		return err
	}
	go func() { _ = server.Serve(listener) }()
	klog.FromContext(ctx).Info("Driver running", "node", opts.nodeName, "gpus", opts.gpus, "http", listener.Addr().String())

	<-ctx.Done()
	shutdownCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer done()
	_ = server.Shutdown(shutdownCtx)
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// registration is what /healthz asks: the kubelet's answer to the plugin's
// registration.
type registration interface {
	RegistrationStatus() *registerapi.RegistrationStatus
}

// httpHandler serves /metrics (the library's counters among them) and
// /healthz, healthy once the kubelet registered the plugin.
func httpHandler(helper registration) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		status := helper.RegistrationStatus()
		if status == nil || !status.PluginRegistered {
			http.Error(w, "not registered with the kubelet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// nodeGPUs are the node's GPUs, in one pool named after the node.
func nodeGPUs(nodeName string, count int, memory resource.Quantity) resourceslice.DriverResources {
	devices := make([]resourceapi.Device, count)
	for i := range devices {
		devices[i] = resourceapi.Device{
			Name: "gpu-" + strconv.Itoa(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To("example-gpu")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: memory},
			},
		}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

func newClient(opts options) (kubernetes.Interface, error) {
	var config *rest.Config
	var err error
	if opts.kubeconfig == "" {
		config, err = rest.InClusterConfig()
	} else {
		config, err = clientcmd.BuildConfigFromFlags("", opts.kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client: %w", err)
	}
	config.QPS, config.Burst = float32(opts.apiQPS), opts.apiBurst
	return kubernetes.NewForConfig(config)
}
