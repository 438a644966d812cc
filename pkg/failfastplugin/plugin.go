// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"google.golang.org/grpc/metadata"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Helper is a running driver started by StartWithDeviceFaults: the
// kubeletplugin.Helper plus the device faults. Publish with its
// PublishResources as before: the taints of the devices with a fault are
// DeviceTaintRules of their own, not part of what the driver publishes.
type Helper struct {
	*kubeletplugin.Helper
	faults *DeviceFaults
}

// ClearDeviceFault removes the faults of devices and their taints (see
// DeviceFaults.ClearDeviceFault).
func (h *Helper) ClearDeviceFault(ctx context.Context, devices ...DeviceID) error {
	return h.faults.ClearDeviceFault(ctx, devices...)
}

// TaintedDevices returns the devices with a fault (see
// DeviceFaults.TaintedDevices).
func (h *Helper) TaintedDevices() []DeviceID {
	return h.faults.TaintedDevices()
}

// PendingTaints returns the devices with a fault whose DeviceTaintRule is
// still being retried (see DeviceFaults.PendingTaints).
func (h *Helper) PendingTaints() []DeviceID {
	return h.faults.PendingTaints()
}

// Loaded is closed once the faults an earlier instance of the driver left
// are known (see DeviceFaults.Loaded).
func (h *Helper) Loaded() <-chan struct{} {
	return h.faults.Loaded()
}

// LoadErr is why they could not be read (see DeviceFaults.LoadErr).
func (h *Helper) LoadErr() error {
	return h.faults.LoadErr()
}

// Stop stops the driver (kubeletplugin.Helper.Stop); nil-safe.
func (h *Helper) Stop() {
	if h == nil || h.Helper == nil {
		return
	}
	h.Helper.Stop()
}

// Start is kubeletplugin.Start with the plugin wrapped by Wrap and the
// GRPCInterceptor option added, so that errors marked with Permanent reach the
// kubelet as permanent. It is a drop-in: same arguments, same result, so a
// driver switches by changing the call alone. It does not taint devices: a
// DeviceFault fails its claim permanently and says that the devices were not
// tainted. Use StartWithDeviceFaults for that.
func Start(ctx context.Context, plugin kubeletplugin.DRAPlugin, opts ...kubeletplugin.Option) (*kubeletplugin.Helper, error) {
	opts = append(opts[:len(opts):len(opts)], GRPCInterceptor())
	return kubeletplugin.Start(ctx, Wrap(plugin), opts...)
}

// StartWithDeviceFaults is Start plus the tainting of the devices that the
// plugin reports with DeviceFault, configured by cfg. cfg.DriverName,
// cfg.NodeName and cfg.KubeClient are passed to kubeletplugin as options
// after opts, so opts need not contain them. Once kubeletplugin started, it
// reads the DeviceTaintRules that an earlier instance of the driver on this
// node left, in the background (DeviceFaults.LoadInBackground): the
// Helper's Loaded is closed when that is done.
func StartWithDeviceFaults(ctx context.Context, plugin kubeletplugin.DRAPlugin, cfg DeviceFaultConfig, opts ...kubeletplugin.Option) (*Helper, error) {
	faults, err := NewDeviceFaults(cfg)
	if err != nil {
		return nil, err
	}
	opts = append(slices.Clone(opts), kubeletplugin.DriverName(cfg.DriverName), kubeletplugin.NodeName(cfg.NodeName), kubeletplugin.KubeClient(cfg.KubeClient))
	return start(ctx, plugin, faults, opts)
}

func start(ctx context.Context, plugin kubeletplugin.DRAPlugin, faults *DeviceFaults, opts []kubeletplugin.Option) (*Helper, error) {
	opts = append(opts[:len(opts):len(opts)], GRPCInterceptor())
	helper, err := kubeletplugin.Start(ctx, faults.Wrap(plugin), opts...)
	if err != nil {
		return nil, err
	}
	// In the background: the driver registers, and unprepares claims,
	// whether the API server answers or not.
	faults.LoadInBackground(ctx)
	return &Helper{Helper: helper, faults: faults}, nil
}

