// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

const (
	// DefaultDeviceFaultTaintKey is the key of the taint that marks a device
	// reported with DeviceFault, unless DeviceFaultConfig.TaintKey says
	// otherwise.
	DefaultDeviceFaultTaintKey = "dra-failfast.io/device-fault"
	// DefaultDeviceFaultWaitTimeout is how long a prepare call waits for new
	// taints to be visible in the API, unless DeviceFaultConfig.WaitTimeout
	// says otherwise. The kubelet gives a NodePrepareResources call 45s.
	DefaultDeviceFaultWaitTimeout = 10 * time.Second

	// The visibility wait lists the driver's ResourceSlices first after
	// taintPollFirst, then twice as long after each list up to
	// taintPollMax: the taint usually shows up within tens of
	// milliseconds, and the wait holds up the kubelet.
	taintPollFirst = 5 * time.Millisecond
	taintPollMax   = 200 * time.Millisecond
)

// DeviceFaultConfig configures how devices reported with DeviceFault get
// tainted. The zero value of each optional field selects its default.
type DeviceFaultConfig struct {
	// DriverName, NodeName and KubeClient are the driver's name, its node
	// and its client, as given to kubeletplugin in the options of the same
	// names. The library needs them to see its taints in the API, and
	// kubeletplugin does not reveal its options. StartWithDeviceFaults
	// passes them on to kubeletplugin.Start (after opts, so these win): a
	// driver need not repeat them as options. Required unless WaitTimeout is
	// negative.
	DriverName string
	NodeName   string
	KubeClient kubernetes.Interface

	// TaintKey is the key of the taint, a label key. Default:
	// DefaultDeviceFaultTaintKey.
	TaintKey string
	// TaintValue is the value of the taint, a label value. Default: the
	// text of the first fault reported for the device, turned into a label
	// value (at most 63 letters, digits, '-', '_', '.'), so that the taint
	// says why.
	TaintValue string
	// TaintEffect is the effect of the taint. Default: NoSchedule: the
	// scheduler gives new claims other devices, and pods that already use
	// the device keep running. NoExecute also evicts those.
	TaintEffect resourceapi.DeviceTaintEffect
	// WaitTimeout bounds how long a prepare call waits until new taints
	// are visible in the API before it returns the permanent error.
	// Default: DefaultDeviceFaultWaitTimeout. Negative: publish the taint,
	// do not wait.
	WaitTimeout time.Duration
}

// Publisher publishes a driver's ResourceSlices; *kubeletplugin.Helper is
// one.
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// DeviceFaults taints devices reported with DeviceFault. It keeps what the
// driver published last and adds a taint to every device with a fault, every
// time it publishes, until the driver clears the fault with ClearDeviceFault.
//
// StartWithDeviceFaults sets one up; a driver that assembles the kubeletplugin
// options itself uses NewDeviceFaults, starts kubeletplugin with Wrap's plugin
// and the GRPCInterceptor option, hands the helper to SetPublisher and then
// publishes through PublishResources.
type DeviceFaults struct {
	cfg DeviceFaultConfig
	// enabled is false for the DeviceFaults of Start: a DeviceFault then
	// fails the claim permanently without a taint, and says so.
	enabled bool

	// publishMu serializes computing and publishing the resources, so that
	// an older state never overwrites a newer one.
	publishMu sync.Mutex

	mu        sync.Mutex
	publisher Publisher
	// resources is what the driver published last, nil before.
	resources *resourceslice.DriverResources
	// taints are the taints of the devices with a fault.
	taints map[DeviceID]resourceapi.DeviceTaint
	// seen are the devices whose taint (the one in taints) a wait saw in
	// the API. Every later publication goes through this DeviceFaults and
	// carries the taint, so a later fault of such a device does not wait
	// for it again: the wait holds up every other prepare call of the
	// driver, which kubeletplugin serializes.
	seen map[DeviceID]bool
}

