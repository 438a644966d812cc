// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"

	"github.com/dra-failfast/dra-failfast/api/draplugin/v1alpha"
)

// kubeletState is a kubelet's root directory in a test: the DRA manager's
// checkpoint (written by the test, as the DRA manager would) and our record.
type kubeletState struct {
	t   testing.TB
	dir string
}

func newKubeletState(t *testing.T) *kubeletState {
	return &kubeletState{t: t, dir: t.TempDir()}
}

// claim is one claim of the DRA checkpoint: the pods listed on it, and the
// devices recorded per driver (nil: none yet; skip: the driver does not
// prepare it).
type claim struct {
	uid     string
	pods    []string
	devices map[string][]string
	skip    []string
}

func (k *kubeletState) writeDRACheckpoint(claims ...claim) {
	k.t.Helper()
	var list state.ClaimInfoStateList
	for _, c := range claims {
		s := state.ClaimInfoState{ClaimUID: types.UID(c.uid), ClaimName: "claim-" + c.uid, Namespace: "ns", PodUIDs: sets.New(c.pods...), DriverState: map[string]state.DriverState{}}
		for driver, devices := range c.devices {
			var ds state.DriverState
			for _, d := range devices {
				ds.Devices = append(ds.Devices, state.Device{PoolName: "pool", DeviceName: d})
			}
			s.DriverState[driver] = ds
		}
		for _, driver := range c.skip {
			skipping, ok := skippingDriverState()
			if !ok {
				k.t.Fatal("this Kubernetes version has no drivers that skip node operations")
			}
			s.DriverState[driver] = skipping
		}
		list = append(list, s)
	}
	checkpoint, err := state.NewCheckpoint(list)
	if err != nil {
		k.t.Fatal(err)
	}
	manager, err := checkpointmanager.NewCheckpointManager(k.dir)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := manager.CreateCheckpoint(draManagerCheckpoint, checkpoint); err != nil {
		k.t.Fatal(err)
	}
}

// kubelet starts a kubelet's Manager on the directory (no policy file, no
// goroutine) and returns it with the context of its prepares and its log
// (verbosity 0).
func (k *kubeletState) kubelet() (*Manager, context.Context, interface{ String() string }) {
	k.t.Helper()
	k.t.Setenv(DriverPolicyEnv, filepath.Join(k.t.TempDir(), "driver-policy.yaml"))
	if err := os.WriteFile(os.Getenv(DriverPolicyEnv), []byte(policyHeader), 0o600); err != nil {
		k.t.Fatal(err)
	}
	ctx, logs := quietContext(k.t)
	m := &Manager{}
	if err := m.start(klog.FromContext(ctx), k.dir, 0); err != nil {
		k.t.Fatalf("Start: %v", err)
	}
	return m, ctx, logs
}

// recorded lists the pods in the record on disk.
func (k *kubeletState) recorded() []string {
	k.t.Helper()
	manager, err := checkpointmanager.NewCheckpointManager(k.dir)
	if err != nil {
		k.t.Fatal(err)
	}
	var record preparedPodsFile
	if err := manager.GetCheckpoint(PreparedPodsCheckpoint, &record); err != nil {
		k.t.Fatalf("record of prepared pods: %v", err)
	}
	return record.PodUIDs
}

// prepare runs one prepare attempt of pod (with claims in its spec) whose one
// claim's driver answers errorType (-1: success) and returns its error.
func prepare(ctx context.Context, m *Manager, pod string, errorType v1alpha.NodePrepareResourceResponseErrorType) error {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod, UID: types.UID(pod)},
		Spec:       v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu"}}},
	}
	failures := m.NewPrepareFailures(p, nil)
	resp := &drapbv1.NodePrepareResourceResponse{}
	if errorType >= 0 {
		resp = claimResp("device fell off the bus", errorType)
	}
	failures.Record(ctx, "d.example.com", sentClaims("a"), &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{"a": resp}}, nil)
	return failures.Err(ctx)
}