// Wrap returns a DRAPlugin that notes which claims plugin failed permanently
// in a NodePrepareResources call, for GRPCInterceptor to put on the wire. All
// other calls go to plugin unchanged. It does not taint devices (see
// DeviceFaults.Wrap).
func Wrap(plugin kubeletplugin.DRAPlugin) kubeletplugin.DRAPlugin {
	return disabledDeviceFaults().Wrap(plugin)
}

// disabledDeviceFaults taints nothing and has nothing to load.
func disabledDeviceFaults() *DeviceFaults {
	RegisterMetrics()
	faults := newDeviceFaults(DeviceFaultConfig{}, false)
	close(faults.loaded)
	return faults
}

type wrappedPlugin struct {
	kubeletplugin.DRAPlugin
	faults   *DeviceFaults
	warnOnce sync.Once
}

func (p *wrappedPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result, err := p.DRAPlugin.PrepareResourceClaims(ctx, claims)
	if err != nil {
		// kubeletplugin fails the whole call and ignores result. A failed
		// call is never permanent for the kubelet (the error may come from
		// anywhere between it and the driver), so a Permanent mark here
		// is lost: say so where the driver author looks.
		if IsPermanent(err) {
			klog.FromContext(ctx).Error(err, "PrepareResourceClaims failed as a whole with an error marked Permanent: the kubelet retries a failed call as transient; put the error in the PrepareResult of each claim it concerns instead", "claims", len(claims))
		}
		return result, err
	}
	rec := recorderFrom(ctx)
	if rec != nil {
		// The interceptor taints after kubeletplugin has left its
		// serialized section: waiting for the API server there would
		// hold every other prepare and unprepare of the node.
		rec.deferTaint(p, result)
	} else {
		p.taintDeviceFaults(ctx, result)
	}
	for uid, claimResult := range result {
		if !IsPermanent(claimResult.Err) {
			continue
		}
		if rec == nil {
			p.warnOnce.Do(func() {
				klog.FromContext(ctx).Info("Warning: a claim failed permanently but the failfastplugin gRPC interceptor is not installed; the kubelet will see a transient error", "claimUID", uid)
			})
			break
		}
		rec.markPermanent(uid)
	}
	return result, err
}

// NoTaintMetadataKey is the gRPC request metadata with which a caller of
// NodePrepareResources asks the driver to taint nothing in that call: a
// claim failed with DeviceFault still fails permanently, its error says
// that the devices were not tainted and why, and the cluster is left as it
// was. dra-failfast-check sends it (unless told -allow-taint), so that
// checking a driver on a live cluster has no lasting effect; the kubelet
// never sends it. Only callers that can open the driver's socket can.
const NoTaintMetadataKey = "dra-failfast-no-taint"

// errNoTaintRequested is why the devices of a DeviceFault were not tainted
// in a call that asked for no taint.
var errNoTaintRequested = errors.New("the caller asked for no taint (" + NoTaintMetadataKey + ", a check)")

// noTaintRequested tells whether the NodePrepareResources call of ctx asked
// for no taint.
func noTaintRequested(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(NoTaintMetadataKey)) > 0
}

// taintDeviceFaults taints the devices of the claims that failed with
// DeviceFault, all in one publication, and waits for them. The error of a
// claim whose devices did not all get tainted says so.
func (p *wrappedPlugin) taintDeviceFaults(ctx context.Context, result map[types.UID]kubeletplugin.PrepareResult) {
	claimDevices, classes := deviceFaultsOf(result)
	for uid, cause := range p.taint(ctx, claimDevices, classes) {
		claimResult := result[uid]
		claimResult.Err = &notTaintedError{err: claimResult.Err, cause: cause}
		result[uid] = claimResult
	}
}

