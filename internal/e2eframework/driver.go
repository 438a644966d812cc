// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2eframework runs the test DRA driver next to a local cluster and
// builds the objects that the e2e_node tests, the demo and the benchmarks
// use, so that all of them exercise the same setup.
package e2eframework

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

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

// DefaultDevices is the number of devices of a driver started here unless
// DriverOptions say otherwise.
const DefaultDevices = 8

// DriverOptions configure the test driver process.
type DriverOptions struct {
	// Binary is the dra-test-driver binary. Default: <repo>/_output/bin/dra-test-driver.
	Binary string
	// DriverName defaults to testdriver.DefaultDriverName. Drivers with
	// different names can run side by side.
	DriverName string
	// Devices is the number of devices to publish (1 to
	// testdriver.MaxDevices). Default DefaultDevices.
	Devices int
	// TaintBroken makes the driver taint a broken device before failing a claim on it.
	TaintBroken bool
	// GRPCAPI chooses the DRA gRPC services: "" (both), "v1", "v1beta1" or "both".
	GRPCAPI testdriver.GRPCAPI
	// Webhook makes the driver serve its validating admission webhook on
	// 127.0.0.1 with a serving certificate from the cluster CA; register it
	// with RegisterWebhook.
	Webhook bool
	// GeneratedClaims is what its webhook does with invalid claims generated
	// for pods (admission.GeneratedClaims; empty: deny).
	GeneratedClaims admission.GeneratedClaims
}

// Driver is a dra-test-driver process, running or not: Kill or Stop end
// it, Start starts a new one with the same options.
type Driver struct {
	opts           DriverOptions
	kubeletRootDir string
	// webhookAddress is where the webhook listens (host:port), empty
	// without one. It stays the same across restarts.
	webhookAddress string

	// proc is the current or last process, nil before the first Start.
	proc *process

	// Client talks to the HTTP endpoint of the current process. Start
	// changes its BaseURL: do not use it concurrently with Start.
	Client testdriver.Client
	// LogFile is where the driver's output goes (appended, across
	// restarts).
	LogFile string
}

// StartDriver starts the test driver as a host process registered with the
// cluster's kubelet, and waits until its ResourceSlices are published.
func StartDriver(ctx context.Context, c *localcluster.Cluster, opts DriverOptions) (*Driver, error) {
	if opts.Binary == "" {
		binary, err := localcluster.OutputPath("bin", "dra-test-driver")
		if err != nil {
			return nil, err
		}
		opts.Binary = binary
	}
	if opts.DriverName == "" {
		opts.DriverName = testdriver.DefaultDriverName
	}
	if opts.Devices == 0 {
		opts.Devices = DefaultDevices
	}
	if opts.Devices < 1 || opts.Devices > testdriver.MaxDevices {
		return nil, fmt.Errorf("test driver: Devices must be between 1 and %d, got %d", testdriver.MaxDevices, opts.Devices)
	}
	if _, err := testdriver.ParseGRPCAPI(string(opts.GRPCAPI)); err != nil {
		return nil, fmt.Errorf("test driver: %w", err)
	}
	logName := "dra-test-driver.log"
	if opts.DriverName != testdriver.DefaultDriverName {
		logName = "dra-test-driver-" + opts.DriverName + ".log"
	}
	d := &Driver{opts: opts, LogFile: filepath.Join(c.LogDir(), logName)}
	if err := d.Start(ctx, c); err != nil {
		return nil, err
	}
	return d, nil
}

// Name is the driver name.
func (d *Driver) Name() string { return d.opts.DriverName }

// Devices is the number of devices the driver publishes.
func (d *Driver) Devices() int { return d.opts.Devices }

// DeviceClass is the name of the DeviceClass for the driver's devices that
// EnsureDeviceClassFor creates.
func (d *Driver) DeviceClass() string { return DeviceClassFor(d.opts.DriverName) }

// DRASocketPath is the DRA gRPC socket of the driver: deleting it while the
// driver runs makes the kubelet lose it ("socket gone").
func (d *Driver) DRASocketPath() string {
	return testdriver.DRASocketPath(d.kubeletRootDir, d.opts.DriverName)
}

