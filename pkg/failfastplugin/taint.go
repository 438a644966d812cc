// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	resourcerules "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	"k8s.io/utils/ptr"
)

const (
	// DefaultDeviceFaultTaintKey is the key of the taint that marks a device
	// reported with DeviceFault, unless DeviceFaultConfig.TaintKey says
	// otherwise.
	DefaultDeviceFaultTaintKey = "dra-failfast.io/device-fault"
	// DefaultDeviceFaultWaitTimeout is how long a prepare call waits for
	// the API server to store the DeviceTaintRules of its device faults,
	// unless DeviceFaultConfig.WaitTimeout says otherwise. The kubelet
	// gives a NodePrepareResources call 45s.
	DefaultDeviceFaultWaitTimeout = 10 * time.Second

	// DeviceTaintRuleDriverLabel is the label of every DeviceTaintRule
	// that the library creates: the driver's name.
	DeviceTaintRuleDriverLabel = "dra-failfast.io/driver"
	// DeviceTaintRuleNodeLabel is the label of every DeviceTaintRule that
	// the library creates: the writer's node, as
	// DeviceTaintRuleNodeLabelValue gives it. A restarted driver lists
	// the rules of its own node by it, and of no other node: an admission
	// policy forces it (deploy/helm/gpu-driver/templates/rbac.yaml), so
	// that no node can make another node's plugin read what it wrote.
	DeviceTaintRuleNodeLabel = "dra-failfast.io/node"
	// DeviceTaintRuleNodeAnnotation is the annotation of every
	// DeviceTaintRule that the library creates: the writer's node, whole
	// (node names may be longer than label values).
	DeviceTaintRuleNodeAnnotation = "dra-failfast.io/node"

	// loadPageSize is how many rules one list request of Load asks for:
	// what Load holds in memory at once. A node's own rules are each
	// small (the policy admits no other labels or annotations).
	loadPageSize = 100
	// legacyPageSize is the page size when Load reads the rules an
	// earlier version of the library wrote without the node label: those
	// of every node, written before any policy bounded their size.
	legacyPageSize = 10
)

// DeviceTaintRuleNodeLabelValue returns the value of DeviceTaintRuleNodeLabel
// for node: the node's name when it fits a label value (63 bytes), else its
// first 61 bytes and "_n" (an underscore is in no node name, so it is never
// another node's whole name). Two nodes whose names are longer than 63 bytes
// and share their first 61 share the value: each lists the other's rules,
// and skips them by their annotation.
func DeviceTaintRuleNodeLabelValue(node string) string {
	if len(node) <= content.LabelValueMaxLength {
		return node
	}
	return node[:content.LabelValueMaxLength-2] + "_n"
}

// DeviceFaultConfig configures how devices reported with DeviceFault get
// tainted. The zero value of each optional field selects its default.
type DeviceFaultConfig struct {
	// DriverName, NodeName and KubeClient are the driver's name, its node
	// and its client, as given to kubeletplugin in the options of the same
	// names. The library needs them to write its DeviceTaintRules, and
	// kubeletplugin does not reveal its options. StartWithDeviceFaults
	// passes them on to kubeletplugin.Start (after opts, so these win): a
	// driver need not repeat them as options. Required.
	DriverName string
	NodeName   string
	KubeClient kubernetes.Interface

	// TaintKey is the key of the taint, a label key. Default:
	// DefaultDeviceFaultTaintKey.
	TaintKey string
	// TaintValue is the value of the taint, a label value, for every
	// fault. Default: the class of the device's first fault
	// (DeviceFaultClass), "device-fault" for a fault without one. Never
	// the error's text: a DeviceTaintRule is cluster-scoped and read by
	// whoever may list them, the text stays in the pod's status and
	// Event.
	TaintValue string
	// TaintEffect is the effect of the taint. Default: NoSchedule: the
	// scheduler gives new claims other devices, and pods that already use
	// the device keep running. NoExecute also evicts those.
	TaintEffect resourceapi.DeviceTaintEffect
	// WaitTimeout bounds how long a prepare call waits for the API server
	// to store the DeviceTaintRules of its device faults before it returns
	// the permanent error. Default (zero or negative):
	// DefaultDeviceFaultWaitTimeout.
	WaitTimeout time.Duration
}

