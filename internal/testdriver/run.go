// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// DefaultKubeletRootDir is the kubelet's default --root-dir.
const DefaultKubeletRootDir = "/var/lib/kubelet"

// Options configure Start.
type Options struct {
	Config
	// KubeletRootDir is the kubelet's --root-dir. The registration socket
	// goes to <root>/plugins_registry, the DRA socket to
	// <root>/plugins/<driver name>/dra.sock. Defaults to
	// DefaultKubeletRootDir.
	KubeletRootDir string
	// StatsAddress is where the HTTP endpoint listens (host:port, port 0
	// picks a free one). Empty: no HTTP endpoint.
	StatsAddress string
	// GRPCAPI chooses the DRA gRPC services the driver serves. Empty means
	// GRPCAPIBoth.
	GRPCAPI GRPCAPI
	// Webhook configures the admission webhook; without an address there
	// is none.
	Webhook WebhookOptions
	// PluginOptions are added to the kubeletplugin options, for tests.
	PluginOptions []kubeletplugin.Option
}

// WebhookOptions configure the driver's validating admission webhook (see
// StartWebhook).
type WebhookOptions struct {
	// Address is host:port to serve HTTPS on (port 0 picks a free one).
	// Empty: no webhook.
	Address string
	// CertFile and KeyFile are the PEM serving certificate and key,
	// reloaded when they change. Required with Address.
	CertFile string
	KeyFile  string
	// Path is the webhook's path; empty is admission.DefaultPath
	// ("/validate").
	Path string
	// GeneratedClaims is what the webhook does with invalid claims
	// generated for pods (admission.GeneratedClaims); ByOwner needs
	// KubeClient.
	GeneratedClaims admission.GeneratedClaims
	KubeClient      kubernetes.Interface
}

// StartWebhook serves the validating admission webhook of the driver
// driverName (DefaultDriverName if empty) until ctx is canceled: it denies
// ResourceClaims, ResourceClaimTemplates and DeviceClasses whose opaque
// config for the driver is not a valid PrepareBehavior, with ValidateConfig,
// the validation that prepare runs, and the same message. Besides the
// webhook at opts.Path it serves /healthz, /readyz and /metrics (see
// admission.Start).
func StartWebhook(ctx context.Context, driverName string, opts WebhookOptions) (*admission.Server, error) {
	if driverName == "" {
		driverName = DefaultDriverName
	}
	if opts.Address == "" {
		return nil, errors.New("admission webhook: the address must be set")
	}
	return admission.Start(ctx, admission.ServerConfig{
		DriverName: driverName,
		Validate:   ValidateConfig,
		Address:    opts.Address,
		CertFile:   opts.CertFile,
		KeyFile:    opts.KeyFile,
		Path:       opts.Path,

		GeneratedClaims: opts.GeneratedClaims,
		KubeClient:      opts.KubeClient,
	})
}

// GRPCAPI is a choice of DRA gRPC services.
type GRPCAPI string

const (
	// GRPCAPIV1 serves only the v1 DRAPlugin service, the only one that can
	// carry error_type.
	GRPCAPIV1 GRPCAPI = "v1"
	// GRPCAPIV1beta1 serves only the v1beta1 DRAPlugin service. The
	// kubelet converts v1beta1 answers to v1 and drops unknown fields on
	// the way, so such a driver can never deliver error_type.
	GRPCAPIV1beta1 GRPCAPI = "v1beta1"
	// GRPCAPIBoth serves both, like kubeletplugin does by default.
	GRPCAPIBoth GRPCAPI = "both"
)

// ParseGRPCAPI checks the value of --grpc-api; "" is GRPCAPIBoth.
func ParseGRPCAPI(value string) (GRPCAPI, error) {
	switch api := GRPCAPI(value); api {
	case "":
		return GRPCAPIBoth, nil
	case GRPCAPIV1, GRPCAPIV1beta1, GRPCAPIBoth:
		return api, nil
	default:
		return "", fmt.Errorf("gRPC API %q is not one of %q, %q, %q", value, GRPCAPIV1, GRPCAPIV1beta1, GRPCAPIBoth)
	}
}

