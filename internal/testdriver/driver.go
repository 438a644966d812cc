// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package testdriver

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
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
	// MaxDevices is the most devices the driver publishes.
	MaxDevices = 256
	// DevicesPerSlice is the most devices in one of the driver's
	// ResourceSlices: the API allows 64 devices in a slice that uses
	// per-device taints or other advanced features (as drivers that set
	// their own taints must), so more devices go into several slices of
	// the pool.
	DevicesPerSlice = 64
	// DeviceModel is the "model" attribute of every device.
	DeviceModel = "dra-failfast-test-device"
	// DefaultTaintWaitTimeout is how long a prepare call that taints a
	// device waits for the API server to store its DeviceTaintRule: the
	// library's default.
	DefaultTaintWaitTimeout = failfastplugin.DefaultDeviceFaultWaitTimeout
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
	// TaintBroken turns on taint mode: a claim on a broken device fails
	// with failfastplugin.DeviceFault instead of a plain permanent error,
	// so that the library taints the device.
	TaintBroken bool
	// CDIDir is where CDI specs are written. Required.
	CDIDir string
	// KubeClient is the client of Start, for the kubelet plugin and for
	// the library's DeviceTaintRules.
	KubeClient kubernetes.Interface
	// TaintWaitTimeout bounds how long a prepare call waits for the API
	// server to store a new DeviceTaintRule (failfastplugin's
	// DeviceFaultConfig.WaitTimeout): 0 or negative is
	// DefaultTaintWaitTimeout.
	TaintWaitTimeout time.Duration
	// OnFatalError, if set, is called for background errors which are not
	// recoverable (see kubeletplugin.DRAPlugin.HandleError).
	OnFatalError func(err error)
	// APIBrownout, if set, is the switch of KubeClient's brownout
	// (POST /brownout): the client's transport must be wrapped with it.
	APIBrownout *APIBrownout
}

// Publisher publishes ResourceSlices; *kubeletplugin.Helper and
// *failfastplugin.Helper are.
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// faultPublisher is a Publisher that also keeps the device faults which
// taint mode reports: *failfastplugin.Helper and
// *failfastplugin.DeviceFaults are.
type faultPublisher interface {
	Publisher
	ClearDeviceFault(ctx context.Context, devices ...failfastplugin.DeviceID) error
	TaintedDevices() []failfastplugin.DeviceID
}

// Driver implements kubeletplugin.DRAPlugin. Start it with
// failfastplugin.StartWithDeviceFaults so that its permanent errors reach
// the kubelet as such and taint mode taints, then hand the helper to
// SetPublisher.
type Driver struct {
	brownout     *APIBrownout
	driverName   string
	nodeName     string
	numDevices   int
	taintBroken  bool
	cdiDir       string
	onFatalError func(error)

	// publishMu serializes computing and publishing the ResourceSlice so
	// that an older state never overwrites a newer one.
	publishMu sync.Mutex

	// ready is set once the ResourceSlice is being published.
	ready atomic.Bool

	mu        sync.Mutex
	publisher Publisher
	// faults is the publisher if it keeps device faults, else nil.
	faults faultPublisher
	broken map[string]bool
	// attempts counts prepare calls per claim for Transient. Unlike the
	// stats it is not cleared by Reset.
	attempts map[types.UID]int64
	// unprepareFailures is the unprepareFailures of each claim as seen by
	// its last prepare call: NodeUnprepareResources only gets the claim's
	// namespace, name and UID. unprepareAttempts counts unprepare calls
	// per claim. Neither is cleared by Reset.
	unprepareFailures map[types.UID]int64
	unprepareAttempts map[types.UID]int64
	// overrides are the behaviors set per namespace with SetBehavior.
	overrides map[string]*override
	stats     map[types.UID]*ClaimStats
}

// override is the behavior of the claims of one namespace, set at runtime.
type override struct {
	spec     BehaviorSpec
	behavior effectiveBehavior
	// attempts and unprepareAttempts count the calls per claim made while
	// this override is set: a new SetBehavior starts from zero.
	attempts          map[types.UID]int64
	unprepareAttempts map[types.UID]int64
}

var _ kubeletplugin.DRAPlugin = &Driver{}