// DeviceFaults taints devices reported with DeviceFault. Each device with a
// fault gets a DeviceTaintRule of its own in the API: the taint applies to
// the device wherever the driver publishes it, before and after the driver
// publishes, and it outlives the driver process (a restart, a DaemonSet
// roll, a node reboot) until the driver clears the fault with
// ClearDeviceFault or an operator deletes the rule. The rule is owned by the
// driver's Node: it goes when the Node object goes.
//
// StartWithDeviceFaults sets one up; a driver that assembles the kubeletplugin
// options itself uses NewDeviceFaults, Load, and starts kubeletplugin with
// Wrap's plugin and the GRPCInterceptor option.
type DeviceFaults struct {
	cfg DeviceFaultConfig
	// api is where the API server serves DeviceTaintRules.
	api ruleAPIFinder
	// enabled is false for the DeviceFaults of Start: a DeviceFault then
	// fails the claim permanently without a taint, and says so.
	enabled bool

	// writeLock (one token) serializes writing rules with updating rules,
	// so that a fault and a ClearDeviceFault of the same device cannot
	// leave the map saying the opposite of the API. A channel, not a
	// mutex: a caller waits for it only as long as its context allows.
	writeLock chan struct{}

	mu sync.Mutex
	// rules are the devices with a fault, by the name of their rule, as
	// this process knows them: read by Load, added by faults, removed by
	// ClearDeviceFault.
	rules map[DeviceID]string
	// legacyRules are the devices whose rule Load found under the name
	// the library gave rules before it put the node in the name
	// (legacyRuleName): ClearDeviceFault deletes those too.
	legacyRules map[DeviceID]string
	// retry holds the faults whose taint could not be written yet.
	retry retryQueue
	// background is the context of LoadInBackground: the retries run
	// until it ends (nil: until the queue is empty).
	background context.Context
	// changedWhileLoading are the devices whose rule this process wrote or
	// deleted since Load started listing (nil when no Load runs): what
	// this process did is newer than the list.
	changedWhileLoading map[DeviceID]struct{}
	// afterList, for the tests, runs between Load's list and its merge.
	afterList func()

	// loaded is closed when LoadInBackground is done, loadErr is why it
	// gave up (nil: loaded).
	loaded  chan struct{}
	loadErr error
}

// NewDeviceFaults checks cfg and applies its defaults. It does not contact
// the API server: Load does.
func NewDeviceFaults(cfg DeviceFaultConfig) (*DeviceFaults, error) {
	RegisterMetrics()
	if cfg.TaintKey == "" {
		cfg.TaintKey = DefaultDeviceFaultTaintKey
	}
	if cfg.TaintEffect == "" {
		cfg.TaintEffect = resourceapi.DeviceTaintEffectNoSchedule
	}
	if cfg.WaitTimeout <= 0 {
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
	if cfg.DriverName == "" {
		problems = append(problems, "driver name must be set")
	} else if errs := content.IsLabelValue(cfg.DriverName); len(errs) > 0 {
		// The resource API allows 63 bytes for a driver name, so this
		// only catches names it would refuse anyway.
		problems = append(problems, fmt.Sprintf("driver name %q: %s", cfg.DriverName, strings.Join(errs, ", ")))
	}
	if cfg.NodeName == "" {
		problems = append(problems, "node name must be set")
	} else if errs := content.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("node name %q: %s", cfg.NodeName, strings.Join(errs, ", ")))
	} else if len(cfg.NodeName) > maxRuleNodeName {
		problems = append(problems, fmt.Sprintf("node name %q is %d bytes long: the names of its DeviceTaintRules end with it, and allow at most %d", cfg.NodeName, len(cfg.NodeName), maxRuleNodeName))
	}
	if cfg.KubeClient == nil {
		problems = append(problems, "Kubernetes client must be set")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("device fault config: %s", strings.Join(problems, "; "))
	}
	return newDeviceFaults(cfg, true), nil
}

