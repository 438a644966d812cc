package dradriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

const (
	// DefaultDriverName is the driver name unless configured otherwise.
	DefaultDriverName = "driver.dra-failfast.test"
	// DefaultNumDevices is the number of devices unless configured otherwise.
	DefaultNumDevices = 4
	// MaxDevices is the most devices the driver publishes: all of them go
	// into one ResourceSlice, which can hold 64 devices when some have
	// taints.
	MaxDevices = 64
	// BrokenTaintKey is the key of the NoSchedule taint that taint mode
	// puts on a broken device.
	BrokenTaintKey = "dra-failfast.test/broken"
	// DeviceModel is the "model" attribute of every device.
	DeviceModel = "dra-failfast-test-device"
	// DefaultTaintWaitTimeout is how long a prepare call that tainted a
	// device waits for the taint to show up in the API.
	DefaultTaintWaitTimeout = 10 * time.Second
)

// ErrUnknownDevice is returned by SetBroken for a device the driver does not
// have.
var ErrUnknownDevice = errors.New("unknown device")

// DeviceName is the name of the device with index i.
func DeviceName(i int) string { return fmt.Sprintf("dev-%d", i) }

// Config configures a Driver.
type Config struct {
	// DriverName defaults to DefaultDriverName.
	DriverName string
	// NodeName is the node the driver runs on; it is also the name of its
	// pool. Required.
	NodeName string
	// NumDevices defaults to DefaultNumDevices.
	NumDevices int
	// BrokenDevices is the initial broken set.
	BrokenDevices []string
	// TaintBroken turns on taint mode.
	TaintBroken bool
	// CDIDir is where CDI specs are written. Required.
	CDIDir string
	// KubeClient, if set, is used to wait until a new taint is visible in
	// the API before a prepare call returns.
	KubeClient kubernetes.Interface
	// TaintWaitTimeout defaults to DefaultTaintWaitTimeout.
	TaintWaitTimeout time.Duration
	// OnFatalError, if set, is called for background errors which are not
	// recoverable (see kubeletplugin.DRAPlugin.HandleError).
	OnFatalError func(err error)
}

// Publisher publishes ResourceSlices; *kubeletplugin.Helper is one.
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Driver implements kubeletplugin.DRAPlugin. Start it with
// failfastplugin.Start so that its permanent errors reach the kubelet as
// such, then hand the helper to SetPublisher.
type Driver struct {
	driverName       string
	nodeName         string
	numDevices       int
	taintBroken      bool
	cdiDir           string
	kubeClient       kubernetes.Interface
	taintWaitTimeout time.Duration
	onFatalError     func(error)

	// publishMu serializes computing and publishing the ResourceSlice so
	// that an older state never overwrites a newer one.
	publishMu sync.Mutex

	// ready is set once the ResourceSlice is being published.
	ready atomic.Bool

	mu        sync.Mutex
	publisher Publisher
	broken    map[string]bool
	tainted   map[string]bool
	// attempts counts prepare calls per claim for Transient. Unlike the
	// stats it is not cleared by Reset.
	attempts map[types.UID]int64
	stats    map[types.UID]*ClaimStats
}

var _ kubeletplugin.DRAPlugin = &Driver{}

// New validates cfg and returns a driver. It does not start anything.
func New(cfg Config) (*Driver, error) {
	d := &Driver{
		driverName:       cfg.DriverName,
		nodeName:         cfg.NodeName,
		numDevices:       cfg.NumDevices,
		taintBroken:      cfg.TaintBroken,
		cdiDir:           cfg.CDIDir,
		kubeClient:       cfg.KubeClient,
		taintWaitTimeout: cfg.TaintWaitTimeout,
		onFatalError:     cfg.OnFatalError,
		broken:           map[string]bool{},
		tainted:          map[string]bool{},
		attempts:         map[types.UID]int64{},
		stats:            map[types.UID]*ClaimStats{},
	}
	if d.driverName == "" {
		d.driverName = DefaultDriverName
	}
	if d.numDevices == 0 {
		d.numDevices = DefaultNumDevices
	}
	if d.taintWaitTimeout == 0 {
		d.taintWaitTimeout = DefaultTaintWaitTimeout
	}
	if d.nodeName == "" {
		return nil, errors.New("node name must be set")
	}
	if d.cdiDir == "" {
		return nil, errors.New("CDI directory must be set")
	}
	if d.numDevices < 1 || d.numDevices > MaxDevices {
		return nil, fmt.Errorf("number of devices must be between 1 and %d, got %d", MaxDevices, d.numDevices)
	}
	for _, device := range cfg.BrokenDevices {
		if !d.hasDevice(device) {
			return nil, fmt.Errorf("broken device %q: %w (have %s...%s)", device, ErrUnknownDevice, DeviceName(0), DeviceName(d.numDevices-1))
		}
		d.broken[device] = true
	}
	return d, nil
}