// New validates cfg and returns a driver. It does not start anything.
func New(cfg Config) (*Driver, error) {
	d := &Driver{
		brownout:          cfg.APIBrownout,
		driverName:        cfg.DriverName,
		nodeName:          cfg.NodeName,
		numDevices:        cfg.NumDevices,
		taintBroken:       cfg.TaintBroken,
		cdiDir:            cfg.CDIDir,
		onFatalError:      cfg.OnFatalError,
		broken:            map[string]bool{},
		attempts:          map[types.UID]int64{},
		unprepareFailures: map[types.UID]int64{},
		unprepareAttempts: map[types.UID]int64{},
		overrides:         map[string]*override{},
		stats:             map[types.UID]*ClaimStats{},
	}
	if d.driverName == "" {
		d.driverName = DefaultDriverName
	}
	if d.numDevices == 0 {
		d.numDevices = DefaultNumDevices
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
// node with the devices in slices of at most DevicesPerSlice devices. The
// taints of broken devices are not in it: failfastplugin adds them when it
// publishes.
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
		devices = append(devices, device)
	}
	var poolSlices []resourceslice.Slice
	for chunk := range slices.Chunk(devices, DevicesPerSlice) {
		poolSlices = append(poolSlices, resourceslice.Slice{Devices: chunk})
	}
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			d.nodeName: {Slices: poolSlices},
		},
	}
}

