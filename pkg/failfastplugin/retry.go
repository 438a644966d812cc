// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	resourcerules "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

const (
	// maxPendingTaints bounds the faults waiting for a retry of their
	// taint: a driver has a few devices, a queue of thousands means
	// something else is wrong, and the queue must not grow without end.
	maxPendingTaints = 1024
	// retryInitial and retryMax bound the wait between two tries of one
	// fault's taint: it doubles from the first to the second.
	retryInitial = time.Second
	retryMax     = 2 * time.Minute
)

// Results of one retry, the values of the retries metric's result label.
const (
	// RetryTainted: the device's rule was written.
	RetryTainted = "tainted"
	// RetryFailed: the API server did not store the rule this time; the
	// fault is tried again later.
	RetryFailed = "failed"
	// RetryConflict: a rule with the device's rule's name exists and does
	// not taint the device as the driver would: the fault leaves the
	// queue, an operator must delete that rule.
	RetryConflict = "conflict"
	// RetryDropped: the queue was full (maxPendingTaints), the fault did
	// not enter it.
	RetryDropped = "dropped"
)

// pendingTaint is a fault whose taint could not be written yet.
type pendingTaint struct {
	taint    resourcerules.DeviceTaint
	attempts int
	next     time.Time
	since    time.Time
}

// retryQueue holds the faults whose DeviceTaintRule could not be written
// within their prepare call's wait (an API brownout, a slow Node read, the
// driver's flow-control share used up): each is tried again, with backoff,
// until its rule exists or ClearDeviceFault clears it. One goroutine works
// it while it is not empty.
type retryQueue struct {
	driver string

	mu      sync.Mutex
	pending map[DeviceID]*pendingTaint
	running bool
	// wake tells the running worker that a fault came in.
	wake chan struct{}

	initial, max time.Duration
}

func (q *retryQueue) init(driver string) {
	q.driver = driver
	q.pending = map[DeviceID]*pendingTaint{}
	q.wake = make(chan struct{}, 1)
	q.initial, q.max = retryInitial, retryMax
}

// drop removes devices from the queue: cleared, or tainted by a new fault.
func (q *retryQueue) drop(devices []DeviceID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, device := range devices {
		delete(q.pending, device)
	}
	deviceTaintPending.WithLabelValues(q.driver).Set(float64(len(q.pending)))
}

// pendingDevices returns the devices waiting for a retry, sorted.
func (q *retryQueue) pendingDevices() []DeviceID {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.SortedFunc(maps.Keys(q.pending), compareDeviceIDs)
}

// PendingTaints returns the devices with a fault whose DeviceTaintRule could
// not be written yet, sorted: the library keeps trying in the background.
func (f *DeviceFaults) PendingTaints() []DeviceID { return f.retry.pendingDevices() }

