// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dra-test-driver is the test DRA driver of the demo, the e2e tests
// and the benchmarks (package internal/testdriver). It runs as a plain host
// process next to the kubelet of a local single-node cluster:
//
//	dra-test-driver --node-name=node-1 --kubeconfig=kubeconfig \
//	    --kubelet-root-dir=<kubelet --root-dir> --cdi-dir=<containerd's CDI dir> \
//	    --devices=4 --broken-devices=dev-1 --taint-broken --grpc-api=both \
//	    --stats-address=127.0.0.1:8081
//
// It registers with the kubelet through <root-dir>/plugins_registry,
// publishes ResourceSlices with the devices dev-0 ... dev-<N-1> for the node
// (at most 64 devices per slice) and prepares claims by writing CDI specs.
// --grpc-api chooses the DRA gRPC services it serves: v1, v1beta1 or both;
// only v1 can carry the permanent mark to the kubelet.
//
// Failures are injected per claim through an opaque PrepareBehavior config,
// per namespace through a runtime override and per device through the broken
// set. The HTTP endpoint at --stats-address serves:
//
//	GET    /healthz                 200 once the ResourceSlices are published
//	GET    /stats                   counters per claim, broken set, overrides (JSON)
//	POST   /broken?device=dev-1     break a device; DELETE repairs it
//	POST   /reset                   clear the counters
//	PUT    /behavior?namespace=NS   JSON BehaviorSpec body, e.g. {"prepare":"Permanent",
//	                                "message":"boom","wire":{"errorType":7}}: overrides the
//	                                opaque configs of the claims in NS; 400 if invalid
//	DELETE /behavior?namespace=NS   remove the override
//	POST   /republish               publish the ResourceSlices again now, e.g. after a
//	                                starting kubelet deleted them
//	GET    /metrics                 metrics, e.g. dra_failfast_plugin_device_taint_wait_duration_seconds
//
// With --webhook-address it also serves a validating admission webhook over
// HTTPS that denies ResourceClaims, ResourceClaimTemplates and DeviceClasses
// whose PrepareBehavior config for the driver is invalid, with the message
// that prepare would give (pkg/failfastplugin/admission):
//
//	dra-test-driver ... --webhook-address=127.0.0.1:8443 \
//	    --webhook-cert-file=tls.crt --webhook-key-file=tls.key
//
//	POST   /validate                admission.k8s.io/v1 AdmissionReview (--webhook-path)
//	GET    /healthz, /readyz        200 "ok"
//	GET    /metrics                 e.g. dra_failfast_plugin_admission_decisions_total
//
// The certificate and key are read again when the files change. With
// --webhook-only it serves just the webhook: no kubelet plugin, no
// ResourceSlices, no API server connection, so that the webhook can be
// stopped while the driver keeps running.
//
// It stops on SIGINT or SIGTERM, removing its sockets; the ResourceSlices
// stay.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// config is what the flags say.
type config struct {
	driverName    string
	nodeName      string
	kubeconfig    string
	rootDir       string
	cdiDir        string
	devices       int
	brokenDevices []string
	taintBroken   bool
	statsAddress  string
	taintWait     time.Duration
	grpcAPI       testdriver.GRPCAPI
	webhook       testdriver.WebhookOptions
	webhookOnly   bool
	// apiQPS and apiBurst limit the driver's API client. The kubeletplugin
	// helper reads every claim from the API in NodePrepareResources, so
	// they bound how many claims a node prepares per second.
	apiQPS   float64
	apiBurst int
}

