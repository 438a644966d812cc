// Package framework runs the test DRA driver next to a local cluster and
// builds the objects that the e2e_node tests, the demo and the benchmarks
// use, so that all of them exercise the same setup.
package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dra-failfast/dra-failfast/test/dradriver"
	"github.com/dra-failfast/dra-failfast/test/localcluster"
)

// DriverOptions configure the test driver process.
type DriverOptions struct {
	// Binary is the dra-test-driver binary. Default: <repo>/_output/bin/dra-test-driver.
	Binary string
	// Devices is the number of devices to publish. Default 8.
	Devices int
	// TaintBroken makes the driver taint a broken device before failing a claim on it.
	TaintBroken bool
}

// Driver is a running dra-test-driver process.
type Driver struct {
	cmd     *exec.Cmd
	done    chan error
	devices int
	Client  dradriver.Client
	// LogFile is where the driver's output goes.
	LogFile string
}

// StartDriver starts the test driver as a host process registered with the
// cluster's kubelet, and waits until its ResourceSlice is published.
func StartDriver(ctx context.Context, c *localcluster.Cluster, opts DriverOptions) (*Driver, error) {
	if opts.Binary == "" {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return nil, err
		}
		opts.Binary = filepath.Join(root, "_output", "bin", "dra-test-driver")
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("test driver binary: %w (build it with make build)", err)
	}
	if opts.Devices == 0 {
		opts.Devices = 8
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(c.LogDir(), "dra-test-driver.log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	defer func() { _ = out.Close() }()
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(opts.Binary,
		"--node-name="+c.NodeName(),
		"--kubeconfig="+c.Kubeconfig(),
		"--kubelet-root-dir="+c.KubeletRootDir(),
		"--cdi-dir="+c.CDISpecDir(),
		"--devices="+strconv.Itoa(opts.Devices),
		"--taint-broken="+strconv.FormatBool(opts.TaintBroken),
		"--stats-address="+address,
		"-v=4",
	)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.Binary, err)
	}
	d := &Driver{cmd: cmd, done: make(chan error, 1), devices: opts.Devices, Client: dradriver.Client{BaseURL: "http://" + address}, LogFile: logFile}
	go func() { d.done <- cmd.Wait() }()
	if err := d.waitForResourceSlice(ctx, c, nil); err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

// RestartKubelet restarts the cluster's kubelet with featureGates and waits
// until the driver has published its devices again: a starting kubelet
// deletes all ResourceSlices of its node, and a kubeletplugin driver
// republishes them only after its ResourceSlice sync delay (30s by
// default). Until then new claims cannot be allocated.
func (d *Driver) RestartKubelet(ctx context.Context, c *localcluster.Cluster, featureGates map[string]bool) error {
	slices, err := c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceSlices: %w", err)
	}
	old := sets.New[types.UID]()
	for _, slice := range slices.Items {
		old.Insert(slice.UID)
	}
	if err := c.RestartKubelet(ctx, featureGates); err != nil {
		return err
	}
	return d.waitForResourceSlice(ctx, c, old)
}

// waitForResourceSlice waits until the driver is healthy and has a
// ResourceSlice with all its devices that is not one of old.
func (d *Driver) waitForResourceSlice(ctx context.Context, c *localcluster.Cluster, old sets.Set[types.UID]) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-d.done:
			d.done <- err
			return false, fmt.Errorf("test driver exited: %v (log: %s)", err, d.LogFile)
		default:
		}
		if d.Client.Healthz(ctx) != nil {
			return false, nil
		}
		slices, err := c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, slice := range slices.Items {
			if slice.Spec.Driver == dradriver.DefaultDriverName && len(slice.Spec.Devices) == d.devices && !old.Has(slice.UID) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the test driver and its ResourceSlice: %w", err)
	}
	return nil
}

// PID is the driver's process ID.
func (d *Driver) PID() int { return d.cmd.Process.Pid }

// Stop ends the driver with SIGTERM (SIGKILL after 10s) and waits for it.
func (d *Driver) Stop() error {
	if d == nil || d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		return errors.New("test driver did not stop on SIGTERM, killed")
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PodClaim returns the driver's counters for the claim that the pod
// namespace/pod got from a ResourceClaimTemplate (named "<pod>-<claim>-<suffix>").
func PodClaim(stats *dradriver.Stats, namespace, pod string) (dradriver.ClaimStats, bool) {
	for _, claim := range stats.Claims {
		if claim.Namespace == namespace && strings.HasPrefix(claim.Name, pod+"-") {
			return claim, true
		}
	}
	return dradriver.ClaimStats{}, false
}