// RegistrationSocketPath is the socket in the kubelet's plugins_registry
// through which the driver registers.
func (d *Driver) RegistrationSocketPath() string {
	return testdriver.RegistrationSocketPath(d.kubeletRootDir, d.opts.DriverName)
}

// process is one driver process.
type process struct {
	cmd *exec.Cmd
	// exited is closed when cmd ended; err is its result then.
	exited chan struct{}
	err    error
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Running tells whether the current process runs.
func (d *Driver) Running() bool {
	return d != nil && d.proc != nil && d.proc.running()
}

// Start starts a new driver process with the driver's options, after Kill
// or Stop, and waits until it is healthy and the ResourceSlices with all its
// devices are there. The HTTP port changes: Client follows it. The new
// process republishes what the old one published, so the ResourceSlices
// may be the old ones; if the kubelet deletes them meanwhile (it does so 30s
// after it lost a driver), Start has them published again.
func (d *Driver) Start(ctx context.Context, c *localcluster.Cluster) error {
	if d.Running() {
		return fmt.Errorf("test driver %s is still running (pid %d)", d.opts.DriverName, d.PID())
	}
	if _, err := os.Stat(d.opts.Binary); err != nil {
		return fmt.Errorf("test driver binary: %w (build it with make build)", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(d.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{
		"--driver-name=" + d.opts.DriverName,
		"--node-name=" + c.NodeName(),
		"--kubeconfig=" + c.Kubeconfig(),
		"--kubelet-root-dir=" + c.KubeletRootDir(),
		"--cdi-dir=" + c.CDISpecDir(),
		"--devices=" + strconv.Itoa(d.opts.Devices),
		"--taint-broken=" + strconv.FormatBool(d.opts.TaintBroken),
		"--stats-address=" + address,
		"-v=4",
	}
	if d.opts.GRPCAPI != "" {
		args = append(args, "--grpc-api="+string(d.opts.GRPCAPI))
	}
	if d.opts.Webhook {
		webhookArgs, err := d.webhookArgs(c)
		if err != nil {
			return err
		}
		args = append(args, webhookArgs...)
	}
	cmd := exec.Command(d.opts.Binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.opts.Binary, err)
	}
	proc := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		close(proc.exited)
	}()
	d.proc = proc
	d.kubeletRootDir = c.KubeletRootDir()
	d.Client = testdriver.Client{BaseURL: "http://" + address}
	if err := d.waitForResourceSlices(ctx, c, nil); err != nil {
		_ = d.Stop()
		return err
	}
	return nil
}

// Restart stops the driver (SIGTERM) and starts a new process.
func (d *Driver) Restart(ctx context.Context, c *localcluster.Cluster) error {
	if err := d.Stop(); err != nil {
		return err
	}
	return d.Start(ctx, c)
}

// RestartKubelet restarts the cluster's kubelet with featureGates and waits
// until the driver has published its devices again. See RestartKubelet.
func (d *Driver) RestartKubelet(ctx context.Context, c *localcluster.Cluster, featureGates map[string]bool) error {
	return RestartKubelet(ctx, c, featureGates, d)
}

// RestartKubelet restarts the cluster's kubelet with featureGates and waits
// until each of drivers has published its devices again.
//
// A starting kubelet deletes all ResourceSlices of its node: its DRA plugin
// manager (k8s.io/kubernetes pkg/kubelet/cm/dra/plugin, NewDRAPluginManager,
// created when the container manager starts the DRA manager) does so in a
// background goroutine with one DeleteCollection (field selector
// spec.nodeName), no matter whether a driver has registered again
// meanwhile. It retries with exponential backoff (1s doubling, jitter, up to
// 5m) while the kubelet cannot read its Node object or the deletion fails
// (e.g. Unauthorized while it sorts out its credentials), so the deletion can
// come after the node is Ready and after the driver re-registered. A
// kubeletplugin driver notices it through its ResourceSlice informer but
// publishes again only after resourceslice.DefaultSyncDelay (30s). Until
// then new claims cannot be allocated.
//
// So for each driver this waits until none of the slices it had before the
// restart exists any more (the wipe happened, however late), then asks the
// driver to republish (POST /republish) every 2s until a complete set of
// new slices with all its devices is there. Should a driver have had no
// slices before the restart, the wipe cannot be observed and only the
// second step is done.
func RestartKubelet(ctx context.Context, c *localcluster.Cluster, featureGates map[string]bool, drivers ...*Driver) error {
	return ReplaceKubelet(ctx, c, c.KubeletPath(), featureGates, drivers...)
}

// ReplaceKubelet is RestartKubelet with another kubelet binary (the stock
// one instead of the fork, or back).
func ReplaceKubelet(ctx context.Context, c *localcluster.Cluster, kubeletPath string, featureGates map[string]bool, drivers ...*Driver) error {
	return ReplaceKubeletAfter(ctx, c, kubeletPath, featureGates, nil, drivers...)
}

// ReplaceKubeletAfter is ReplaceKubelet that runs whileStopped between the
// old kubelet's stop and the new one's start (localcluster's
// ReplaceKubeletAfter).
func ReplaceKubeletAfter(ctx context.Context, c *localcluster.Cluster, kubeletPath string, featureGates map[string]bool, whileStopped func(context.Context) error, drivers ...*Driver) error {
	old := make([]sets.Set[types.UID], len(drivers))
	for i, d := range drivers {
		slices, err := listDriverSlices(ctx, c.Client(), d.opts.DriverName, c.NodeName())
		if err != nil {
			return err
		}
		old[i] = sets.New[types.UID]()
		for _, slice := range slices {
			old[i].Insert(slice.UID)
		}
	}
	if err := c.ReplaceKubeletAfter(ctx, kubeletPath, featureGates, whileStopped); err != nil {
		return err
	}
	for i, d := range drivers {
		if err := d.waitForResourceSlices(ctx, c, old[i]); err != nil {
			return err
		}
	}
	return nil
}

// republishInterval is how often WaitForNewSlices asks the driver to
// republish while its slices are incomplete.
const republishInterval = 2 * time.Second

// waitForResourceSlices waits until the driver is running and healthy and
// its ResourceSlices on the node are a complete new pool: WaitForNewSlices.
func (d *Driver) waitForResourceSlices(ctx context.Context, c *localcluster.Cluster, old sets.Set[types.UID]) error {
	running := func() error {
		if !d.Running() {
			return fmt.Errorf("test driver %s exited: %v (log: %s)", d.opts.DriverName, d.proc.err, d.LogFile)
		}
		return nil
	}
	return WaitForNewSlices(ctx, c.Client(), &d.Client, d.opts.DriverName, c.NodeName(), d.opts.Devices, old, running)
}

// NodeSlices returns the UIDs of the ResourceSlices of driver on node and
// how many devices they publish: what WaitForNewSlices waits to see replaced
// after a kubelet restart.
func NodeSlices(ctx context.Context, client kubernetes.Interface, driver, node string) (sets.Set[types.UID], int, error) {
	slices, err := listDriverSlices(ctx, client, driver, node)
	if err != nil {
		return nil, 0, err
	}
	uids, devices := sets.New[types.UID](), 0
	for _, slice := range slices {
		uids.Insert(slice.UID)
		devices += len(slice.Spec.Devices)
	}
	return uids, devices, nil
}

// WaitForNewSlices waits, after a kubelet restart (see RestartKubelet),
// until the test driver reached through testDriver (named driver) is
// healthy and its ResourceSlices on node hold a complete pool with devices
// devices, none of them one of old. While a slice of old exists it just
// waits (the kubelet has yet to delete it); once they are gone and the pool
// is incomplete, it asks the driver to republish every republishInterval.
// running, if not nil, reports a driver that can no longer come back.
func WaitForNewSlices(ctx context.Context, client kubernetes.Interface, testDriver *testdriver.Client, driver, node string, devices int, old sets.Set[types.UID], running func() error) error {
	logger := klog.FromContext(ctx)
	var (
		lastRepublish time.Time
		state         string
	)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if running != nil {
			if err := running(); err != nil {
				return false, err
			}
		}
		if err := testDriver.Healthz(ctx); err != nil {
			state = fmt.Sprintf("not healthy: %v", err)
			return false, nil
		}
		slices, err := listDriverSlices(ctx, client, driver, node)
		if err != nil {
			state = err.Error()
			return false, nil
		}
		complete, why := poolComplete(slices, driver, node, devices, old)
		state = why
		if complete {
			return true, nil
		}
		for _, slice := range slices {
			if old.Has(slice.UID) {
				// The kubelet has yet to delete them; a republish now would change nothing.
				return false, nil
			}
		}
		if time.Since(lastRepublish) >= republishInterval {
			lastRepublish = time.Now()
			if err := testDriver.Republish(ctx); err != nil {
				logger.V(2).Info("Republishing failed, will retry", "driver", driver, "err", err)
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the test driver %s and its ResourceSlices on %s (%s): %w", driver, node, state, err)
	}
	return nil
}

// listDriverSlices lists the ResourceSlices of driver on node.
func listDriverSlices(ctx context.Context, client kubernetes.Interface, driver, node string) ([]resourceapi.ResourceSlice, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{
			resourceapi.ResourceSliceSelectorDriver:   driver,
			resourceapi.ResourceSliceSelectorNodeName: node,
		}.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	return list.Items, nil
}

// poolComplete tells whether the ResourceSlices of driver on node in slices
// make up a complete pool (all slices of its newest generation, as many as
// the pool says) with want devices, none of these slices being one of old.
// If not, it says why.
func poolComplete(slices []resourceapi.ResourceSlice, driver, node string, want int, old sets.Set[types.UID]) (bool, string) {
	var (
		generation int64
		pool       string
		mine       []resourceapi.ResourceSlice
	)
	for _, slice := range slices {
		if slice.Spec.Driver != driver || slice.Spec.NodeName == nil || *slice.Spec.NodeName != node {
			continue
		}
		if pool != "" && slice.Spec.Pool.Name != pool {
			return false, fmt.Sprintf("slices of two pools, %s and %s", pool, slice.Spec.Pool.Name)
		}
		pool = slice.Spec.Pool.Name
		generation = max(generation, slice.Spec.Pool.Generation)
		mine = append(mine, slice)
	}
	if len(mine) == 0 {
		return false, "no ResourceSlices"
	}
	var (
		current, devices int
		sliceCount       int64
	)
	for _, slice := range mine {
		if old.Has(slice.UID) {
			return false, fmt.Sprintf("ResourceSlice %s is still the one from before", slice.Name)
		}
		if slice.Spec.Pool.Generation != generation {
			continue
		}
		current++
		devices += len(slice.Spec.Devices)
		sliceCount = slice.Spec.Pool.ResourceSliceCount
	}
	if int64(current) != sliceCount {
		return false, fmt.Sprintf("%d of %d ResourceSlices of pool generation %d", current, sliceCount, generation)
	}
	if devices != want {
		return false, fmt.Sprintf("%d devices, want %d", devices, want)
	}
	return true, fmt.Sprintf("%d devices in %d ResourceSlices", devices, current)
}

// PID is the process ID of the current (or last) driver process.
func (d *Driver) PID() int { return d.proc.cmd.Process.Pid }

// Kill ends the driver with SIGKILL, as a crash would: its sockets stay
// behind. It waits until the process is gone. The kubelet deletes the
// driver's ResourceSlices 30s after it lost the connection (its
// defaultWipingDelay) unless a driver of that name is connected again by
// then.
func (d *Driver) Kill() error {
	if !d.Running() {
		return nil
	}
	if err := d.proc.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill test driver %s: %w", d.opts.DriverName, err)
	}
	<-d.proc.exited
	return nil
}

// Stop ends the driver with SIGTERM (SIGKILL after 10s) and waits for it.
// A driver stopped like this removes its sockets; its ResourceSlices stay.
func (d *Driver) Stop() error {
	if !d.Running() {
		return nil
	}
	_ = d.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.proc.exited:
	case <-time.After(10 * time.Second):
		_ = d.proc.cmd.Process.Kill()
		<-d.proc.exited
		return errors.New("test driver did not stop on SIGTERM, killed")
	}
	return nil
}

// PodClaim returns the driver's counters for the claim that the pod
// namespace/pod got from a ResourceClaimTemplate (named "<pod>-<claim>-<suffix>").
func PodClaim(stats *testdriver.Stats, namespace, pod string) (testdriver.ClaimStats, bool) {
	for _, claim := range stats.Claims {
		if claim.Namespace == namespace && strings.HasPrefix(claim.Name, pod+"-") {
			return claim, true
		}
	}
	return testdriver.ClaimStats{}, false
}