// pluginOptions are the kubeletplugin options that choose the services.
func (api GRPCAPI) pluginOptions() []kubeletplugin.Option {
	switch api {
	case GRPCAPIV1:
		return []kubeletplugin.Option{kubeletplugin.NodeV1(true), kubeletplugin.NodeV1beta1(false)}
	case GRPCAPIV1beta1:
		return []kubeletplugin.Option{kubeletplugin.NodeV1(false), kubeletplugin.NodeV1beta1(true)}
	default:
		return []kubeletplugin.Option{kubeletplugin.NodeV1(true), kubeletplugin.NodeV1beta1(true)}
	}
}

// RegistrarDir is where the kubelet looks for registration sockets.
func RegistrarDir(kubeletRootDir string) string {
	return filepath.Join(kubeletRootDir, "plugins_registry")
}

// PluginDataDir is where the driver puts its DRA socket.
func PluginDataDir(kubeletRootDir, driverName string) string {
	return filepath.Join(kubeletRootDir, "plugins", driverName)
}

// DRASocketPath is the DRA gRPC socket of a driver started by Start (the
// kubeletplugin default name in PluginDataDir).
func DRASocketPath(kubeletRootDir, driverName string) string {
	return filepath.Join(PluginDataDir(kubeletRootDir, driverName), "dra.sock")
}

// RegistrationSocketPath is the registration socket of a driver started by
// Start (the kubeletplugin default name in RegistrarDir).
func RegistrationSocketPath(kubeletRootDir, driverName string) string {
	return filepath.Join(RegistrarDir(kubeletRootDir), driverName+"-reg.sock")
}

// Running is a started driver.
type Running struct {
	Driver *Driver
	Helper *failfastplugin.Helper
	// StatsAddress is the address the HTTP endpoint listens on, empty
	// without one.
	StatsAddress string
	// WebhookAddress is the address the admission webhook listens on,
	// empty without one.
	WebhookAddress string

	ctx      context.Context
	cancel   context.CancelCauseFunc
	server   *http.Server
	webhook  *admission.Server
	stopOnce sync.Once
}

// Done is closed when the driver stops: its context was canceled, Stop was
// called or a fatal error happened (see Err).
func (r *Running) Done() <-chan struct{} { return r.ctx.Done() }

// Err returns why the driver stopped, nil while it runs.
func (r *Running) Err() error { return context.Cause(r.ctx) }