func newDeviceFaults(cfg DeviceFaultConfig, enabled bool) *DeviceFaults {
	f := &DeviceFaults{
		cfg: cfg, api: ruleAPIFinder{kube: cfg.KubeClient}, enabled: enabled,
		writeLock: make(chan struct{}, 1), rules: map[DeviceID]string{}, legacyRules: map[DeviceID]string{},
		loaded: make(chan struct{}),
	}
	f.retry.init(cfg.DriverName)
	return f
}

// lockWrite takes the write lock, unless ctx ends first.
func (f *DeviceFaults) lockWrite(ctx context.Context) error {
	select {
	case f.writeLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the driver's other DeviceTaintRule writes: %w", context.Cause(ctx))
	}
}

func (f *DeviceFaults) unlockWrite() { <-f.writeLock }

// Config returns the configuration, with defaults applied.
func (f *DeviceFaults) Config() DeviceFaultConfig { return f.cfg }

// Wrap is the package's Wrap plus the device faults: before the answer
// leaves the driver, the devices of every claim that plugin failed with
// DeviceFault get tainted.
func (f *DeviceFaults) Wrap(plugin kubeletplugin.DRAPlugin) kubeletplugin.DRAPlugin {
	wrapped := &wrappedPlugin{DRAPlugin: plugin, faults: f}
	// kubeletplugin before v0.37 serves device health only for a plugin
	// that implements the v1alpha1 health server itself: the wrapper must
	// not hide it. (From v0.37 on, WatchHealthStatus is a DRAPlugin method
	// and passes through the embedded DRAPlugin.)
	if health, ok := plugin.(drahealthv1alpha1.DRAResourceHealthServer); ok {
		return &wrappedHealthPlugin{wrappedPlugin: wrapped, DRAResourceHealthServer: health}
	}
	return wrapped
}

// wrappedHealthPlugin is the wrapper of a plugin that serves device health
// itself (kubeletplugin before v0.37).
type wrappedHealthPlugin struct {
	*wrappedPlugin
	drahealthv1alpha1.DRAResourceHealthServer
}