// DriverName returns the name of the driver.
func (d *Driver) DriverName() string { return d.driverName }

// PoolName returns the name of the driver's pool, which is its node name.
func (d *Driver) PoolName() string { return d.nodeName }

func (d *Driver) hasDevice(name string) bool {
	for i := range d.numDevices {
		if DeviceName(i) == name {
			return true
		}
	}
	return false
}

// Resources returns what the driver publishes now: one pool named after the
// node with one slice holding all devices, broken devices tainted in taint
// mode once a prepare call found them broken.
func (d *Driver) Resources() resourceslice.DriverResources {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.resourcesLocked()
}

func (d *Driver) resourcesLocked() resourceslice.DriverResources {
	devices := make([]resourceapi.Device, 0, d.numDevices)
	for i := range d.numDevices {
		name := DeviceName(i)
		device := resourceapi.Device{
			Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptrTo(int64(i))},
				"model": {StringValue: ptrTo(DeviceModel)},
			},
		}
		if d.tainted[name] {
			device.Taints = []resourceapi.DeviceTaint{{
				Key:    BrokenTaintKey,
				Value:  "true",
				Effect: resourceapi.DeviceTaintEffectNoSchedule,
			}}
		}
		devices = append(devices, device)
	}
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			d.nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
		},
	}
}

// SetPublisher sets where the ResourceSlice gets published (normally the
// kubeletplugin.Helper) and publishes it. With the helper, this blocks until
// the ResourceSlice informer has synced, that is until the API server
// answers (or ctx is canceled). Once it returns nil, the driver is ready.
func (d *Driver) SetPublisher(ctx context.Context, publisher Publisher) error {
	d.mu.Lock()
	d.publisher = publisher
	d.mu.Unlock()
	if err := d.publish(ctx); err != nil {
		return err
	}
	d.ready.Store(true)
	return nil
}

// Ready tells whether SetPublisher succeeded.
func (d *Driver) Ready() bool { return d.ready.Load() }

func (d *Driver) publish(ctx context.Context) error {
	d.publishMu.Lock()
	defer d.publishMu.Unlock()
	d.mu.Lock()
	publisher, resources := d.publisher, d.resourcesLocked()
	d.mu.Unlock()
	if publisher == nil {
		return nil
	}
	if err := publisher.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish ResourceSlice: %w", err)
	}
	return nil
}

// SetBroken adds device to the broken set or removes it. Removing it also
// removes its taint.
func (d *Driver) SetBroken(ctx context.Context, device string, broken bool) error {
	if !d.hasDevice(device) {
		return fmt.Errorf("device %q: %w", device, ErrUnknownDevice)
	}
	d.mu.Lock()
	untaint := !broken && d.tainted[device]
	if broken {
		d.broken[device] = true
	} else {
		delete(d.broken, device)
		delete(d.tainted, device)
	}
	d.mu.Unlock()
	klog.FromContext(ctx).Info("Changed broken set", "device", device, "broken", broken)
	if untaint {
		return d.publish(ctx)
	}
	return nil
}

// Stats returns a copy of the counters.
func (d *Driver) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	stats := Stats{
		Claims:         make(map[string]ClaimStats, len(d.stats)),
		BrokenDevices:  sortedKeys(d.broken),
		TaintedDevices: sortedKeys(d.tainted),
	}
	for uid, claim := range d.stats {
		c := *claim
		c.Devices = slices.Clone(claim.Devices)
		stats.Claims[string(uid)] = c
	}
	return stats
}

// Reset clears the counters. It changes no behavior: the count of prepare
// calls behind Transient failures, the broken set and the taints stay.
func (d *Driver) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = map[types.UID]*ClaimStats{}
}

func (d *Driver) claimStatsLocked(uid types.UID, namespace, name string) *ClaimStats {
	claim := d.stats[uid]
	if claim == nil {
		claim = &ClaimStats{Namespace: namespace, Name: name}
		d.stats[uid] = claim
	}
	return claim
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		result[claim.UID] = d.prepareClaim(ctx, claim)
	}
	return result, nil
}