func main() {
	klog.InitFlags(nil)
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "dra-test-driver: %v\n", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		klog.Background().Error(err, "dra-test-driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// parseFlags defines the driver's flags on fs, parses args and checks them.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var (
		cfg     config
		broken  string
		grpcAPI string
	)
	fs.StringVar(&cfg.driverName, "driver-name", testdriver.DefaultDriverName, "name of the DRA driver")
	fs.StringVar(&cfg.nodeName, "node-name", "", "name of the node the driver runs on (default: the host name)")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&cfg.rootDir, "kubelet-root-dir", testdriver.DefaultKubeletRootDir, "the kubelet's --root-dir; registration sockets go to <dir>/plugins_registry, the DRA socket to <dir>/plugins/<driver-name>")
	fs.StringVar(&cfg.cdiDir, "cdi-dir", "/var/run/cdi", "directory for CDI spec files, one that the container runtime reads")
	fs.IntVar(&cfg.devices, "devices", testdriver.DefaultNumDevices, fmt.Sprintf("number of devices dev-0 ... dev-<N-1> (1 to %d)", testdriver.MaxDevices))
	fs.StringVar(&broken, "broken-devices", "", "comma-separated devices whose claims fail permanently (e.g. dev-1,dev-2)")
	fs.BoolVar(&cfg.taintBroken, "taint-broken", false, "when a claim fails on a broken device, taint the device first with a DeviceTaintRule (NoSchedule, "+failfastplugin.DefaultDeviceFaultTaintKey+"; failfastplugin.DeviceFault); it stays until the device is repaired through the control API")
	fs.StringVar(&cfg.statsAddress, "stats-address", "", "host:port of the HTTP stats/control endpoint, e.g. 127.0.0.1:8081 (empty: none)")
	fs.DurationVar(&cfg.taintWait, "taint-wait-timeout", testdriver.DefaultTaintWaitTimeout, "how long a prepare call waits for the API server to store a new DeviceTaintRule")
	fs.StringVar(&grpcAPI, "grpc-api", string(testdriver.GRPCAPIBoth), fmt.Sprintf("DRA gRPC services to serve: %s, %s or %s (only v1 carries the permanent mark)", testdriver.GRPCAPIV1, testdriver.GRPCAPIV1beta1, testdriver.GRPCAPIBoth))
	fs.StringVar(&cfg.webhook.Address, "webhook-address", "", "host:port of the HTTPS validating admission webhook for the driver's opaque config, e.g. 127.0.0.1:8443 (empty: none)")
	fs.StringVar(&cfg.webhook.CertFile, "webhook-cert-file", "", "PEM serving certificate (chain) of the webhook, reloaded when it changes; required with --webhook-address")
	fs.StringVar(&cfg.webhook.KeyFile, "webhook-key-file", "", "PEM private key of the webhook's certificate, reloaded when it changes; required with --webhook-address")
	fs.StringVar(&cfg.webhook.Path, "webhook-path", admission.DefaultPath, "URL path of the webhook, the path in the ValidatingWebhookConfiguration's clientConfig")
	fs.StringVar((*string)(&cfg.webhook.GeneratedClaims), "webhook-generated-claims", "", `what the webhook does with an invalid ResourceClaim generated for a pod from a template it never saw: "" (deny), "Allow", or "ByOwner" (allow for bare pods and Jobs, deny for other controllers' pods; needs API access, also with --webhook-only)`)
	fs.Float64Var(&cfg.apiQPS, "kube-api-qps", 50, "queries per second to the API server; the kubeletplugin helper reads each claim it prepares, so this bounds the claims prepared per second (client-go's default 5 made a 200-pod burst take 40 s)")
	fs.IntVar(&cfg.apiBurst, "kube-api-burst", 100, "burst of queries to the API server above --kube-api-qps")
	fs.BoolVar(&cfg.webhookOnly, "webhook-only", false, "serve only the webhook: no kubelet plugin, no ResourceSlices, no API server connection")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.devices < 1 || cfg.devices > testdriver.MaxDevices {
		return config{}, fmt.Errorf("--devices must be between 1 and %d, got %d", testdriver.MaxDevices, cfg.devices)
	}
	api, err := testdriver.ParseGRPCAPI(grpcAPI)
	if err != nil {
		return config{}, fmt.Errorf("--grpc-api: %w", err)
	}
	cfg.grpcAPI = api
	switch {
	case cfg.webhook.Address != "" && (cfg.webhook.CertFile == "" || cfg.webhook.KeyFile == ""):
		return config{}, errors.New("--webhook-address needs --webhook-cert-file and --webhook-key-file")
	case cfg.webhook.Address == "" && (cfg.webhook.CertFile != "" || cfg.webhook.KeyFile != ""):
		return config{}, errors.New("--webhook-cert-file and --webhook-key-file need --webhook-address")
	case cfg.webhookOnly && cfg.webhook.Address == "":
		return config{}, errors.New("--webhook-only needs --webhook-address")
	case cfg.apiQPS <= 0 || cfg.apiBurst < 1:
		return config{}, fmt.Errorf("--kube-api-qps must be above 0 and --kube-api-burst at least 1, got %v and %d", cfg.apiQPS, cfg.apiBurst)
	case !strings.HasPrefix(cfg.webhook.Path, "/"):
		return config{}, fmt.Errorf("--webhook-path %q does not start with /", cfg.webhook.Path)
	}
	for _, device := range strings.Split(broken, ",") {
		if device = strings.TrimSpace(device); device != "" {
			cfg.brokenDevices = append(cfg.brokenDevices, device)
		}
	}
	return cfg, nil
}