// Load reads what an earlier instance of the driver on this node left: the
// DeviceTaintRules of its device faults (TaintedDevices returns them
// afterwards). It lists the rules of this node only (by
// DeviceTaintRuleNodeLabel), in pages, and then those an earlier version of
// the library wrote without that label, in small pages: what it holds at
// once is bounded whatever other nodes wrote. It retries failures until ctx
// ends, except those that retrying cannot help: the API server does not
// serve DeviceTaintRules in any of DeviceTaintRuleVersions
// (ErrDeviceTaintRulesNotServed), or the driver may not list them
// (Forbidden). Faults are tainted without it all the same, and
// TaintedDevices then only knows the faults of this process.
func (f *DeviceFaults) Load(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	f.changedWhileLoading = map[DeviceID]struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.changedWhileLoading = nil
		f.mu.Unlock()
	}()
	var (
		loaded, legacy map[DeviceID]string
		lastErr        error
	)
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		api, err := f.api.get(ctx)
		switch {
		case errors.Is(err, ErrDeviceTaintRulesNotServed):
			return false, fmt.Errorf("list DeviceTaintRules of driver %s: %w", f.cfg.DriverName, err)
		case err != nil:
			lastErr = err
			logger.V(2).Info("Discovering the DeviceTaintRules API failed, retrying", "err", err)
			return false, nil
		}
		// Both lists again after a failure: a continue token may have
		// expired, and the maps are small.
		loaded, legacy = map[DeviceID]string{}, map[DeviceID]string{}
		own := labels.Set{DeviceTaintRuleDriverLabel: f.cfg.DriverName, DeviceTaintRuleNodeLabel: DeviceTaintRuleNodeLabelValue(f.cfg.NodeName)}.String()
		unlabelled := DeviceTaintRuleDriverLabel + "=" + f.cfg.DriverName + ",!" + DeviceTaintRuleNodeLabel
		err = f.listPages(ctx, api, own, loadPageSize, func(rule *deviceTaintRule) { f.takeIn(logger, rule, loaded, legacy) })
		if err == nil {
			err = f.listPages(ctx, api, unlabelled, legacyPageSize, func(rule *deviceTaintRule) { f.takeIn(logger, rule, loaded, legacy) })
		}
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("list DeviceTaintRules of driver %s: the API server does not serve them in %s/%s any more: %w", f.cfg.DriverName, resourceGroup, api.version, err)
		case apierrors.IsForbidden(err):
			return false, fmt.Errorf("list DeviceTaintRules of driver %s: the driver may not (RBAC: list devicetaintrules): %w", f.cfg.DriverName, err)
		default:
			lastErr = fmt.Errorf("list DeviceTaintRules of driver %s: %w", f.cfg.DriverName, err)
			logger.V(2).Info("Listing DeviceTaintRules failed, retrying", "err", err)
			return false, nil
		}
	})
	if err != nil {
		if lastErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err)) {
			err = fmt.Errorf("%w (%w)", lastErr, err)
		}
		return fmt.Errorf("device faults: read what the driver left: %w", err)
	}
	if f.afterList != nil {
		f.afterList()
	}
	f.mu.Lock()
	// This process never writes a legacy name, so the list is the
	// newest word on them.
	maps.Copy(f.legacyRules, legacy)
	for device, name := range loaded {
		if _, changed := f.changedWhileLoading[device]; changed {
			// Cleared or written since the list: the list is older.
			delete(loaded, device)
			continue
		}
		f.rules[device] = name
	}
	f.mu.Unlock()
	if len(loaded) > 0 {
		logger.Info("Devices tainted by an earlier instance of the driver stay tainted", "devices", deviceNames(slices.SortedFunc(maps.Keys(loaded), compareDeviceIDs)))
	}
	if len(legacy) > 0 {
		logger.Info("Devices tainted by an earlier version of the library stay tainted, under their rules' old names", "devices", deviceNames(slices.SortedFunc(maps.Keys(legacy), compareDeviceIDs)))
	}
	return nil
}

// listPages lists the rules that selector selects, pageSize at a time, and
// hands each to take: only one page is held at once.
func (f *DeviceFaults) listPages(ctx context.Context, api *ruleAPI, selector string, pageSize int64, take func(*deviceTaintRule)) error {
	from := ""
	for {
		page, err := api.list(ctx, selector, pageSize, from)
		if err != nil {
			return err
		}
		for i := range page.Items {
			take(&page.Items[i])
		}
		if page.Continue == "" {
			return nil
		}
		from = page.Continue
	}
}

// takeIn notes rule in loaded (a rule of this node under the library's
// name) or legacy (under the name of a version before the node was in the
// name), if it is one of this node's.
func (f *DeviceFaults) takeIn(logger klog.Logger, rule *deviceTaintRule, loaded, legacy map[DeviceID]string) {
	if rule.Annotations[DeviceTaintRuleNodeAnnotation] != f.cfg.NodeName {
		return
	}
	device, ok := ruleDevice(rule)
	switch {
	case ok && rule.Name == f.ruleName(device):
		loaded[device] = rule.Name
	case ok && rule.Name == f.legacyRuleName(device):
		// Written by a version of the library before the node was in
		// the name: the device stays tainted, and ClearDeviceFault
		// deletes that rule too.
		legacy[device] = rule.Name
	default:
		// Not a rule of the library's making (edited by hand?): leave
		// it alone, the operator owns it now.
		logger.Info("Ignoring a DeviceTaintRule with the driver's label that the library did not write", "rule", rule.Name)
	}
}