func (d *Driver) prepareClaim(ctx context.Context, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	logger := klog.FromContext(ctx)
	now := time.Now()
	d.mu.Lock()
	d.attempts[claim.UID]++
	attempt := d.attempts[claim.UID]
	stats := d.claimStatsLocked(claim.UID, claim.Namespace, claim.Name)
	stats.PrepareCalls++
	stats.LastPrepare = &now
	d.mu.Unlock()

	devices, allocated, err := d.prepare(ctx, claim, attempt)

	d.mu.Lock()
	// Reset may have replaced the entry in the meantime.
	stats = d.claimStatsLocked(claim.UID, claim.Namespace, claim.Name)
	stats.Devices = allocated
	stats.LastError, stats.Permanent, stats.Prepared = "", false, err == nil
	if err != nil {
		stats.LastError, stats.Permanent = err.Error(), failfastplugin.IsPermanent(err)
	}
	d.mu.Unlock()

	if err != nil {
		logger.Info("Prepare failed", "claim", klog.KObj(claim), "claimUID", claim.UID, "attempt", attempt, "permanent", failfastplugin.IsPermanent(err), "err", err)
		return kubeletplugin.PrepareResult{Err: err}
	}
	logger.V(2).Info("Prepared", "claim", klog.KObj(claim), "claimUID", claim.UID, "attempt", attempt, "devices", allocated)
	return kubeletplugin.PrepareResult{Devices: devices}
}

// prepare returns the devices for the kubelet and the names of the devices
// allocated to claim by this driver.
func (d *Driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim, attempt int64) ([]kubeletplugin.Device, []string, error) {
	if claim.Status.Allocation == nil {
		// The helper checks this already.
		return nil, nil, fmt.Errorf("claim %s is not allocated", klog.KObj(claim))
	}
	var results []resourceapi.DeviceRequestAllocationResult
	var allocated []string
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver == d.driverName {
			results = append(results, result)
			allocated = append(allocated, result.Device)
		}
	}

	behavior, err := d.claimBehavior(claim)
	if err != nil {
		// The claim cannot change: retrying can never help.
		return nil, allocated, failfastplugin.Permanent(err)
	}
	if behavior.prepare == PreparePermanent {
		return nil, allocated, failfastplugin.Permanent(fmt.Errorf("claim %s: %s", klog.KObj(claim), messageOr(behavior.message, "injected permanent failure")))
	}

	var broken []string
	for _, result := range results {
		if result.Pool != d.nodeName || !d.hasDevice(result.Device) {
			return nil, allocated, failfastplugin.Permanent(fmt.Errorf("claim %s: request %q: device %s/%s does not exist in driver %s on node %s",
				klog.KObj(claim), result.Request, result.Pool, result.Device, d.driverName, d.nodeName))
		}
		d.mu.Lock()
		isBroken := d.broken[result.Device]
		d.mu.Unlock()
		if isBroken && !slices.Contains(broken, result.Device) {
			broken = append(broken, result.Device)
		}
	}
	if len(broken) > 0 {
		if d.taintBroken {
			d.taint(ctx, broken)
		}
		msgs := make([]string, len(broken))
		for i, device := range broken {
			msgs[i] = fmt.Sprintf("device %s is broken", device)
		}
		return nil, allocated, failfastplugin.Permanent(fmt.Errorf("claim %s: %s", klog.KObj(claim), strings.Join(msgs, ", ")))
	}

	if behavior.prepare == PrepareTransient && (behavior.failures == 0 || attempt <= behavior.failures) {
		of := "of unlimited"
		if behavior.failures > 0 {
			of = fmt.Sprintf("of %d", behavior.failures)
		}
		return nil, allocated, fmt.Errorf("claim %s: %s (failure %d %s)", klog.KObj(claim), messageOr(behavior.message, "injected transient failure"), attempt, of)
	}

	devices, err := d.writeCDI(claim, results)
	return devices, allocated, err
}

func messageOr(message, fallback string) string {
	if message == "" {
		return fallback
	}
	return message
}

