// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager/checksum"
	checkpointerrors "k8s.io/kubernetes/pkg/kubelet/checkpointmanager/errors"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
)

const (
	// PreparedPodsCheckpoint is the record of prepared pods, a file beside
	// the DRA manager's checkpoint in the kubelet's root directory.
	PreparedPodsCheckpoint = "dra_failfast_prepared_pods"
	// draManagerCheckpoint is the DRA manager's own checkpoint (upstream's
	// draManagerStateFileName; a test in the patched tree checks the two).
	draManagerCheckpoint = "dra_manager_state"
	preparedPodsVersion  = "v1"
)

// preparedPods records, across kubelet restarts and reboots, the pods whose
// claims the kubelet prepared at least once: every driver answered without
// error, so the kubelet went on to create the pod's sandbox. Such a pod is
// never failed for a permanent answer: it may have had a sandbox or run
// containers that the container runtime has forgotten since (a runtime that
// drops sandboxes at reboot, crictl rmp), and whose statuses never reached
// the API. The runtime's view (DowngradeIfMayHaveRun) cannot tell.
//
// Why a file of our own: the DRA manager's checkpoint lists a pod on a claim
// before the driver is called, and records devices per claim, not per pod: a
// pod that shares a claim prepared for another pod, or whose driver returns
// no device, cannot be told apart from one that was prepared. Changing that
// checkpoint's format would break the stock kubelet and the previous fork
// reading it (a node swapped fork -> stock -> fork); a file beside it is
// ignored by both. The file is a kubelet checkpoint (checksum, written to a
// temporary file and renamed, through the kubelet's checkpointmanager).
//
// An entry is added once per pod (the first successful prepare) and dropped
// when the DRA checkpoint no longer lists the pod (its claims unprepared).
// The file is written for it only when the DRA checkpoint cannot prove it:
// a pod whose every driver returned devices for every claim is found there
// after a restart (below), so a healthy pod costs the record no write.
// Pods that a kubelet without the record prepared (the stock kubelet, an
// earlier fork) are added when the kubelet starts, from the DRA checkpoint:
// a pod listed on claims that all have devices for every driver that
// prepares them. Errors never fail a pod: an unreadable or damaged record is
// logged and rebuilt that way; a record that cannot be written is logged, and
// the pod stays recorded in memory.
type preparedPods struct {
	mu sync.Mutex
	// uids is nil until load or the first add.
	uids sets.Set[types.UID]
	// fresh are the pods added since the last write began: kept when that
	// write drops the pods the DRA checkpoint no longer lists.
	fresh sets.Set[types.UID]
	// changes counts the adds; written is the count that the file holds.
	changes, written uint64
	// writing serializes writes of the file. They happen outside mu, so
	// has never waits behind a write; adds that come during a write share
	// the next one.
	writing sync.Mutex
	// checkpoints is the kubelet's root directory; nil: memory only.
	checkpoints checkpointmanager.CheckpointManager
	// draCheckpoint reads the DRA manager's checkpoint in that directory:
	// a manager of its own, so that a pod's read never waits behind the
	// record's write (a CheckpointManager holds one mutex for both).
	draCheckpoint checkpointmanager.CheckpointManager
	// dir is that directory, for messages.
	dir string
}