// LoadInBackground runs Load until it is done and closes Loaded then, so
// that a driver registers with the kubelet, and can unprepare claims,
// whatever the API server does. StartWithDeviceFaults calls it. When Load
// gives up, LoadErr says why, and the driver's log too.
//
// The faults whose taint could not be written within their wait are retried
// in the background until ctx ends (see DeviceFaults).
func (f *DeviceFaults) LoadInBackground(ctx context.Context) {
	f.mu.Lock()
	f.background = ctx
	f.mu.Unlock()
	go func() {
		defer close(f.loaded)
		if err := f.Load(ctx); err != nil {
			f.mu.Lock()
			f.loadErr = err
			f.mu.Unlock()
			klog.FromContext(ctx).Error(err, "Device faults of an earlier instance of the driver unknown: their DeviceTaintRules stay, but TaintedDevices does not list them")
		}
	}()
}

// Loaded is closed once LoadInBackground is done: from then on,
// TaintedDevices includes the faults an earlier instance of the driver left
// (unless LoadErr says otherwise). A driver that clears the faults of
// repaired devices at start waits for it.
func (f *DeviceFaults) Loaded() <-chan struct{} { return f.loaded }

// LoadErr is why LoadInBackground gave up, nil while it runs or after it
// succeeded.
func (f *DeviceFaults) LoadErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadErr
}

// ruleDevice returns the device that rule selects, if it selects exactly one.
func ruleDevice(rule *deviceTaintRule) (DeviceID, bool) {
	selector := rule.Spec.DeviceSelector
	if selector == nil || selector.Pool == nil || selector.Device == nil {
		return DeviceID{}, false
	}
	return DeviceID{Pool: *selector.Pool, Device: *selector.Device}, true
}

// nodeOwner reads the driver's Node, the owner of its rules, at every fault:
// a Node deleted and created again has another UID, and a rule owned by the
// old one would be deleted by the garbage collector.
func (f *DeviceFaults) nodeOwner(ctx context.Context) (*metav1.OwnerReference, error) {
	node, err := f.cfg.KubeClient.CoreV1().Nodes().Get(ctx, f.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read Node %s, the owner of the rule: %w", f.cfg.NodeName, err)
	}
	// Not a controller, no blockOwnerDeletion: that would need the right
	// to delete Nodes.
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}, nil
}

// maxRuleNodeName is the longest node name that DeviceTaintRuleName can end
// a valid object name (253 bytes) with: "device-", 16 hex digits and a dot
// come first.
const maxRuleNodeName = 253 - len("device-") - 16 - 1

// DeviceTaintRuleName returns the name of the DeviceTaintRule that the
// library writes on node for a fault of device of driver:
// "<device>-<16 hex digits>.<node>", the digits a hash of driver, pool and
// device, so that each device of each driver has one, a restarted driver
// finds it, and ClearDeviceFault deletes it without having to know it. The
// part before the first dot is one DNS label, and the writer's node is all
// that follows it: an admission policy can check that a node creates only
// names of its own (deploy/helm/gpu-driver/templates/rbac.yaml), so that no node can take
// the name another node's fault needs and leave that node's device
// untainted. Where the device's name is no DNS label, or would make the
// name too long, "device" stands for it.
func DeviceTaintRuleName(driver, node string, device DeviceID) string {
	label := legacyRuleName(driver, device)
	if len(label)+1+len(node) > 253 {
		label = "device-" + label[len(label)-16:]
	}
	return label + "." + node
}

// legacyRuleName is the name the library gave the rule of device before it
// put the node in the name, and the first label of the name it gives now.
func legacyRuleName(driver string, device DeviceID) string {
	sum := sha256.Sum256([]byte(driver + "\x00" + device.Pool + "\x00" + device.Device))
	suffix := hex.EncodeToString(sum[:])[:16]
	if content.IsDNS1123Label(device.Device) == nil && len(device.Device) > 0 {
		return device.Device + "-" + suffix
	}
	return "device-" + suffix
}