// writeCDI writes the CDI spec of the claim: one CDI device per allocated
// device, each setting DRA_DEVICE_<REQUEST> (the devices of the request,
// comma-separated) and DRA_CLAIM.
func (d *Driver) writeCDI(claim *resourceapi.ResourceClaim, results []resourceapi.DeviceRequestAllocationResult) ([]kubeletplugin.Device, error) {
	if len(results) == 0 {
		return nil, nil
	}
	perRequest := map[string][]string{}
	for _, result := range results {
		request := resourceclaim.BaseRequestRef(result.Request)
		perRequest[request] = append(perRequest[request], result.Device)
	}
	spec := &cdiSpec{Version: CDIVersion, Kind: CDIKind}
	devices := make([]kubeletplugin.Device, 0, len(results))
	used := map[string]bool{}
	for i, result := range results {
		request := resourceclaim.BaseRequestRef(result.Request)
		name := cdiDeviceName(string(claim.UID), result.Request, result.Device)
		if used[name] {
			name = cdiDeviceName(string(claim.UID), result.Request, result.Device, fmt.Sprint(i))
		}
		used[name] = true
		spec.Devices = append(spec.Devices, cdiDevice{
			Name: name,
			ContainerEdits: cdiContainerEdits{Env: []string{
				"DRA_DEVICE_" + envName(request) + "=" + strings.Join(perRequest[request], ","),
				"DRA_CLAIM=" + claim.Namespace + "/" + claim.Name,
			}},
		})
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{result.Request},
			PoolName:     result.Pool,
			DeviceName:   result.Device,
			CDIDeviceIDs: []string{CDIKind + "=" + name},
			ShareID:      result.ShareID,
		})
	}
	if err := writeCDISpec(CDISpecPath(d.cdiDir, d.driverName, claim.UID), spec); err != nil {
		// Perhaps a full disk: worth retrying.
		return nil, fmt.Errorf("claim %s: %w", klog.KObj(claim), err)
	}
	return devices, nil
}

// taint publishes the broken taint on devices (those still broken) and
// waits until the API has it, so that the scheduler avoids the devices
// before the kubelet fails the pod.
func (d *Driver) taint(ctx context.Context, devices []string) {
	logger := klog.FromContext(ctx)
	d.mu.Lock()
	var changed, wanted []string
	for _, device := range devices {
		if !d.broken[device] {
			continue
		}
		wanted = append(wanted, device)
		if !d.tainted[device] {
			d.tainted[device] = true
			changed = append(changed, device)
		}
	}
	d.mu.Unlock()
	if len(changed) > 0 {
		logger.Info("Tainting broken devices", "devices", changed, "taint", BrokenTaintKey)
		if err := d.publish(ctx); err != nil {
			logger.Error(err, "Tainting broken devices failed", "devices", changed)
			return
		}
	}
	if d.kubeClient == nil || len(wanted) == 0 {
		return
	}
	// Also wait when another call published the taint: it may still be
	// on its way to the API server.
	if err := d.waitForTaints(ctx, wanted); err != nil {
		logger.Error(err, "Taint not visible in the API, failing the claim anyway", "devices", wanted)
	}
}

func (d *Driver) waitForTaints(ctx context.Context, devices []string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d.taintWaitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := d.kubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + d.nodeName + "," + resourceapi.ResourceSliceSelectorDriver + "=" + d.driverName,
		})
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Listing ResourceSlices failed, retrying", "err", err)
			return false, nil
		}
		found := map[string]bool{}
		for _, slice := range list.Items {
			if slice.Spec.Driver != d.driverName || slice.Spec.NodeName == nil || *slice.Spec.NodeName != d.nodeName {
				continue
			}
			for _, device := range slice.Spec.Devices {
				for _, taint := range device.Taints {
					if taint.Key == BrokenTaintKey && taint.Effect == resourceapi.DeviceTaintEffectNoSchedule {
						found[device.Name] = true
					}
				}
			}
		}
		for _, device := range devices {
			if !found[device] {
				return false, nil
			}
		}
		return true, nil
	})
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin. It removes
// the CDI spec of each claim; a claim that is not prepared is no error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := removeCDISpec(CDISpecPath(d.cdiDir, d.driverName, claim.UID))
		now := time.Now()
		d.mu.Lock()
		stats := d.claimStatsLocked(claim.UID, claim.Namespace, claim.Name)
		stats.UnprepareCalls++
		stats.LastUnprepare = &now
		if err == nil {
			stats.Prepared = false
		}
		d.mu.Unlock()
		if err != nil {
			logger.Error(err, "Unprepare failed", "claim", claim)
		} else {
			logger.V(2).Info("Unprepared", "claim", claim)
		}
		result[claim.UID] = err
	}
	return result, nil
}

// HandleError implements kubeletplugin.DRAPlugin.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.onFatalError != nil {
		d.onFatalError(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: the driver does
// not report device health (Run turns the health service off).
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func ptrTo[T any](v T) *T { return &v }