// TestPreparedPodSurvivesLostSandbox: a pod whose claims were prepared once is
// never failed for a permanent answer after a kubelet restart, even though
// nothing else remembers that it may have had a sandbox; a pod that was
// never prepared still fails fast after the restart.
func TestPreparedPodSurvivesLostSandbox(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	k.writeDRACheckpoint(claim{uid: "a", pods: []string{"ran", "never-ran"}, devices: map[string][]string{"d.example.com": nil}})
	m, ctx, _ := k.kubelet()
	if err := prepare(ctx, m, "ran", -1); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := prepare(ctx, m, "never-ran", v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_UNKNOWN); err == nil || IsPermanent(err) {
		t.Fatalf("transient answer: %v", err)
	}
	if got := k.recorded(); !slices.Equal(got, []string{"ran"}) {
		t.Errorf("record = %v, want [ran]", got)
	}

	// The kubelet restarts: a new Manager on the same directory.
	m, ctx, logs := k.kubelet()
	counter := permanentDowngrades.WithLabelValues("d.example.com", DowngradePreparedBefore)
	before, _ := testutil.GetCounterMetricValue(counter)
	for range 2 {
		err := prepare(ctx, m, "ran", v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT)
		var downgraded *DowngradedError
		if IsPermanent(err) || !errors.As(err, &downgraded) {
			t.Fatalf("pod prepared before: %v, want a *DowngradedError", err)
		}
		if want := "the pod's claims were prepared for it before, so it may have had a sandbox: not failing the pod, will retry"; !strings.Contains(err.Error(), want) {
			t.Errorf("text %q does not contain %q", err, want)
		}
	}
	if after, _ := testutil.GetCounterMetricValue(counter); after-before != 2 {
		t.Errorf("%s downgrades grew by %v, want 2", DowngradePreparedBefore, after-before)
	}
	if n := strings.Count(logs.String(), "Not failing pod"); n != 1 {
		t.Errorf("logged %d times for two downgrades of one pod, want 1:\n%s", n, logs)
	}
	if err := prepare(ctx, m, "never-ran", v1alpha.NodePrepareResourceResponseErrorType_ERROR_TYPE_PERMANENT); !IsPermanent(err) {
		t.Errorf("pod never prepared: %v, want permanent", err)
	}
}

