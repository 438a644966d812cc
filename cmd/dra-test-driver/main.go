// Command dra-test-driver is the test DRA driver of the demo, the e2e tests
// and the benchmarks (package test/dradriver). It runs as a plain host
// process next to the kubelet of a local single-node cluster:
//
//	dra-test-driver --node-name=node-1 --kubeconfig=kubeconfig \
//	    --kubelet-root-dir=<kubelet --root-dir> --cdi-dir=<containerd's CDI dir> \
//	    --devices=4 --broken-devices=dev-1 --taint-broken \
//	    --stats-address=127.0.0.1:8081
//
// It registers with the kubelet through <root-dir>/plugins_registry,
// publishes a ResourceSlice with the devices dev-0 ... dev-<N-1> for the node
// and prepares claims by writing CDI specs. Failures are injected per claim
// through an opaque PrepareBehavior config and per device through the broken
// set, which the HTTP endpoint at --stats-address can change at runtime
// (GET /stats, GET /healthz, POST|DELETE /broken?device=dev-1, POST /reset).
//
// It stops on SIGINT or SIGTERM, removing its sockets; the ResourceSlice
// stays.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/test/dradriver"
)

func main() {
	klog.InitFlags(nil)
	var (
		driverName   = flag.String("driver-name", dradriver.DefaultDriverName, "name of the DRA driver")
		nodeName     = flag.String("node-name", "", "name of the node the driver runs on (default: the host name)")
		kubeconfig   = flag.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
		rootDir      = flag.String("kubelet-root-dir", dradriver.DefaultKubeletRootDir, "the kubelet's --root-dir; registration sockets go to <dir>/plugins_registry, the DRA socket to <dir>/plugins/<driver-name>")
		cdiDir       = flag.String("cdi-dir", "/var/run/cdi", "directory for CDI spec files, one that the container runtime reads")
		devices      = flag.Int("devices", dradriver.DefaultNumDevices, fmt.Sprintf("number of devices dev-0 ... dev-<N-1> (1 to %d)", dradriver.MaxDevices))
		broken       = flag.String("broken-devices", "", "comma-separated devices whose claims fail permanently (e.g. dev-1,dev-2)")
		taintBroken  = flag.Bool("taint-broken", false, "when a claim fails on a broken device, publish the NoSchedule taint "+dradriver.BrokenTaintKey+" on the device first")
		statsAddress = flag.String("stats-address", "", "host:port of the HTTP stats/control endpoint, e.g. 127.0.0.1:8081 (empty: none)")
		taintWait    = flag.Duration("taint-wait-timeout", dradriver.DefaultTaintWaitTimeout, "how long a prepare call waits for a new taint to show up in the API")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "dra-test-driver: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := run(*driverName, *nodeName, *kubeconfig, *rootDir, *cdiDir, *devices, *broken, *taintBroken, *statsAddress, *taintWait); err != nil {
		klog.Background().Error(err, "dra-test-driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(driverName, nodeName, kubeconfig, rootDir, cdiDir string, devices int, broken string, taintBroken bool, statsAddress string, taintWait time.Duration) error {
	logger := klog.Background()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, logger)

	if devices < 1 || devices > dradriver.MaxDevices {
		return fmt.Errorf("--devices must be between 1 and %d, got %d", dradriver.MaxDevices, devices)
	}
	if nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name not set and no host name: %w", err)
		}
		nodeName = strings.ToLower(host)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	restConfig.UserAgent = "dra-test-driver"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	var brokenDevices []string
	for _, device := range strings.Split(broken, ",") {
		if device = strings.TrimSpace(device); device != "" {
			brokenDevices = append(brokenDevices, device)
		}
	}

	running, err := dradriver.Start(ctx, dradriver.Options{
		Config: dradriver.Config{
			DriverName:       driverName,
			NodeName:         nodeName,
			NumDevices:       devices,
			BrokenDevices:    brokenDevices,
			TaintBroken:      taintBroken,
			CDIDir:           cdiDir,
			KubeClient:       client,
			TaintWaitTimeout: taintWait,
		},
		KubeletRootDir: rootDir,
		StatsAddress:   statsAddress,
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