func run(cfg config) error {
	logger := klog.Background()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, logger)

	if cfg.webhookOnly {
		return runWebhook(ctx, cfg)
	}

	nodeName := cfg.nodeName
	if nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name not set and no host name: %w", err)
		}
		nodeName = strings.ToLower(host)
	}
	brownout := &testdriver.APIBrownout{}
	client, err := newClient(cfg, brownout.Wrap)
	if err != nil {
		return err
	}

	running, err := testdriver.Start(ctx, testdriver.Options{
		Config: testdriver.Config{
			DriverName:       cfg.driverName,
			NodeName:         nodeName,
			NumDevices:       cfg.devices,
			BrokenDevices:    cfg.brokenDevices,
			TaintBroken:      cfg.taintBroken,
			CDIDir:           cfg.cdiDir,
			KubeClient:       client,
			TaintWaitTimeout: cfg.taintWait,
			APIBrownout:      brownout,
		},
		KubeletRootDir: cfg.rootDir,
		StatsAddress:   cfg.statsAddress,
		GRPCAPI:        cfg.grpcAPI,
		Webhook:        cfg.webhook,
	})
	if err != nil {
		if ctx.Err() != nil {
			// A signal while waiting for the API server.
			logger.Info("Stopped by signal while starting", "err", err)
			return nil
		}
		return err
	}
	<-running.Done()
	running.Stop()
	if cause := running.Err(); ctx.Err() == nil && cause != nil {
		// Not stopped by a signal: a fatal error.
		return cause
	}
	logger.Info("Stopped by signal")
	return nil
}

// runWebhook serves only the admission webhook, until a signal. It connects
// to the API server only for --webhook-generated-claims=ByOwner.
func runWebhook(ctx context.Context, cfg config) error {
	if cfg.webhook.GeneratedClaims == admission.GeneratedClaimsByOwner {
		client, err := newClient(cfg, nil)
		if err != nil {
			return err
		}
		cfg.webhook.KubeClient = client
	}
	webhook, err := testdriver.StartWebhook(ctx, cfg.driverName, cfg.webhook)
	if err != nil {
		return err
	}
	<-webhook.Done()
	if err := webhook.Err(); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Stopped by signal")
	return nil
}

// newClient connects to the API server with cfg.kubeconfig (empty: the
// default loading rules, in-cluster included) at cfg's client rate, its
// transport wrapped with wrap (nil: as it is).
func newClient(cfg config, wrap func(http.RoundTripper) http.RoundTripper) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cfg.kubeconfig
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	restConfig.UserAgent = "dra-test-driver"
	restConfig.QPS, restConfig.Burst = float32(cfg.apiQPS), cfg.apiBurst
	if wrap != nil {
		restConfig.Wrap(wrap)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return client, nil
}