// deviceFaultsOf returns the devices of each claim of result that failed with
// DeviceFault, and the class of the first fault of each device.
func deviceFaultsOf(result map[types.UID]kubeletplugin.PrepareResult) (map[types.UID][]DeviceID, map[DeviceID]string) {
	claimDevices := map[types.UID][]DeviceID{}
	classes := map[DeviceID]string{}
	for _, uid := range slices.Sorted(maps.Keys(result)) {
		devices, claimClasses := faultClasses(result[uid].Err)
		if len(devices) == 0 {
			continue
		}
		claimDevices[uid] = devices
		for _, device := range devices {
			if _, ok := classes[device]; !ok {
				classes[device] = claimClasses[device]
			}
		}
	}
	return claimDevices, classes
}

// taint taints the devices of classes, all in one publication, and waits for
// them. It returns why, for each claim of claimDevices whose devices did not
// all get tainted.
func (p *wrappedPlugin) taint(ctx context.Context, claimDevices map[types.UID][]DeviceID, classes map[DeviceID]string) map[types.UID]error {
	if len(claimDevices) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	var failures map[DeviceID]*taintFailure
	if noTaintRequested(ctx) {
		failures = map[DeviceID]*taintFailure{}
		for device := range classes {
			failures[device] = &taintFailure{err: errNoTaintRequested}
		}
		logger.Info("Not tainting devices with a fault: the caller asked for no taint", "devices", deviceNames(slices.SortedFunc(maps.Keys(classes), compareDeviceIDs)))
	} else {
		failures = p.faults.taint(ctx, classes)
	}
	causes := map[types.UID]error{}
	for uid, devices := range claimDevices {
		cause := notTainted(devices, failures)
		if cause == nil {
			continue
		}
		logger.Error(cause, "Devices with a fault not tainted, failing the claim permanently anyway", "claimUID", uid, "devices", deviceNames(devices))
		causes[uid] = cause
	}
	return causes
}

// recorder carries, through the context of one NodePrepareResources call, the
// claims that the wrapped plugin failed permanently, and the device faults
// for the interceptor to taint once kubeletplugin's serialized section is
// over.
type recorder struct {
	mu        sync.Mutex
	permanent map[types.UID]bool

	// plugin taints claimDevices, the devices of the claims that failed
	// with DeviceFault (classes: the class of each device's first
	// fault); errs are those claims' errors as the plugin returned them.
	plugin       *wrappedPlugin
	claimDevices map[types.UID][]DeviceID
	classes      map[DeviceID]string
	errs         map[types.UID]error
}

// deferTaint keeps the device faults of result for taintDeferred.
func (r *recorder) deferTaint(plugin *wrappedPlugin, result map[types.UID]kubeletplugin.PrepareResult) {
	claimDevices, classes := deviceFaultsOf(result)
	if len(claimDevices) == 0 {
		return
	}
	errs := make(map[types.UID]error, len(claimDevices))
	for uid := range claimDevices {
		errs[uid] = result[uid].Err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plugin, r.claimDevices, r.classes, r.errs = plugin, claimDevices, classes, errs
}

// taintDeferred taints the device faults that deferTaint kept, and returns
// the new error text of each claim whose devices did not all get tainted
// (the plugin's error, and why): what kubeletplugin would have sent had the
// plugin tainted them itself.
func (r *recorder) taintDeferred(ctx context.Context) map[types.UID]string {
	r.mu.Lock()
	plugin, claimDevices, classes, errs := r.plugin, r.claimDevices, r.classes, r.errs
	r.mu.Unlock()
	if plugin == nil {
		return nil
	}
	errorTexts := map[types.UID]string{}
	for uid, cause := range plugin.taint(ctx, claimDevices, classes) {
		errorTexts[uid] = (&notTaintedError{err: errs[uid], cause: cause}).Error()
	}
	return errorTexts
}

type recorderKey struct{}

func withRecorder(ctx context.Context, rec *recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, rec)
}

func recorderFrom(ctx context.Context) *recorder {
	rec, _ := ctx.Value(recorderKey{}).(*recorder)
	return rec
}

func (r *recorder) markPermanent(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.permanent == nil {
		r.permanent = make(map[types.UID]bool)
	}
	r.permanent[uid] = true
}

func (r *recorder) isPermanent(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.permanent[uid]
}