// load reads the record from stateDir and adds the pods that the DRA
// checkpoint shows prepared.
func (p *preparedPods) load(logger klog.Logger, stateDir string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.uids, p.fresh = sets.New[types.UID](), sets.New[types.UID]()
	checkpoints, err := checkpointmanager.NewCheckpointManager(stateDir)
	if err != nil {
		logger.Error(err, "DRA: record of prepared pods kept in memory only", "dir", stateDir)
		return
	}
	draCheckpoint, err := checkpointmanager.NewCheckpointManager(stateDir)
	if err != nil {
		logger.Error(err, "DRA: record of prepared pods kept in memory only", "dir", stateDir)
		return
	}
	p.checkpoints, p.draCheckpoint, p.dir = checkpoints, draCheckpoint, stateDir
	var record preparedPodsFile
	switch err := checkpoints.GetCheckpoint(PreparedPodsCheckpoint, &record); {
	case errors.Is(err, checkpointerrors.ErrCheckpointNotFound):
	case err != nil:
		logger.Error(err, "DRA: record of prepared pods unreadable, rebuilding it from the DRA checkpoint", "dir", stateDir, "checkpoint", PreparedPodsCheckpoint)
	default:
		for _, uid := range record.PodUIDs {
			p.uids.Insert(types.UID(uid))
		}
	}
	claims, err := p.draClaims()
	if err != nil {
		logger.Error(err, "DRA: DRA checkpoint unreadable, record of prepared pods not checked against it", "dir", stateDir)
		return
	}
	recorded := p.uids.Len()
	p.uids = p.uids.Intersection(podsOnClaims(claims)).Union(podsPrepared(claims))
	if err := checkpoints.CreateCheckpoint(PreparedPodsCheckpoint, p.record()); err != nil {
		logger.Error(err, "DRA: record of prepared pods not written", "dir", stateDir, "checkpoint", PreparedPodsCheckpoint)
	}
	logger.V(2).Info("DRA: record of prepared pods loaded", "recorded", recorded, "pods", p.uids.Len())
}

// maxUnwritten is how many pods the record may hold that its file does not:
// pods the DRA checkpoint proves prepared (add), which load finds there.
// Every maxUnwritten-th such pod writes the file all the same, which drops
// from memory the pods the DRA checkpoint no longer lists (again
// maxUnwritten pods later if that write failed).
const maxUnwritten = 64

// add records that pod uid's claims were prepared; devices are the devices
// each driver returned for the claims prepared now, per claim and driver, and
// preparedNow tells that those were all of the pod's claims, each with
// devices from every driver. Only the first call for a pod writes the file,
// before it returns, and not even that one when the DRA manager's checkpoint
// will prove the pod prepared by itself (podsPrepared, what load reads after
// a restart): the DRA manager writes it, with those devices, before the
// kubelet creates the pod's sandbox. So a healthy pod costs the record no
// disk write (fsync) unless a driver returned no device for a claim, and no
// read either when preparedNow. The write also drops the pods that the DRA
// checkpoint no longer lists.
func (p *preparedPods) add(logger klog.Logger, uid types.UID, devices map[types.UID]map[string]int, preparedNow bool) {
	p.mu.Lock()
	if p.uids.Has(uid) {
		p.mu.Unlock()
		return
	}
	if p.uids == nil {
		p.uids, p.fresh = sets.New[types.UID](), sets.New[types.UID]()
	}
	p.uids.Insert(uid)
	p.fresh.Insert(uid)
	p.changes++
	memoryOnly := p.checkpoints == nil
	unwritten := p.changes - p.written
	p.mu.Unlock()
	// Only the pod that brings the unwritten count to a multiple of
	// maxUnwritten writes for housekeeping: the pods of a batch prepared at
	// once do not queue behind its fsync.
	if memoryOnly || unwritten%maxUnwritten != 0 && (preparedNow || p.proven(uid, devices)) {
		return
	}
	if err := p.write(); err != nil {
		logger.Error(err, "DRA: record of prepared pods not written; after a kubelet restart this pod may be failed for a permanent driver answer although it had a sandbox", "podUID", uid, "dir", p.dir, "checkpoint", PreparedPodsCheckpoint)
	}
}

// write brings the file up to date with the record, unless a write that
// began after the caller's add did so already.
func (p *preparedPods) write() error {
	p.writing.Lock()
	defer p.writing.Unlock()
	p.mu.Lock()
	done := p.written == p.changes
	p.mu.Unlock()
	if done {
		return nil
	}
	claims, err := p.draClaims()
	p.mu.Lock()
	if err == nil {
		p.uids = p.uids.Intersection(podsOnClaims(claims).Union(p.fresh))
	}
	p.fresh = sets.New[types.UID]()
	record, changes := p.record(), p.changes
	p.mu.Unlock()
	if err := p.checkpoints.CreateCheckpoint(PreparedPodsCheckpoint, record); err != nil {
		return err
	}
	p.mu.Lock()
	p.written = changes
	p.mu.Unlock()
	return nil
}