// SetPublisher sets where the ResourceSlice gets published (normally the
// kubeletplugin.Helper) and publishes it. With the helper, this blocks until
// the ResourceSlice informer has synced, that is until the API server
// answers (or ctx is canceled). Once it returns nil, the driver is ready.
// A publisher that keeps device faults (failfastplugin.Helper) is also where
// SetBroken clears them and Stats finds the tainted devices.
func (d *Driver) SetPublisher(ctx context.Context, publisher Publisher) error {
	d.mu.Lock()
	d.publisher = publisher
	d.faults, _ = publisher.(faultPublisher)
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

// ErrNotPublishing is returned by Republish before SetPublisher.
var ErrNotPublishing = errors.New("the driver does not publish ResourceSlices yet")

// Republish hands the current resources to the publisher again, now.
//
// With the kubeletplugin helper this is what brings back ResourceSlices that
// someone else deleted (a starting kubelet deletes all ResourceSlices of its
// node): the helper's ResourceSlice controller syncs a pool right away when
// it gets resources, changed or not (Controller.Update queues every pool
// without delay), and creates the slices that are missing from its informer
// cache. On its own it notices a deletion through its informer but waits for
// resourceslice.DefaultSyncDelay (30s, which kubeletplugin does not let a
// driver change) before it syncs. A Republish that comes before the informer
// saw the deletion finds the slices still cached and changes nothing, so the
// caller has to repeat it until the slices are back.
func (d *Driver) Republish(ctx context.Context) error {
	d.mu.Lock()
	publishing := d.publisher != nil
	d.mu.Unlock()
	if !publishing {
		return ErrNotPublishing
	}
	klog.FromContext(ctx).V(2).Info("Republishing ResourceSlices")
	return d.publish(ctx)
}

// SetBroken adds device to the broken set or removes it. Removing it also
// clears its fault in failfastplugin, which removes its taint.
func (d *Driver) SetBroken(ctx context.Context, device string, broken bool) error {
	if !d.hasDevice(device) {
		return fmt.Errorf("device %q: %w", device, ErrUnknownDevice)
	}
	d.mu.Lock()
	if broken {
		d.broken[device] = true
	} else {
		delete(d.broken, device)
	}
	faults := d.faults
	d.mu.Unlock()
	klog.FromContext(ctx).Info("Changed broken set", "device", device, "broken", broken)
	if !broken && faults != nil {
		if err := faults.ClearDeviceFault(ctx, d.deviceID(device)); err != nil {
			return fmt.Errorf("clear fault of device %s: %w", device, err)
		}
	}
	return nil
}

func (d *Driver) deviceID(device string) failfastplugin.DeviceID {
	return failfastplugin.DeviceID{Pool: d.nodeName, Device: device}
}

// Stats returns a copy of the counters.
func (d *Driver) Stats() Stats {
	d.mu.Lock()
	faults := d.faults
	d.mu.Unlock()
	// Asked without holding d.mu: the library has locks of its own.
	tainted := map[string]bool{}
	if faults != nil {
		for _, device := range faults.TaintedDevices() {
			if device.Pool == d.nodeName {
				tainted[device.Device] = true
			}
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	stats := Stats{
		Claims:         make(map[string]ClaimStats, len(d.stats)),
		BrokenDevices:  sortedKeys(d.broken),
		TaintedDevices: sortedKeys(tainted),
	}
	for uid, claim := range d.stats {
		c := *claim
		c.Devices = slices.Clone(claim.Devices)
		stats.Claims[string(uid)] = c
	}
	if len(d.overrides) > 0 {
		stats.Behaviors = make(map[string]BehaviorSpec, len(d.overrides))
		for namespace, o := range d.overrides {
			stats.Behaviors[namespace] = o.spec
		}
	}
	return stats
}

// SetBehavior makes the claims in namespace behave as spec says from now
// on, instead of as their opaque configs say (those are not even parsed):
// this is how a test changes the behavior of claims that exist already, or
// of claims of a restarted driver. spec is validated like a PrepareBehavior.
// Transient failures and unprepareFailures count the calls of each claim
// made while this override is set; setting it again starts from zero.
func (d *Driver) SetBehavior(ctx context.Context, namespace string, spec BehaviorSpec) error {
	if namespace == "" {
		return errors.New("namespace must not be empty")
	}
	if problems := spec.validate(); len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidBehavior, strings.Join(problems, "; "))
	}
	o := &override{
		spec:              spec,
		behavior:          behaviorOf(&spec),
		attempts:          map[types.UID]int64{},
		unprepareAttempts: map[types.UID]int64{},
	}
	d.mu.Lock()
	d.overrides[namespace] = o
	d.mu.Unlock()
	// Not the whole spec: the message may be megabytes long.
	klog.FromContext(ctx).Info("Set behavior override", "namespace", namespace, "prepare", spec.Prepare, "failures", spec.Failures,
		"messageBytes", len(spec.Message), "messageRepeat", spec.MessageRepeat, "unprepareFailures", spec.UnprepareFailures, "wire", spec.Wire)
	return nil
}

// ClearBehavior removes the override of namespace; its claims behave as
// their opaque configs say again. Removing an override that is not set is no
// error.
func (d *Driver) ClearBehavior(ctx context.Context, namespace string) {
	d.mu.Lock()
	delete(d.overrides, namespace)
	d.mu.Unlock()
	klog.FromContext(ctx).Info("Cleared behavior override", "namespace", namespace)
}

// ErrInvalidBehavior is returned by SetBehavior for a spec that does not
// validate.
var ErrInvalidBehavior = errors.New("invalid behavior")

// Reset clears the counters. It changes no behavior: the counts of prepare
// and unprepare calls behind injected failures, the behavior overrides, the
// broken set and the taints stay.
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
	override := d.overrides[claim.Namespace]
	if override != nil {
		override.attempts[claim.UID]++
		attempt = override.attempts[claim.UID]
	}
	stats := d.claimStatsLocked(claim.UID, claim.Namespace, claim.Name)
	stats.PrepareCalls++
	stats.LastPrepare = &now
	stats.PrepareTimes = record(stats.PrepareTimes, now)
	d.mu.Unlock()

	devices, allocated, behavior, injected, err := d.prepare(ctx, claim, attempt, override)

	d.mu.Lock()
	// What unprepare has to know about the claim.
	if behavior.unprepareFailures > 0 {
		d.unprepareFailures[claim.UID] = behavior.unprepareFailures
	} else {
		delete(d.unprepareFailures, claim.UID)
	}
	// Reset may have replaced the entry in the meantime.
	stats = d.claimStatsLocked(claim.UID, claim.Namespace, claim.Name)
	answered := time.Now()
	stats.LastPrepareAnswered = &answered
	stats.Devices = allocated
	stats.LastError, stats.Permanent, stats.Prepared = "", false, err == nil
	if err != nil {
		stats.LastError, stats.Permanent = err.Error(), failfastplugin.IsPermanent(err)
	}
	d.mu.Unlock()

	if err != nil {
		logger.Info("Prepare failed", "claim", klog.KObj(claim), "claimUID", claim.UID, "attempt", attempt, "override", override != nil,
			"permanent", failfastplugin.IsPermanent(err), "err", abbreviateErr(err))
		if injected && behavior.wire != nil {
			if rec := wireRecorderFrom(ctx); rec != nil {
				rec.add(claim.UID, wireAction{spec: behavior.wire, text: err.Error()})
			} else {
				logger.Info("Warning: wire behavior ignored, the driver's gRPC interceptor is not installed", "claim", klog.KObj(claim))
			}
		}
		return kubeletplugin.PrepareResult{Err: err}
	}
	logger.V(2).Info("Prepared", "claim", klog.KObj(claim), "claimUID", claim.UID, "attempt", attempt, "devices", allocated)
	return kubeletplugin.PrepareResult{Devices: devices}
}