// ruleName is the name of the DeviceTaintRule of device on this node.
func (f *DeviceFaults) ruleName(device DeviceID) string {
	return DeviceTaintRuleName(f.cfg.DriverName, f.cfg.NodeName, device)
}

// legacyRuleName is the name an earlier version of the library gave the
// rule of device.
func (f *DeviceFaults) legacyRuleName(device DeviceID) string {
	return legacyRuleName(f.cfg.DriverName, device)
}

// rule returns the DeviceTaintRule that taints device with taint, owned by
// owner: exactly the labels, annotation and owner the admission policy
// admits.
func (f *DeviceFaults) rule(device DeviceID, taint resourcerules.DeviceTaint, owner *metav1.OwnerReference) *deviceTaintRule {
	rule := &deviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{
			Name: f.ruleName(device),
			Labels: map[string]string{
				DeviceTaintRuleDriverLabel: f.cfg.DriverName,
				DeviceTaintRuleNodeLabel:   DeviceTaintRuleNodeLabelValue(f.cfg.NodeName),
			},
			Annotations: map[string]string{DeviceTaintRuleNodeAnnotation: f.cfg.NodeName},
		},
		Spec: resourcerules.DeviceTaintRuleSpec{
			DeviceSelector: &resourcerules.DeviceTaintSelector{
				Driver: ptr.To(f.cfg.DriverName),
				Pool:   ptr.To(device.Pool),
				Device: ptr.To(device.Device),
			},
			Taint: taint,
		},
	}
	rule.OwnerReferences = []metav1.OwnerReference{*owner}
	return rule
}

// ClearDeviceFault removes the faults of devices: it deletes their
// DeviceTaintRules, so that the devices can be allocated again, and drops
// their taints still waiting for a retry. A device without a rule is
// ignored, whether this process tainted it or not. Each API call is bounded
// by DeviceFaultConfig.WaitTimeout, whatever ctx allows: a health loop may
// call it with a context that never ends.
func (f *DeviceFaults) ClearDeviceFault(ctx context.Context, devices ...DeviceID) error {
	if !f.enabled {
		return nil
	}
	// First: a retry that has not written the rule yet never will.
	f.retry.drop(devices)
	callCtx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout)
	api, err := f.api.get(callCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("clear device faults: %w", err)
	}
	lockCtx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout)
	err = f.lockWrite(lockCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("clear device faults: %w", err)
	}
	defer f.unlockWrite()
	var errs []error
	var cleared []DeviceID
	for _, device := range devices {
		f.mu.Lock()
		legacy := f.legacyRules[device]
		f.mu.Unlock()
		deleted := false
		for _, name := range []string{f.ruleName(device), legacy} {
			if name == "" {
				continue
			}
			callCtx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout)
			err := api.delete(callCtx, name)
			cancel()
			switch {
			case err == nil:
				deleted = true
			case apierrors.IsNotFound(err):
			default:
				// The fault stays: the device is still tainted.
				errs = append(errs, fmt.Errorf("delete DeviceTaintRule %s of device %s: %w", name, device, err))
				continue
			}
			if name == legacy {
				f.mu.Lock()
				delete(f.legacyRules, device)
				f.mu.Unlock()
			} else {
				f.setRule(device, "")
			}
		}
		if deleted {
			cleared = append(cleared, device)
		}
	}
	if len(cleared) > 0 {
		klog.FromContext(ctx).Info("Cleared device faults, deleted their DeviceTaintRules", "devices", deviceNames(cleared))
	}
	return errors.Join(errs...)
}

// setRule records that device has the rule name, or none ("").
func (f *DeviceFaults) setRule(device DeviceID, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		delete(f.rules, device)
	} else {
		f.rules[device] = name
	}
	if f.changedWhileLoading != nil {
		f.changedWhileLoading[device] = struct{}{}
	}
}