// Start starts the driver: the HTTP endpoint, the admission webhook, the kubelet plugin
// (registration and DRA gRPC service, through
// failfastplugin.StartWithDeviceFaults, which also taints broken devices in
// taint mode) and the ResourceSlice of the node. It returns once the ResourceSlice informer has
// synced, so it waits for the API server (or for ctx). The driver stops when
// ctx is canceled, when a fatal error happens in the background (see Done)
// or with Stop.
func Start(ctx context.Context, opts Options) (*Running, error) {
	logger := klog.FromContext(ctx)
	if opts.KubeClient == nil {
		return nil, errors.New("a Kubernetes client must be set")
	}
	if opts.KubeletRootDir == "" {
		opts.KubeletRootDir = DefaultKubeletRootDir
	}
	grpcAPI, err := ParseGRPCAPI(string(opts.GRPCAPI))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	cfg := opts.Config
	cfg.OnFatalError = func(err error) {
		logger.Error(err, "Fatal error, stopping")
		cancel(err)
	}
	driver, err := New(cfg)
	if err != nil {
		cancel(err)
		return nil, err
	}
	registrarDir := RegistrarDir(opts.KubeletRootDir)
	pluginDataDir := PluginDataDir(opts.KubeletRootDir, driver.DriverName())
	for _, dir := range []string{registrarDir, pluginDataDir, opts.CDIDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cancel(err)
			return nil, fmt.Errorf("create directory: %w", err)
		}
	}

	r := &Running{Driver: driver, ctx: ctx, cancel: cancel}
	if opts.StatsAddress != "" {
		// Serve first: a port in use fails before the kubelet sees the
		// driver, and GET /healthz answers 503 while the driver starts.
		listener, err := net.Listen("tcp", opts.StatsAddress)
		if err != nil {
			cancel(err)
			return nil, fmt.Errorf("stats endpoint: %w", err)
		}
		r.StatsAddress = listener.Addr().String()
		r.server = &http.Server{
			Handler:           Handler(driver),
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		go func() {
			err := r.server.Serve(listener)
			if !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Stats endpoint failed, stopping")
				cancel(fmt.Errorf("stats endpoint: %w", err))
			}
		}()
		logger.Info("Serving stats endpoint", "address", r.StatsAddress)
	}
	if opts.Webhook.Address != "" {
		// Also before the kubelet plugin, for the same reasons.
		webhookOpts := opts.Webhook
		if webhookOpts.KubeClient == nil {
			webhookOpts.KubeClient = opts.Config.KubeClient
		}
		webhook, err := StartWebhook(ctx, driver.DriverName(), webhookOpts)
		if err != nil {
			r.stop()
			return nil, err
		}
		r.webhook = webhook
		r.WebhookAddress = webhook.Addr()
	}

	// The device fault config passes driver name, node name and client to
	// kubeletplugin too.
	faultConfig := failfastplugin.DeviceFaultConfig{
		DriverName:  driver.DriverName(),
		NodeName:    driver.nodeName,
		KubeClient:  opts.KubeClient,
		WaitTimeout: opts.TaintWaitTimeout,
	}
	pluginOpts := append([]kubeletplugin.Option{
		kubeletplugin.RegistrarDirectoryPath(registrarDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDataDir),
		kubeletplugin.HealthService(false),
		// failfastplugin appends its interceptor after this one,
		// which makes it the inner one: this one sees error_type set.
		driver.GRPCInterceptor(),
	}, grpcAPI.pluginOptions()...)
	pluginOpts = append(pluginOpts, opts.PluginOptions...)
	helper, err := failfastplugin.StartWithDeviceFaults(ctx, driver, faultConfig, pluginOpts...)
	if err != nil {
		r.stop()
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	r.Helper = helper
	// The tests read the faults an earlier driver process left from the
	// stats: ready only once the library read them.
	select {
	case <-helper.Loaded():
	case <-ctx.Done():
	}
	if err := helper.LoadErr(); err != nil {
		r.stop()
		return nil, err
	}
	// Blocks until the API server answers.
	if err := driver.SetPublisher(ctx, helper); err != nil {
		r.stop()
		return nil, err
	}
	go func() {
		<-ctx.Done()
		r.stop()
	}()
	logger.Info("Driver started", "driver", driver.DriverName(), "node", driver.nodeName,
		"devices", driver.numDevices, "registrarDir", registrarDir, "pluginDataDir", pluginDataDir,
		"cdiDir", opts.CDIDir, "statsAddress", r.StatsAddress, "webhookAddress", r.WebhookAddress, "taintBroken", driver.taintBroken,
		"broken", driver.Stats().BrokenDevices, "grpcAPI", grpcAPI)
	return r, nil
}

// Stop stops everything and waits for it: the HTTP endpoint, the admission
// webhook, the gRPC services (removing their sockets) and the ResourceSlice
// controller. The ResourceSlice stays in the API.
func (r *Running) Stop() {
	r.cancel(errors.New("driver stopped"))
	r.stop()
}

func (r *Running) stop() {
	r.stopOnce.Do(func() {
		r.cancel(errors.New("driver stopped"))
		if r.server != nil {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = r.server.Shutdown(shutdownCtx)
			cancel()
		}
		if r.webhook != nil {
			// Stops with the canceled context.
			<-r.webhook.Done()
		}
		// Nil when starting the plugin failed.
		if r.Helper != nil {
			r.Helper.Stop()
		}
	})
}