// abbreviateErr keeps oversized injected messages out of the log.
func abbreviateErr(err error) string {
	const maxLen = 1024
	msg := err.Error()
	if len(msg) > maxLen {
		return fmt.Sprintf("%s... (%d bytes)", msg[:maxLen], len(msg))
	}
	return msg
}

// prepare returns the devices for the kubelet, the names of the devices
// allocated to claim by this driver, the behavior it followed and whether
// the error is the injected failure of that behavior (to which the wire
// behavior applies).
func (d *Driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim, attempt int64, override *override) (devices []kubeletplugin.Device, allocated []string, behavior effectiveBehavior, injected bool, err error) {
	if claim.Status.Allocation == nil {
		// The helper checks this already.
		return nil, nil, behavior, false, fmt.Errorf("claim %s is not allocated", klog.KObj(claim))
	}
	var results []resourceapi.DeviceRequestAllocationResult
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver == d.driverName {
			results = append(results, result)
			allocated = append(allocated, result.Device)
		}
	}

	if override != nil {
		behavior = override.behavior
	} else {
		behavior, err = d.claimBehavior(ctx, claim)
		if err != nil {
			// Invalid config is already permanent (the claim cannot
			// change); a validation that failed for another reason
			// is worth retrying.
			return nil, allocated, behavior, false, err
		}
	}
	if behavior.prepare == PreparePermanent {
		return nil, allocated, behavior, true, failfastplugin.Permanent(fmt.Errorf("claim %s: %s", klog.KObj(claim), behavior.errorText("injected permanent failure")))
	}

	var broken []string
	for _, result := range results {
		if result.Pool != d.nodeName || !d.hasDevice(result.Device) {
			return nil, allocated, behavior, false, failfastplugin.Permanent(fmt.Errorf("claim %s: request %q: device %s/%s does not exist in driver %s on node %s",
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
		msgs := make([]string, len(broken))
		ids := make([]failfastplugin.DeviceID, len(broken))
		for i, device := range broken {
			msgs[i] = fmt.Sprintf("device %s is broken", device)
			ids[i] = d.deviceID(device)
		}
		err := fmt.Errorf("claim %s: %s", klog.KObj(claim), strings.Join(msgs, ", "))
		if d.taintBroken {
			// failfastplugin taints the devices before the kubelet
			// gets the answer.
			return nil, allocated, behavior, false, failfastplugin.DeviceFaultClass("broken", err, ids...)
		}
		return nil, allocated, behavior, false, failfastplugin.Permanent(err)
	}

	if behavior.prepare == PrepareTransient && (behavior.failures == 0 || attempt <= behavior.failures) {
		of := "of unlimited"
		if behavior.failures > 0 {
			of = fmt.Sprintf("of %d", behavior.failures)
		}
		return nil, allocated, behavior, true, fmt.Errorf("claim %s: %s (failure %d %s)", klog.KObj(claim), behavior.errorText("injected transient failure"), attempt, of)
	}

	devices, err = d.writeCDI(claim, results)
	return devices, allocated, behavior, false, err
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

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin. It removes
// the CDI spec of each claim; a claim that is not prepared is no error. The
// first unprepareFailures calls of a claim fail instead, with the value of
// its namespace's override if there is one, else the one its last prepare
// call saw.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		d.mu.Lock()
		failures := d.unprepareFailures[claim.UID]
		d.unprepareAttempts[claim.UID]++
		attempt := d.unprepareAttempts[claim.UID]
		if override := d.overrides[claim.Namespace]; override != nil {
			failures = override.behavior.unprepareFailures
			override.unprepareAttempts[claim.UID]++
			attempt = override.unprepareAttempts[claim.UID]
		}
		d.mu.Unlock()

		var err error
		if attempt <= failures {
			err = fmt.Errorf("claim %s: injected unprepare failure (failure %d of %d)", klog.KRef(claim.Namespace, claim.Name), attempt, failures)
		} else {
			err = removeCDISpec(CDISpecPath(d.cdiDir, d.driverName, claim.UID))
		}
		now := time.Now()
		d.mu.Lock()
		stats := d.claimStatsLocked(claim.UID, claim.Namespace, claim.Name)
		stats.UnprepareCalls++
		stats.LastUnprepare = &now
		stats.UnprepareTimes = record(stats.UnprepareTimes, now)
		stats.LastUnprepareError = ""
		if err == nil {
			stats.Prepared = false
		} else {
			stats.LastUnprepareError = err.Error()
		}
		d.mu.Unlock()
		if err != nil {
			logger.Error(err, "Unprepare failed", "claim", claim, "attempt", attempt)
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