// TaintedDevices returns the devices with a fault, sorted: those with a
// DeviceTaintRule as this process knows them (read by Load, written by a
// fault, deleted by ClearDeviceFault). A rule an operator deleted stays in
// the list until the device's next fault or ClearDeviceFault.
func (f *DeviceFaults) TaintedDevices() []DeviceID {
	f.mu.Lock()
	defer f.mu.Unlock()
	devices := maps.Clone(f.rules)
	maps.Copy(devices, f.legacyRules)
	return slices.SortedFunc(maps.Keys(devices), compareDeviceIDs)
}

// taintFailure is why a device did not get tainted.
type taintFailure struct {
	// reason is the value of the metric's reason label.
	reason string
	err    error
}

// taint creates a DeviceTaintRule for each of the devices (classes: the
// class of the first fault of each, "" for none), or finds the one there
// is, all within WaitTimeout. It returns why the devices that did not get
// tainted did not; those whose rule could not be written are retried in the
// background.
func (f *DeviceFaults) taint(ctx context.Context, classes map[DeviceID]string) map[DeviceID]*taintFailure {
	logger := klog.FromContext(ctx)
	start := time.Now()
	failures := map[DeviceID]*taintFailure{}
	defer func() {
		for _, failure := range failures {
			deviceTaintFailures.WithLabelValues(f.cfg.DriverName, failure.reason).Inc()
		}
	}()
	devices := slices.SortedFunc(maps.Keys(classes), compareDeviceIDs)
	if !f.enabled {
		for _, device := range devices {
			failures[device] = &taintFailure{reason: TaintFailureNotEnabled, err: errors.New("device faults are not enabled, start the driver with failfastplugin.StartWithDeviceFaults")}
		}
		return failures
	}

	ctx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout)
	defer cancel()
	taints := make(map[DeviceID]resourcerules.DeviceTaint, len(devices))
	for _, device := range devices {
		taints[device] = f.deviceTaint(classes[device])
	}
	failAll := func(err error) map[DeviceID]*taintFailure {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer from the API server within %v: %w", f.cfg.WaitTimeout, err)
		}
		for _, device := range devices {
			failures[device] = &taintFailure{reason: TaintFailurePublish, err: err}
		}
		logger.Error(err, "Tainting devices with a fault failed, retrying in the background", "devices", deviceNames(devices))
		f.retryLater(ctx, taints)
		return failures
	}
	rulesAPI, err := f.api.get(ctx)
	if err != nil {
		return failAll(err)
	}
	if err := f.lockWrite(ctx); err != nil {
		return failAll(err)
	}
	defer f.unlockWrite()
	owner, err := f.nodeOwner(ctx)
	if err != nil {
		return failAll(err)
	}
	var created []string
	retry := map[DeviceID]resourcerules.DeviceTaint{}
	// Every fault writes its rule, also for a device with a rule already:
	// a device that fails again was allocated although tainted, so its
	// rule may be gone (an operator deleted it).
	for _, device := range devices {
		taint := taints[device]
		isNew, failure := f.writeRule(ctx, rulesAPI, device, taint, owner)
		switch {
		case failure != nil && failure.reason == TaintFailurePublish:
			retry[device] = taint
			failures[device] = failure
		case failure != nil:
			failures[device] = failure
		default:
			f.retry.drop([]DeviceID{device})
			if isNew {
				created = append(created, device.String()+"="+taint.Value)
			}
		}
	}
	if len(retry) > 0 {
		f.retryLater(ctx, retry)
	}
	if len(created) > 0 {
		logger.Info("Tainted devices with a fault", "taints", created, "key", f.cfg.TaintKey, "effect", f.cfg.TaintEffect)
	}
	if len(failures) == 0 {
		deviceTaintWait.WithLabelValues(f.cfg.DriverName).Observe(time.Since(start).Seconds())
	}
	return failures
}