// NewDeviceFaults checks cfg and applies its defaults. Nothing gets published
// before SetPublisher and PublishResources.
func NewDeviceFaults(cfg DeviceFaultConfig) (*DeviceFaults, error) {
	RegisterMetrics()
	if cfg.TaintKey == "" {
		cfg.TaintKey = DefaultDeviceFaultTaintKey
	}
	if cfg.TaintEffect == "" {
		cfg.TaintEffect = resourceapi.DeviceTaintEffectNoSchedule
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = DefaultDeviceFaultWaitTimeout
	}
	var problems []string
	if errs := content.IsLabelKey(cfg.TaintKey); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("taint key %q: %s", cfg.TaintKey, strings.Join(errs, ", ")))
	}
	if errs := content.IsLabelValue(cfg.TaintValue); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("taint value %q: %s", cfg.TaintValue, strings.Join(errs, ", ")))
	}
	switch cfg.TaintEffect {
	case resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone:
	default:
		problems = append(problems, fmt.Sprintf("taint effect %q is not one of %s, %s, %s", cfg.TaintEffect,
			resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone))
	}
	if cfg.WaitTimeout > 0 {
		// Waiting lists the driver's ResourceSlices of its node.
		if cfg.DriverName == "" {
			problems = append(problems, "driver name must be set")
		}
		if cfg.NodeName == "" {
			problems = append(problems, "node name must be set")
		}
		if cfg.KubeClient == nil {
			problems = append(problems, "Kubernetes client must be set")
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("device fault config: %s", strings.Join(problems, "; "))
	}
	return &DeviceFaults{cfg: cfg, enabled: true, taints: map[DeviceID]resourceapi.DeviceTaint{}, seen: map[DeviceID]bool{}}, nil
}

// Config returns the configuration, with defaults applied.
func (f *DeviceFaults) Config() DeviceFaultConfig { return f.cfg }

// Wrap is the package's Wrap plus the device faults: before the answer
// leaves the driver, the devices of every claim that plugin failed with
// DeviceFault get tainted.
func (f *DeviceFaults) Wrap(plugin kubeletplugin.DRAPlugin) kubeletplugin.DRAPlugin {
	return &wrappedPlugin{DRAPlugin: plugin, faults: f}
}

// SetPublisher sets where PublishResources, ClearDeviceFault and the device
// faults publish to: normally the kubeletplugin.Helper. It does not publish.
func (f *DeviceFaults) SetPublisher(publisher Publisher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publisher = publisher
}

// PublishResources remembers resources as what the driver publishes, and
// publishes them with the taints of the devices that have a fault. Call it
// instead of the kubeletplugin helper's PublishResources. The caller may
// modify resources after this call returns.
func (f *DeviceFaults) PublishResources(ctx context.Context, resources resourceslice.DriverResources) error {
	f.mu.Lock()
	f.resources = resources.DeepCopy()
	f.mu.Unlock()
	return f.publish(ctx)
}

// ClearDeviceFault removes the faults of devices, and with them their taints
// from the published ResourceSlices: the devices can be allocated again. A
// device without a fault is ignored. It does not wait for the API.
func (f *DeviceFaults) ClearDeviceFault(ctx context.Context, devices ...DeviceID) error {
	var cleared []DeviceID
	f.mu.Lock()
	for _, device := range devices {
		if _, ok := f.taints[device]; ok {
			delete(f.taints, device)
			delete(f.seen, device)
			cleared = append(cleared, device)
		}
	}
	f.mu.Unlock()
	if len(cleared) == 0 {
		return nil
	}
	klog.FromContext(ctx).Info("Cleared device faults, removing their taints", "devices", deviceNames(cleared))
	return f.publish(ctx)
}

// TaintedDevices returns the devices with a fault, sorted: those whose
// taint PublishResources adds. A device whose taint could not be published
// is not among them.
func (f *DeviceFaults) TaintedDevices() []DeviceID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.SortedFunc(maps.Keys(f.taints), compareDeviceIDs)
}