// TestPreparedPodsFromDRACheckpoint: when the kubelet starts, the record
// takes in the pods that the DRA checkpoint shows prepared (a node that ran
// the stock kubelet or an earlier fork, or whose record was damaged), and
// drops the pods that it no longer lists.
func TestPreparedPodsFromDRACheckpoint(t *testing.T) {
	enableFeature(t, true)
	for name, record := range map[string][]byte{
		"no record":      nil,
		"damaged record": []byte(`{"version":"v1","podUIDs":["gone"],"checksum":1}`),
		"other version":  []byte(`{"version":"v9","podUIDs":["gone"]}`),
	} {
		t.Run(name, func(t *testing.T) {
			k := newKubeletState(t)
			claims := []claim{
				{uid: "a", pods: []string{"prepared", "shared"}, devices: map[string][]string{"d1": {"gpu-0"}}},
				{uid: "b", pods: []string{"shared"}, devices: map[string][]string{"d1": nil}},
				{uid: "c", pods: []string{"not-prepared"}, devices: map[string][]string{"d1": nil}},
				{uid: "d", pods: []string{"half-prepared"}, devices: map[string][]string{"d1": {"gpu-1"}, "d2": nil}},
			}
			want := []string{"prepared"}
			if _, ok := skippingDriverState(); ok {
				claims = append(claims, claim{uid: "e", pods: []string{"no-prepare-needed"}, skip: []string{"d3"}})
				want = []string{"no-prepare-needed", "prepared"}
			}
			k.writeDRACheckpoint(claims...)
			if record != nil {
				if err := os.WriteFile(filepath.Join(k.dir, PreparedPodsCheckpoint), record, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			m, _, logs := k.kubelet()
			if got := k.recorded(); !slices.Equal(got, want) {
				t.Errorf("record = %v, want %v", got, want)
			}
			for _, pod := range []string{"shared", "not-prepared", "half-prepared", "gone"} {
				if m.prepared.has(types.UID(pod)) {
					t.Errorf("pod %s recorded as prepared", pod)
				}
			}
			if damaged := record != nil; damaged != strings.Contains(logs.String(), PreparedPodsCheckpoint) {
				t.Errorf("damaged record %v, but logged:\n%s", damaged, logs)
			}
		})
	}
}

// TestPreparedPodsRecord: the record keeps the pods that the DRA checkpoint
// lists and only those; a pod without claims, or any pod with the gate off,
// is never written.
func TestPreparedPodsRecord(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	k.writeDRACheckpoint(claim{uid: "a", pods: []string{"old", "new"}, devices: map[string][]string{"d.example.com": nil}})
	m, ctx, _ := k.kubelet()
	for _, pod := range []string{"old", "new"} {
		if err := prepare(ctx, m, pod, -1); err != nil {
			t.Fatal(err)
		}
	}
	// "old" finished: the DRA manager unprepared its claims.
	k.writeDRACheckpoint(claim{uid: "b", pods: []string{"newer"}, devices: map[string][]string{"d.example.com": nil}})
	if err := prepare(ctx, m, "newer", -1); err != nil {
		t.Fatal(err)
	}
	if got, want := k.recorded(), []string{"newer"}; !slices.Equal(got, want) {
		t.Errorf("record = %v, want %v", got, want)
	}
	failures := m.NewPrepareFailures(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "no-claims"}}, nil)
	if err := failures.Err(ctx); err != nil || m.prepared.has("no-claims") {
		t.Errorf("pod without claims: %v, recorded %v", err, m.prepared.has("no-claims"))
	}

	enableFeature(t, false)
	off := newKubeletState(t)
	m, ctx, _ = off.kubelet()
	if err := prepare(ctx, m, "pod", -1); err != nil || m.prepared.has("pod") {
		t.Errorf("gate off: %v, recorded %v", err, m.prepared.has("pod"))
	}
	if entries, _ := os.ReadDir(off.dir); len(entries) != 0 {
		t.Errorf("gate off: kubelet directory has %d files, want none", len(entries))
	}
}

// Pods prepared at once share the record's writes and none is lost: each
// add returns once the file holds its pod (a later reader, the restarted
// kubelet, sees them all), while the pods the DRA checkpoint no longer lists
// still leave.
func TestPreparedPodsConcurrentAdds(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	var pods []string
	for i := range 40 {
		pods = append(pods, fmt.Sprintf("pod-%02d", i))
	}
	k.writeDRACheckpoint(claim{uid: "a", pods: []string{"gone"}, devices: map[string][]string{"d.example.com": {"dev"}}},
		claim{uid: "b", pods: pods, devices: map[string][]string{"d.example.com": nil}})
	m, ctx, _ := k.kubelet()
	if got := k.recorded(); !slices.Equal(got, []string{"gone"}) {
		t.Fatalf("record at start = %v, want [gone]", got)
	}
	k.writeDRACheckpoint(claim{uid: "b", pods: pods, devices: map[string][]string{"d.example.com": {"dev"}}})
	// Slow writes, so that adds come while a write is under way.
	m.prepared.checkpoints = slowCheckpoints{m.prepared.checkpoints}
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 100 * time.Microsecond) // spread over several writes
			m.prepared.add(klog.FromContext(ctx), types.UID(pod), noDevice("b"), false)
			if !slices.Contains(k.recorded(), pod) {
				t.Errorf("add(%s) returned before the record held it", pod)
			}
		})
	}
	wg.Wait()
	if got := k.recorded(); !slices.Equal(got, pods) {
		t.Errorf("record = %v, want %v", got, pods)
	}
}

// slowCheckpoints writes checkpoints a millisecond late.
type slowCheckpoints struct {
	checkpointmanager.CheckpointManager
}

func (s slowCheckpoints) CreateCheckpoint(key string, checkpoint checkpointmanager.Checkpoint) error {
	time.Sleep(time.Millisecond)
	return s.CheckpointManager.CreateCheckpoint(key, checkpoint)
}