// proven tells whether the DRA checkpoint, once the DRA manager has added
// devices (the claims prepared now), shows pod uid prepared.
func (p *preparedPods) proven(uid types.UID, devices map[types.UID]map[string]int) bool {
	claims, err := p.draClaims()
	if err != nil {
		return false
	}
	for i := range claims {
		for driver, count := range devices[claims[i].ClaimUID] {
			if claims[i].DriverState == nil {
				claims[i].DriverState = map[string]state.DriverState{}
			}
			driverState := claims[i].DriverState[driver]
			driverState.Devices = make([]state.Device, count)
			claims[i].DriverState[driver] = driverState
		}
	}
	return podsPrepared(claims).Has(uid)
}

// has tells whether pod uid's claims were prepared before.
func (p *preparedPods) has(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.uids.Has(uid)
}

// record is the file's content for uids; the caller holds mu.
func (p *preparedPods) record() *preparedPodsFile {
	record := &preparedPodsFile{Version: preparedPodsVersion, PodUIDs: make([]string, 0, p.uids.Len())}
	for uid := range p.uids {
		record.PodUIDs = append(record.PodUIDs, string(uid))
	}
	slices.Sort(record.PodUIDs)
	return record
}

// draClaims reads the DRA manager's checkpoint (without creating it).
func (p *preparedPods) draClaims() (state.ClaimInfoStateList, error) {
	checkpoint, err := state.NewCheckpoint(nil)
	if err != nil {
		return nil, err
	}
	if err := p.draCheckpoint.GetCheckpoint(draManagerCheckpoint, checkpoint); err != nil {
		if errors.Is(err, checkpointerrors.ErrCheckpointNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return checkpoint.GetClaimInfoStateList()
}

// podsOnClaims lists the pods that claims reference.
func podsOnClaims(claims state.ClaimInfoStateList) sets.Set[types.UID] {
	pods := sets.New[types.UID]()
	for _, claim := range claims {
		for uid := range claim.PodUIDs {
			pods.Insert(types.UID(uid))
		}
	}
	return pods
}

// podsPrepared lists the pods whose every claim looks prepared: each driver
// that prepares it recorded devices. It can name a pod that was never
// prepared (its claims were all prepared for other pods), never one that
// has a claim that was not prepared.
func podsPrepared(claims state.ClaimInfoStateList) sets.Set[types.UID] {
	pods, unprepared := sets.New[types.UID](), sets.New[types.UID]()
	for _, claim := range claims {
		prepared := true
		for _, driver := range claim.DriverState {
			if len(driver.Devices) == 0 && !skipsPrepare(driver) {
				prepared = false
			}
		}
		for uid := range claim.PodUIDs {
			if prepared {
				pods.Insert(types.UID(uid))
			} else {
				unprepared.Insert(types.UID(uid))
			}
		}
	}
	return pods.Difference(unprepared)
}

// preparedPodsFile is the record on disk, a kubelet checkpoint.
type preparedPodsFile struct {
	Version  string            `json:"version"`
	PodUIDs  []string          `json:"podUIDs"`
	Checksum checksum.Checksum `json:"checksum"`
}

func (f *preparedPodsFile) MarshalCheckpoint() ([]byte, error) {
	f.Checksum = checksum.New(f.PodUIDs)
	return json.Marshal(f)
}

func (f *preparedPodsFile) UnmarshalCheckpoint(blob []byte) error {
	return json.Unmarshal(blob, f)
}

func (f *preparedPodsFile) VerifyChecksum() error {
	if f.Version != preparedPodsVersion {
		return fmt.Errorf("version %q, want %q", f.Version, preparedPodsVersion)
	}
	return f.Checksum.Verify(f.PodUIDs)
}