var errNoPublisher = errors.New("no publisher set")

// publish hands the driver's resources with the taints to the publisher.
func (f *DeviceFaults) publish(ctx context.Context) error {
	f.publishMu.Lock()
	defer f.publishMu.Unlock()
	f.mu.Lock()
	publisher := f.publisher
	if f.resources == nil {
		// The driver has not published yet: nothing to taint either.
		f.mu.Unlock()
		return nil
	}
	resources := f.taintedResourcesLocked(klog.FromContext(ctx))
	f.mu.Unlock()
	if publisher == nil {
		return errNoPublisher
	}
	if err := publisher.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	return nil
}

// taintedResourcesLocked returns a copy of the driver's resources with the
// taints. A device gets no taint where that would make its ResourceSlice
// invalid: the API server would reject the whole slice.
func (f *DeviceFaults) taintedResourcesLocked(logger klog.Logger) resourceslice.DriverResources {
	resources := f.resources.DeepCopy()
	if len(f.taints) == 0 {
		return *resources
	}
	for poolName, pool := range resources.Pools {
		for _, slice := range pool.Slices {
			for i := range slice.Devices {
				device := &slice.Devices[i]
				id := DeviceID{Pool: poolName, Device: device.Name}
				taint, ok := f.taints[id]
				if !ok {
					continue
				}
				if err := checkTaintable(slice, *device, taint); err != nil {
					logger.Error(err, "Device with a fault published without its taint", "device", id.String())
					continue
				}
				device.Taints = withTaint(device.Taints, taint)
			}
		}
	}
	return *resources
}

// withTaint returns taints with taint instead of any taint of the same key
// and effect: the fault's taint wins over one the driver set itself.
func withTaint(taints []resourceapi.DeviceTaint, taint resourceapi.DeviceTaint) []resourceapi.DeviceTaint {
	taints = slices.DeleteFunc(taints, func(t resourceapi.DeviceTaint) bool {
		return t.Key == taint.Key && t.Effect == taint.Effect
	})
	return append(taints, taint)
}

// checkTaintable tells whether device in slice can get taint and the slice
// stays valid.
func checkTaintable(slice resourceslice.Slice, device resourceapi.Device, taint resourceapi.DeviceTaint) error {
	if n := len(slice.Devices); n > resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures {
		return fmt.Errorf("its ResourceSlice has %d devices, a slice with taints may have at most %d", n, resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures)
	}
	if n := len(withTaint(slices.Clone(device.Taints), taint)); n > resourceapi.DeviceTaintsMaxLength {
		return fmt.Errorf("it would have %d taints, at most %d are allowed", n, resourceapi.DeviceTaintsMaxLength)
	}
	return nil
}

// taintFailure is why a device did not get tainted.
type taintFailure struct {
	// reason is the value of the metric's reason label.
	reason string
	err    error
}