// A pod prepared while another pod's write is under way (the DRA manager
// checkpointed it after that write read the DRA checkpoint) is neither
// dropped by that write nor taken as written by it.
func TestPreparedPodAddedDuringAWrite(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	k.writeDRACheckpoint(claim{uid: "a", pods: []string{"y"}, devices: map[string][]string{"d.example.com": nil}})
	m, ctx, _ := k.kubelet()
	logger := klog.FromContext(ctx)
	added := make(chan struct{})
	hooked := &hookedCheckpoints{CheckpointManager: m.prepared.draCheckpoint}
	hooked.afterDRARead = func() {
		k.writeDRACheckpoint(claim{uid: "a", pods: []string{"y"}, devices: map[string][]string{"d.example.com": {"dev"}}},
			claim{uid: "b", pods: []string{"x"}, devices: map[string][]string{"d.example.com": {"dev"}}})
		go func() {
			defer close(added)
			m.prepared.add(logger, "x", noDevice("b"), false)
		}()
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			m.prepared.mu.Lock()
			defer m.prepared.mu.Unlock()
			return m.prepared.uids.Has("x"), nil
		})
		if err != nil {
			t.Errorf("add(x) did not record x: %v", err)
		}
	}
	m.prepared.draCheckpoint = hooked
	m.prepared.add(logger, "y", noDevice("a"), false)
	<-added
	if !m.prepared.has("x") || !slices.Equal(k.recorded(), []string{"x", "y"}) {
		t.Errorf("x recorded in memory: %v, on disk: %v; want both x and y", m.prepared.has("x"), k.recorded())
	}
}

// noDevice is what add gets when the driver returned no device for claims:
// the DRA checkpoint cannot prove the pod prepared, so add writes the record.
func noDevice(claims ...string) map[types.UID]map[string]int {
	devices := map[types.UID]map[string]int{}
	for _, claim := range claims {
		devices[types.UID(claim)] = map[string]int{"d.example.com": 0}
	}
	return devices
}

// A pod whose drivers returned devices for every claim is proven prepared by
// the DRA manager's checkpoint, which that manager writes with the devices
// before the kubelet creates the sandbox: the record is not written for it
// (no disk write on the healthy path), and after a kubelet restart the pod
// is in the record all the same. Every maxUnwritten-th such pod writes the
// record, which drops from memory the pods the DRA checkpoint no longer
// lists.
func TestPreparedPodProvenByDRACheckpoint(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	// The DRA manager lists the pod on its claim before calling the driver.
	k.writeDRACheckpoint(claim{uid: "a", pods: []string{"ran", "gone"}, devices: map[string][]string{"d.example.com": nil}})
	m, ctx, _ := k.kubelet()
	logger := klog.FromContext(ctx)
	if got := k.recorded(); len(got) != 0 {
		t.Fatalf("record at start = %v, want empty", got)
	}
	m.prepared.add(logger, "ran", map[types.UID]map[string]int{"a": {"d.example.com": 1}}, false)
	if !m.prepared.has("ran") {
		t.Error("pod proven by the DRA checkpoint: not in the record in memory")
	}
	if got := k.recorded(); len(got) != 0 {
		t.Errorf("record on disk = %v, want empty: the DRA checkpoint proves the pod", got)
	}

	// The DRA manager then checkpoints the devices; the kubelet restarts.
	k.writeDRACheckpoint(claim{uid: "a", pods: []string{"ran"}, devices: map[string][]string{"d.example.com": {"dev"}}})
	m, ctx, _ = k.kubelet()
	logger = klog.FromContext(ctx)
	if !m.prepared.has("ran") {
		t.Error("pod proven by the DRA checkpoint: not in the record after a restart")
	}

	// Many healthy pods: the record is written every maxUnwritten-th, and
	// then drops what the DRA checkpoint no longer lists.
	var claims []claim
	for i := range maxUnwritten {
		claims = append(claims, claim{uid: fmt.Sprintf("c-%02d", i), pods: []string{fmt.Sprintf("p-%02d", i)}, devices: map[string][]string{"d.example.com": nil}})
	}
	k.writeDRACheckpoint(claims...)
	for i, c := range claims {
		m.prepared.add(logger, types.UID(c.pods[0]), map[types.UID]map[string]int{types.UID(c.uid): {"d.example.com": 1}}, false)
		if written := len(k.recorded()); i < maxUnwritten-2 && written != 1 {
			t.Fatalf("after %d healthy pods the record on disk holds %d pods, want 1 (ran, from the restart)", i+1, written)
		}
	}
	got := k.recorded()
	if len(got) != maxUnwritten || slices.Contains(got, "ran") || slices.Contains(got, "gone") {
		t.Errorf("after %d healthy pods the record on disk = %v, want those pods alone", maxUnwritten, got)
	}
}