// deviceTaint is the taint of a fault of class.
func (f *DeviceFaults) deviceTaint(class string) resourcerules.DeviceTaint {
	now := metav1.Now().Rfc3339Copy() // what the API stores
	taint := resourcerules.DeviceTaint{
		Key:       f.cfg.TaintKey,
		Value:     f.cfg.TaintValue,
		Effect:    resourcerules.DeviceTaintEffect(f.cfg.TaintEffect),
		TimeAdded: &now,
	}
	if taint.Value == "" {
		taint.Value = taintValue(class)
	}
	return taint
}

// writeRule creates the rule of device with taint, owned by owner, or finds
// the one there is, and records it. isNew: this call created it. Called with
// the write lock held.
func (f *DeviceFaults) writeRule(ctx context.Context, rulesAPI *ruleAPI, device DeviceID, taint resourcerules.DeviceTaint, owner *metav1.OwnerReference) (isNew bool, failure *taintFailure) {
	logger := klog.FromContext(ctx)
	rule := f.rule(device, taint, owner)
	_, err := rulesAPI.create(ctx, rule)
	if apierrors.IsAlreadyExists(err) {
		// Written by an earlier fault, maybe by an earlier instance of the
		// driver on this node. It counts only if it taints this device
		// with this key and effect: the name is predictable, and whoever
		// may write rules without the shipped admission policy (an
		// administrator, another controller) could have taken it, or
		// changed it to effect None (no taint at all). Its value may
		// differ (an operator's note).
		var existing *deviceTaintRule
		existing, err = rulesAPI.get(ctx, rule.Name)
		if err == nil {
			if problem := f.ruleMismatch(existing, device); problem != "" {
				logger.Error(nil, "A DeviceTaintRule with the name of the device's rule does not taint it as the driver would: the device is not tainted; delete that rule", "rule", rule.Name, "device", device.String(), "problem", problem)
				// Short: the note on the claim's error has 128 bytes.
				return false, &taintFailure{reason: TaintFailureRuleConflict, err: fmt.Errorf("a DeviceTaintRule of its name exists and %s", problem)}
			}
			f.setRule(device, rule.Name)
			return false, nil
		}
	}
	if err != nil {
		// Short: the note on the claim's error has 128 bytes.
		failure := &taintFailure{reason: TaintFailurePublish, err: fmt.Errorf("create DeviceTaintRule: %w", err)}
		switch {
		case ctx.Err() != nil:
			failure.err = fmt.Errorf("create DeviceTaintRule: no answer from the API server within %v: %w", f.cfg.WaitTimeout, err)
		case apierrors.IsNotFound(err):
			failure.err = fmt.Errorf("the API server does not serve DeviceTaintRules: %w", err)
		}
		logger.Error(err, "Creating a DeviceTaintRule failed", "rule", rule.Name, "device", device.String())
		return false, failure
	}
	f.setRule(device, rule.Name)
	return true, nil
}

// ruleMismatch says how existing fails to taint device as this driver's
// rule would ("" if it does not).
func (f *DeviceFaults) ruleMismatch(existing *deviceTaintRule, device DeviceID) string {
	selected, ok := ruleDevice(existing)
	switch {
	case !ok || selected != device || existing.Spec.DeviceSelector.Driver == nil || *existing.Spec.DeviceSelector.Driver != f.cfg.DriverName:
		return "does not select this device"
	case existing.Spec.Taint.Key != f.cfg.TaintKey:
		return fmt.Sprintf("has taint key %q, not %q", existing.Spec.Taint.Key, f.cfg.TaintKey)
	case string(existing.Spec.Taint.Effect) != string(f.cfg.TaintEffect):
		return fmt.Sprintf("has taint effect %q, not %q", existing.Spec.Taint.Effect, f.cfg.TaintEffect)
	}
	return ""
}

// deviceNames are the devices as "pool/device", for logs.
func deviceNames(devices []DeviceID) []string {
	names := make([]string, len(devices))
	for i, device := range devices {
		names[i] = device.String()
	}
	return names
}