// retryLater queues taints for a retry, and starts the worker if none runs:
// with the context of LoadInBackground, else one that ends only when the
// queue is empty (ctx's values, not its end: ctx is a prepare call's).
func (f *DeviceFaults) retryLater(ctx context.Context, taints map[DeviceID]resourcerules.DeviceTaint) {
	logger := klog.FromContext(ctx)
	q := &f.retry
	now := time.Now()
	q.mu.Lock()
	var dropped []DeviceID
	for _, device := range slices.SortedFunc(maps.Keys(taints), compareDeviceIDs) {
		if _, queued := q.pending[device]; !queued && len(q.pending) >= maxPendingTaints {
			dropped = append(dropped, device)
			continue
		}
		// A new fault starts over: its own taint, the first wait.
		q.pending[device] = &pendingTaint{taint: taints[device], next: now.Add(q.initial), since: now}
	}
	deviceTaintPending.WithLabelValues(q.driver).Set(float64(len(q.pending)))
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if len(dropped) > 0 {
		deviceTaintRetries.WithLabelValues(q.driver, RetryDropped).Add(float64(len(dropped)))
		logger.Error(nil, "Too many device faults wait for their taint: these are not retried, taint them by hand or restart the driver once the API server answers", "devices", deviceNames(dropped), "limit", maxPendingTaints)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if !start {
		return
	}
	f.mu.Lock()
	background := f.background
	f.mu.Unlock()
	if background == nil {
		background = context.WithoutCancel(ctx)
	}
	go f.runRetries(klog.NewContext(background, logger.WithName("taint-retry")))
}

// runRetries tries the queue's faults when they are due, until the queue is
// empty or ctx ends.
func (f *DeviceFaults) runRetries(ctx context.Context) {
	logger := klog.FromContext(ctx)
	q := &f.retry
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		next := time.Time{}
		for _, p := range q.pending {
			if next.IsZero() || p.next.Before(next) {
				next = p.next
			}
		}
		q.mu.Unlock()
		timer.Reset(max(time.Until(next), 0))
		select {
		case <-ctx.Done():
			q.mu.Lock()
			q.running = false
			left := len(q.pending)
			q.mu.Unlock()
			logger.Info("Stopped retrying the taints of device faults", "pending", left)
			return
		case <-q.wake:
			continue
		case <-timer.C:
		}
		f.retryDue(ctx)
	}
}

// retryDue tries the faults that are due, within one WaitTimeout.
func (f *DeviceFaults) retryDue(ctx context.Context) {
	logger := klog.FromContext(ctx)
	q := &f.retry
	now := time.Now()
	q.mu.Lock()
	var due []DeviceID
	for device, p := range q.pending {
		if !p.next.After(now) {
			due = append(due, device)
		}
	}
	q.mu.Unlock()
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, compareDeviceIDs)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout)
	defer cancel()
	rulesAPI, err := f.api.get(ctx)
	if err == nil {
		if err = f.lockWrite(ctx); err == nil {
			defer f.unlockWrite()
		}
	}
	var owner *metav1.OwnerReference
	if err == nil {
		owner, err = f.nodeOwner(ctx)
	}
	for _, device := range due {
		q.mu.Lock()
		p, queued := q.pending[device]
		var taint resourcerules.DeviceTaint
		if queued {
			taint = p.taint
		}
		q.mu.Unlock()
		if !queued {
			continue // cleared, or tainted by a new fault, meanwhile
		}
		var failure *taintFailure
		if err == nil {
			_, failure = f.writeRule(ctx, rulesAPI, device, taint, owner)
		} else {
			failure = &taintFailure{reason: TaintFailurePublish, err: err}
		}
		q.mu.Lock()
		p, queued = q.pending[device]
		switch {
		case !queued:
		case failure == nil || failure.reason != TaintFailurePublish:
			delete(q.pending, device)
		default:
			p.attempts++
			p.next = time.Now().Add(min(q.initial<<min(p.attempts, 20), q.max))
		}
		deviceTaintPending.WithLabelValues(q.driver).Set(float64(len(q.pending)))
		q.mu.Unlock()
		switch {
		case !queued:
		case failure == nil:
			deviceTaintRetries.WithLabelValues(q.driver, RetryTainted).Inc()
			logger.Info("Tainted a device with a fault after retrying", "device", device.String(), "key", taint.Key, "value", taint.Value, "effect", taint.Effect, "attempts", p.attempts+1, "after", time.Since(p.since).Round(time.Millisecond))
		case failure.reason == TaintFailurePublish:
			deviceTaintRetries.WithLabelValues(q.driver, RetryFailed).Inc()
			logger.V(2).Info("Tainting a device with a fault failed again, retrying later", "device", device.String(), "err", failure.err, "attempts", p.attempts, "next", p.next)
		default:
			deviceTaintRetries.WithLabelValues(q.driver, RetryConflict).Inc()
			logger.Error(failure.err, "Not retrying the taint of a device with a fault", "device", device.String())
		}
	}
}