// hookedCheckpoints calls afterDRARead once, after the first read of the
// DRA manager's checkpoint.
type hookedCheckpoints struct {
	checkpointmanager.CheckpointManager
	afterDRARead func()
}

func (h *hookedCheckpoints) GetCheckpoint(key string, checkpoint checkpointmanager.Checkpoint) error {
	err := h.CheckpointManager.GetCheckpoint(key, checkpoint)
	if hook := h.afterDRARead; key == draManagerCheckpoint && hook != nil {
		h.afterDRARead = nil
		hook()
	}
	return err
}

// BenchmarkPreparedPodsAdd measures what the record costs a pod's first
// prepare with the DRA checkpoint of a node that runs 100 DRA pods: a
// healthy pod ("record, every claim prepared now": a write every
// maxUnwritten pods; "record": a pod with a claim prepared before, for another
// pod, which adds a read of the DRA checkpoint), a pod whose driver returned no device ("record, no
// device": a read and a write with fsync), and for comparison one write of
// the DRA manager's own checkpoint ("DRA checkpoint"), which every kubelet
// makes at least twice per prepare.
func BenchmarkPreparedPodsAdd(b *testing.B) {
	enableFeature(b, true)
	k := &kubeletState{t: b, dir: b.TempDir()}
	var pods []string
	for i := range 100 {
		pods = append(pods, fmt.Sprintf("pod-%03d", i))
	}
	var claims []claim
	for i, pod := range pods {
		claims = append(claims, claim{uid: fmt.Sprintf("claim-%03d", i), pods: []string{pod}, devices: map[string][]string{"d.example.com": {"dev"}}})
	}
	k.writeDRACheckpoint(claims...)
	m, ctx, _ := k.kubelet()
	logger := klog.FromContext(ctx)
	// Each add is a new pod; the DRA checkpoint lists it, so the record
	// keeps growing like a node's: take one of the 100 and drop it from
	// memory first.
	addEach := func(b *testing.B, devices func(claim string) map[types.UID]map[string]int, preparedNow bool) {
		for i := 0; b.Loop(); i++ {
			uid := types.UID(pods[i%len(pods)])
			m.prepared.mu.Lock()
			m.prepared.uids.Delete(uid)
			m.prepared.mu.Unlock()
			m.prepared.add(logger, uid, devices(claims[i%len(claims)].uid), preparedNow)
		}
	}
	oneDevice := func(claim string) map[types.UID]map[string]int {
		return map[types.UID]map[string]int{types.UID(claim): {"d.example.com": 1}}
	}
	b.Run("record, every claim prepared now", func(b *testing.B) { addEach(b, oneDevice, true) })
	b.Run("record", func(b *testing.B) { addEach(b, oneDevice, false) })
	b.Run("record, no device", func(b *testing.B) {
		addEach(b, func(claim string) map[types.UID]map[string]int { return noDevice(claim) }, false)
	})
	b.Run("DRA checkpoint", func(b *testing.B) {
		for b.Loop() {
			k.writeDRACheckpoint(claims...)
		}
	})
}