// taint adds a fault to each of the devices (text is the text of the
// first fault for it: the taint value), publishes the new taints in one go
// and waits until all taints are visible in the API. It returns why the
// devices that did not get tainted did not.
func (f *DeviceFaults) taint(ctx context.Context, texts map[DeviceID]string) map[DeviceID]*taintFailure {
	logger := klog.FromContext(ctx)
	start := time.Now()
	failures := map[DeviceID]*taintFailure{}
	defer func() {
		for _, failure := range failures {
			deviceTaintFailures.WithLabelValues(f.cfg.DriverName, failure.reason).Inc()
		}
	}()
	devices := slices.SortedFunc(maps.Keys(texts), compareDeviceIDs)
	if !f.enabled {
		for _, device := range devices {
			failures[device] = &taintFailure{reason: TaintFailureNotEnabled, err: errors.New("device faults are not enabled, start the driver with failfastplugin.StartWithDeviceFaults")}
		}
		return failures
	}

	// added are the taints of this call, pending all taints to wait for:
	// a taint that another call published may still be on its way.
	added := map[DeviceID]resourceapi.DeviceTaint{}
	var pending []DeviceID
	waitedFor := map[DeviceID]resourceapi.DeviceTaint{}
	now := metav1.Now().Rfc3339Copy() // what the API stores
	f.mu.Lock()
	for _, device := range devices {
		taint, exists := f.taints[device]
		if !exists {
			taint = resourceapi.DeviceTaint{
				Key:       f.cfg.TaintKey,
				Value:     f.cfg.TaintValue,
				Effect:    f.cfg.TaintEffect,
				TimeAdded: &now,
			}
			if taint.Value == "" {
				taint.Value = taintValue(texts[device])
			}
		}
		// Also for a device with a fault already: the driver may have
		// published it away since, and waiting for its taint would
		// take the whole WaitTimeout.
		if failure := f.checkKnownLocked(device, taint); failure != nil {
			failures[device] = failure
			continue
		}
		if !exists {
			f.taints[device] = taint
			added[device] = taint
		}
		if !f.seen[device] {
			pending = append(pending, device)
			waitedFor[device] = taint
		}
	}
	f.mu.Unlock()

	if len(added) > 0 {
		var described []string
		for _, device := range slices.SortedFunc(maps.Keys(added), compareDeviceIDs) {
			described = append(described, device.String()+"="+added[device].Value)
		}
		logger.Info("Tainting devices with a fault", "taints", described, "key", f.cfg.TaintKey, "effect", f.cfg.TaintEffect)
		if err := f.publish(ctx); err != nil {
			// Forget the new taints, so that the next fault of these
			// devices tries again instead of waiting for a taint that
			// never got out.
			f.mu.Lock()
			for device, taint := range added {
				if current, ok := f.taints[device]; ok && current.TimeAdded == taint.TimeAdded {
					delete(f.taints, device)
				}
			}
			f.mu.Unlock()
			for _, device := range pending {
				failures[device] = &taintFailure{reason: TaintFailurePublish, err: err}
			}
			return failures
		}
	}
	if len(pending) == 0 || f.cfg.WaitTimeout < 0 {
		return failures
	}

	missing, err := f.waitVisible(ctx, pending)
	for _, device := range missing {
		failures[device] = &taintFailure{reason: TaintFailureNotVisible, err: err}
	}
	f.mu.Lock()
	for device, taint := range waitedFor {
		// Only the taint waited for: the fault may have been cleared and
		// reported again meanwhile.
		if current, ok := f.taints[device]; ok && current.TimeAdded.Equal(taint.TimeAdded) && !slices.Contains(missing, device) {
			f.seen[device] = true
		}
	}
	f.mu.Unlock()
	if len(missing) == 0 {
		elapsed := time.Since(start)
		deviceTaintWait.WithLabelValues(f.cfg.DriverName).Observe(elapsed.Seconds())
		logger.V(2).Info("Device taints visible in the API", "devices", deviceNames(pending), "wait", elapsed)
	}
	return failures
}

// checkKnownLocked tells whether device is in what the driver published and
// can get taint there.
func (f *DeviceFaults) checkKnownLocked(device DeviceID, taint resourceapi.DeviceTaint) *taintFailure {
	unknown := func(format string, args ...any) *taintFailure {
		return &taintFailure{reason: TaintFailureUnknownDevice, err: fmt.Errorf(format, args...)}
	}
	if f.resources == nil {
		return unknown("the driver has not published ResourceSlices yet")
	}
	pool, ok := f.resources.Pools[device.Pool]
	if !ok {
		return unknown("the driver publishes no pool %q", device.Pool)
	}
	for _, slice := range pool.Slices {
		for _, published := range slice.Devices {
			if published.Name != device.Device {
				continue
			}
			if err := checkTaintable(slice, published, taint); err != nil {
				return &taintFailure{reason: TaintFailureNotTaintable, err: err}
			}
			return nil
		}
	}
	return unknown("pool %q of the driver has no such device", device.Pool)
}