// everyClaimPreparedNow decides whether add may skip the read of the DRA
// checkpoint: only when every claim of the pod was prepared in this attempt
// and every driver returned devices for it.
func TestEveryClaimPreparedNow(t *testing.T) {
	named := func(name string) v1.PodResourceClaim {
		return v1.PodResourceClaim{Name: name, ResourceClaimName: &name}
	}
	fromTemplate := func(name string) v1.PodResourceClaim {
		template := "template"
		return v1.PodResourceClaim{Name: name, ResourceClaimTemplateName: &template}
	}
	generated := func(podClaim, claim string) v1.PodResourceClaimStatus {
		return v1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: &claim}
	}
	for name, tc := range map[string]struct {
		podClaims []v1.PodResourceClaim
		statuses  []v1.PodResourceClaimStatus
		extended  string
		// prepared: the claims prepared now, each with the device count of
		// its one driver.
		prepared map[string]int
		want     bool
	}{
		"one claim, devices":                {podClaims: []v1.PodResourceClaim{named("a")}, prepared: map[string]int{"a": 1}, want: true},
		"one claim, no device":              {podClaims: []v1.PodResourceClaim{named("a")}, prepared: map[string]int{"a": 0}},
		"a claim prepared before":           {podClaims: []v1.PodResourceClaim{named("a"), named("b")}, prepared: map[string]int{"a": 1}},
		"template, claim generated":         {podClaims: []v1.PodResourceClaim{fromTemplate("gpu")}, statuses: []v1.PodResourceClaimStatus{generated("gpu", "pod-gpu")}, prepared: map[string]int{"pod-gpu": 2}, want: true},
		"template, no claim needed":         {podClaims: []v1.PodResourceClaim{fromTemplate("gpu"), named("a")}, statuses: []v1.PodResourceClaimStatus{{Name: "gpu"}}, prepared: map[string]int{"a": 1}, want: true},
		"template, status not there yet":    {podClaims: []v1.PodResourceClaim{fromTemplate("gpu")}, prepared: map[string]int{"pod-gpu": 1}},
		"extended resource claim, prepared": {podClaims: []v1.PodResourceClaim{named("a")}, extended: "ext", prepared: map[string]int{"a": 1, "ext": 1}, want: true},
		"extended resource claim, not now":  {podClaims: []v1.PodResourceClaim{named("a")}, extended: "ext", prepared: map[string]int{"a": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod", UID: "pod"},
				Spec:       v1.PodSpec{ResourceClaims: tc.podClaims},
				Status:     v1.PodStatus{ResourceClaimStatuses: tc.statuses},
			}
			if tc.extended != "" {
				pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: tc.extended}
			}
			f := &PrepareFailures{pod: pod, claims: map[types.UID]*resourceapi.ResourceClaim{}, devices: map[types.UID]map[string]int{}}
			for claim, count := range tc.prepared {
				uid := types.UID("uid-" + claim)
				f.claims[uid] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: claim, UID: uid}}
				f.devices[uid] = map[string]int{"d.example.com": count}
			}
			if got := f.everyClaimPreparedNow(); got != tc.want {
				t.Errorf("everyClaimPreparedNow() = %v, want %v", got, tc.want)
			}
		})
	}
}

// A healthy pod whose every claim was prepared in this attempt costs the
// record neither a write nor a read of the DRA checkpoint; one with a claim
// prepared before (for another pod) reads it. After a restart both are in the
// record, from the DRA checkpoint.
func TestPreparedPodProvenWithoutARead(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	m, ctx, _ := k.kubelet()
	reads := &countingReads{CheckpointManager: m.prepared.draCheckpoint}
	m.prepared.draCheckpoint = reads
	// The DRA checkpoint's claims, as the DRA manager keeps them.
	checkpointed := map[string]*claim{"shared": {uid: "shared", pods: []string{"other"}, devices: map[string][]string{"d.example.com": {"dev"}}}}
	writeCheckpoint := func() {
		var all []claim
		for _, c := range checkpointed {
			all = append(all, *c)
		}
		k.writeDRACheckpoint(all...)
	}
	attempt := func(pod string, podClaims ...string) {
		t.Helper()
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod, UID: types.UID(pod)}}
		// The DRA manager lists the pod on its claims, then prepares those
		// not prepared yet: not "shared".
		claims := map[types.UID]*resourceapi.ResourceClaim{}
		var sent []string
		for _, name := range podClaims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: name, ResourceClaimName: &name})
			if checkpointed[name] == nil {
				checkpointed[name] = &claim{uid: name, devices: map[string][]string{"d.example.com": nil}}
				claims[types.UID(name)] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
				sent = append(sent, name)
			}
			checkpointed[name].pods = append(checkpointed[name].pods, pod)
		}
		writeCheckpoint()
		failures := m.NewPrepareFailures(p, claims)
		resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
		for _, uid := range sent {
			resp.Claims[uid] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{{PoolName: "pool", DeviceName: "dev"}}}
		}
		failures.Record(ctx, "d.example.com", sentClaims(sent...), resp, nil)
		if err := failures.Err(ctx); err != nil {
			t.Fatalf("prepare of %s: %v", pod, err)
		}
		// The DRA manager checkpoints the devices.
		for _, name := range sent {
			checkpointed[name].devices = map[string][]string{"d.example.com": {"dev"}}
		}
		writeCheckpoint()
	}

	attempt("healthy", "a")
	if reads.count != 0 || !m.prepared.has("healthy") {
		t.Errorf("every claim prepared now: %d reads of the DRA checkpoint, recorded %v; want 0, true", reads.count, m.prepared.has("healthy"))
	}
	attempt("sharing", "b", "shared")
	if reads.count != 1 || !m.prepared.has("sharing") {
		t.Errorf("a claim prepared before: %d reads of the DRA checkpoint, recorded %v; want 1, true", reads.count, m.prepared.has("sharing"))
	}
	if got := k.recorded(); len(got) != 0 {
		t.Errorf("record on disk = %v, want empty: the DRA checkpoint proves both pods", got)
	}
	m, _, _ = k.kubelet()
	if !m.prepared.has("healthy") || !m.prepared.has("sharing") {
		t.Errorf("after a restart: healthy recorded %v, sharing %v; want both", m.prepared.has("healthy"), m.prepared.has("sharing"))
	}
}

// countingReads counts the reads of a checkpoint.
type countingReads struct {
	checkpointmanager.CheckpointManager
	count int
}

func (c *countingReads) GetCheckpoint(key string, checkpoint checkpointmanager.Checkpoint) error {
	c.count++
	return c.CheckpointManager.GetCheckpoint(key, checkpoint)
}

// The periodic write of the record (every maxUnwritten-th proven pod) is
// made by that one pod: the pods prepared while it runs (a batch) do not
// wait for it.
func TestPreparedPodsPeriodicWriteBlocksNoOtherPod(t *testing.T) {
	enableFeature(t, true)
	k := newKubeletState(t)
	m, ctx, _ := k.kubelet()
	logger := klog.FromContext(ctx)
	proven := map[types.UID]map[string]int{"a": {"d.example.com": 1}}
	for i := range maxUnwritten - 1 {
		m.prepared.add(logger, types.UID(fmt.Sprintf("pod-%02d", i)), proven, true)
	}
	blocked := &blockedWrites{CheckpointManager: m.prepared.checkpoints, began: make(chan struct{}), release: make(chan struct{})}
	m.prepared.checkpoints = blocked
	periodic := make(chan struct{})
	go func() {
		defer close(periodic)
		m.prepared.add(logger, "periodic", proven, true)
	}()
	<-blocked.began
	next := make(chan struct{})
	go func() {
		defer close(next)
		m.prepared.add(logger, "next", proven, true)
	}()
	select {
	case <-next:
	case <-time.After(wait.ForeverTestTimeout):
		t.Error("a pod added during the periodic write waited for it")
	}
	close(blocked.release)
	<-periodic
	<-next
	if got := k.recorded(); len(got) != maxUnwritten {
		t.Errorf("record on disk holds %d pods, want %d (the periodic write's)", len(got), maxUnwritten)
	}
}

// blockedWrites holds every write until release is closed; began is closed
// when the first one starts.
type blockedWrites struct {
	checkpointmanager.CheckpointManager
	once           sync.Once
	began, release chan struct{}
}

func (b *blockedWrites) CreateCheckpoint(key string, checkpoint checkpointmanager.Checkpoint) error {
	b.once.Do(func() { close(b.began) })
	<-b.release
	return b.CheckpointManager.CreateCheckpoint(key, checkpoint)
}