// waitVisible waits until the API has the taints of devices, at most
// WaitTimeout. It returns the devices whose taint it did not see, and why.
func (f *DeviceFaults) waitVisible(ctx context.Context, devices []DeviceID) ([]DeviceID, error) {
	f.mu.Lock()
	want := make(map[DeviceID]resourceapi.DeviceTaint, len(devices))
	for _, device := range devices {
		if taint, ok := f.taints[device]; ok {
			want[device] = taint
		}
	}
	f.mu.Unlock()

	missing := devices
	var listErr error
	waitCtx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout)
	defer cancel()
	backoff := wait.Backoff{Duration: taintPollFirst, Factor: 2, Cap: taintPollMax, Steps: math.MaxInt32}
	err := wait.ExponentialBackoffWithContext(waitCtx, backoff, func(ctx context.Context) (bool, error) {
		list, err := f.cfg.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{
				resourceapi.ResourceSliceSelectorNodeName: f.cfg.NodeName,
				resourceapi.ResourceSliceSelectorDriver:   f.cfg.DriverName,
			}.AsSelector().String(),
		})
		if err != nil {
			if ctx.Err() == nil {
				// Not just the end of the wait.
				listErr = err
			}
			klog.FromContext(ctx).V(4).Info("Listing ResourceSlices failed, retrying", "err", err)
			return false, nil
		}
		visible := f.visibleTaints(list.Items)
		var stillMissing []DeviceID
		for _, device := range devices {
			taint, ok := want[device]
			if !ok || !slices.ContainsFunc(visible[device], func(t resourceapi.DeviceTaint) bool {
				return t.Key == taint.Key && t.Value == taint.Value && t.Effect == taint.Effect
			}) {
				stillMissing = append(stillMissing, device)
			}
		}
		missing = stillMissing
		return len(missing) == 0, nil
	})
	if err == nil {
		return nil, nil
	}
	var why error
	switch {
	case ctx.Err() != nil:
		why = fmt.Errorf("taint not visible in the API, the prepare call ended: %w", context.Cause(ctx))
	case listErr != nil:
		why = fmt.Errorf("taint not visible in the API within %v, listing ResourceSlices failed: %w", f.cfg.WaitTimeout, listErr)
	default:
		why = fmt.Errorf("taint not visible in the API within %v", f.cfg.WaitTimeout)
	}
	return missing, why
}

// visibleTaints returns the taints of the devices in the driver's
// ResourceSlices of its node. Only the newest generation of a pool counts:
// the scheduler ignores older ones.
func (f *DeviceFaults) visibleTaints(items []resourceapi.ResourceSlice) map[DeviceID][]resourceapi.DeviceTaint {
	generation := map[string]int64{}
	ours := func(slice *resourceapi.ResourceSlice) bool {
		return slice.Spec.Driver == f.cfg.DriverName && slice.Spec.NodeName != nil && *slice.Spec.NodeName == f.cfg.NodeName
	}
	for i := range items {
		slice := &items[i]
		if ours(slice) {
			generation[slice.Spec.Pool.Name] = max(generation[slice.Spec.Pool.Name], slice.Spec.Pool.Generation)
		}
	}
	taints := map[DeviceID][]resourceapi.DeviceTaint{}
	for i := range items {
		slice := &items[i]
		if !ours(slice) || slice.Spec.Pool.Generation != generation[slice.Spec.Pool.Name] {
			continue
		}
		for _, device := range slice.Spec.Devices {
			id := DeviceID{Pool: slice.Spec.Pool.Name, Device: device.Name}
			taints[id] = append(taints[id], device.Taints...)
		}
	}
	return taints
}

// deviceNames are the devices as "pool/device", for logs.
func deviceNames(devices []DeviceID) []string {
	names := make([]string, len(devices))
	for i, device := range devices {
		names[i] = device.String()
	}
	return names
}
