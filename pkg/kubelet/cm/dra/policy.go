// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The node's DRA driver failure policy: what the kubelet does with each
// driver's failures. It lives in a file of its own rather than in the
// KubeletConfiguration, whose API is upstream's: a new field there costs far
// more upstream lines than the series may change.
const (
	// DriverPolicyEnv names the policy file; without it the kubelet reads
	// DefaultDriverPolicyPath when that file exists.
	DriverPolicyEnv = "DRA_FAILFAST_DRIVER_POLICY"
	// DefaultDriverPolicyPath is where the kubelet looks for the policy when
	// DriverPolicyEnv is not set. No file there means the default policy:
	// every driver's Permanent answer is honored, no retry budget.
	DefaultDriverPolicyPath = "/etc/kubernetes/dra-failfast/driver-policy.yaml"
	// DriverPolicyAPIVersion and DriverPolicyKind identify the file's content.
	DriverPolicyAPIVersion = "dra-failfast.io/v1alpha1"
	DriverPolicyKind       = "DriverFailurePolicy"
)

// PermanentAction is what the kubelet does with a driver's Permanent answer.
type PermanentAction string

const (
	// PermanentHonor: a Permanent answer fails the pod (the default).
	PermanentHonor PermanentAction = "Honor"
	// PermanentIgnore: a Permanent answer is treated as transient, as a
	// stock kubelet does: the pod is retried at every resync. The kill switch
	// for a driver that says Permanent wrongly.
	PermanentIgnore PermanentAction = "Ignore"
)

// RetryBudget fails a pod whose driver keeps failing with errors it did not
// mark permanent: after Attempts failed prepare attempts, or Duration after
// the first failed attempt, whichever comes first (at least one is set).
// Only claim errors of a driver that answered count: never a call that failed
// as a whole (gRPC error, unreachable driver, malformed response), never an
// unregistered driver (the kubelet does not call it), and a pod that already
// ran containers is never failed (the same rule as for Permanent answers).
type RetryBudget struct {
	Attempts int              `json:"attempts,omitempty"`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// DriverRule is the policy for one driver's failures.
type DriverRule struct {
	// Permanent: Honor (default) or Ignore.
	Permanent PermanentAction `json:"permanent,omitempty"`
	// RetryBudget for errors not marked permanent; none by default.
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`
}

// DriverPolicyEntry is the rule of one driver, by driver name.
type DriverPolicyEntry struct {
	Driver     string `json:"driver"`
	DriverRule `json:",inline"`
}

// DriverFailurePolicy is the content of the policy file:
//
//	apiVersion: dra-failfast.io/v1alpha1
//	kind: DriverFailurePolicy
//	default:                 # drivers not listed below
//	  permanent: Honor
//	drivers:
//	- driver: gpu.example.com
//	  permanent: Ignore      # this driver's Permanent answers are not trusted
//	- driver: net.example.com
//	  retryBudget:           # fail the pod after 3 failed attempts or 5 minutes
//	    attempts: 3
//	    duration: 5m
type DriverFailurePolicy struct {
	metav1.TypeMeta `json:",inline"`
	Default         DriverRule          `json:"default,omitempty"`
	Drivers         []DriverPolicyEntry `json:"drivers,omitempty"`
}

// maxBudgetAttempts bounds a retry budget's attempts: above it a budget
// means nothing in practice (days at the default resync) and is a typo.
const maxBudgetAttempts = 1000

// ParseDriverPolicy decodes a policy strictly (unknown or duplicate fields
// are errors) and validates it; errors name the entry at fault.
func ParseDriverPolicy(data []byte) (*DriverFailurePolicy, error) {
	var policy DriverFailurePolicy
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	// sigs.k8s.io/json names the path of an unknown field (drivers[1].x).
	strictErrs, err := kjson.UnmarshalStrict(jsonData, &policy)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("decoding: %w", errors.Join(strictErrs...))
	}
	if errs := policy.validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &policy, nil
}

func (p *DriverFailurePolicy) validate() field.ErrorList {
	var errs field.ErrorList
	if p.APIVersion != DriverPolicyAPIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), p.APIVersion, []string{DriverPolicyAPIVersion}))
	}
	if p.Kind != DriverPolicyKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), p.Kind, []string{DriverPolicyKind}))
	}
	errs = append(errs, p.Default.validate(field.NewPath("default"))...)
	seen := map[string]int{}
	for i, entry := range p.Drivers {
		path := field.NewPath("drivers").Index(i)
		if entry.Driver == "" {
			errs = append(errs, field.Required(path.Child("driver"), "the driver's name"))
		} else if msgs := validation.IsDNS1123Subdomain(entry.Driver); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("driver"), entry.Driver, strings.Join(msgs, "; ")))
		} else if first, dup := seen[entry.Driver]; dup {
			errs = append(errs, field.Duplicate(path.Child("driver"), fmt.Sprintf("%s (also drivers[%d])", entry.Driver, first)))
		} else {
			seen[entry.Driver] = i
		}
		errs = append(errs, entry.DriverRule.validate(path)...)
	}
	return errs
}

func (r DriverRule) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch r.Permanent {
	case "", PermanentHonor, PermanentIgnore:
	default:
		errs = append(errs, field.NotSupported(path.Child("permanent"), r.Permanent, []PermanentAction{PermanentHonor, PermanentIgnore}))
	}
	if b := r.RetryBudget; b != nil {
		path := path.Child("retryBudget")
		if b.Attempts == 0 && b.Duration == nil {
			errs = append(errs, field.Required(path, "attempts, duration or both"))
		}
		if b.Attempts < 0 || b.Attempts > maxBudgetAttempts {
			errs = append(errs, field.Invalid(path.Child("attempts"), b.Attempts, fmt.Sprintf("must be between 1 and %d", maxBudgetAttempts)))
		}
		if b.Duration != nil && b.Duration.Duration < time.Second {
			errs = append(errs, field.Invalid(path.Child("duration"), b.Duration.Duration.String(), "must be at least 1s"))
		}
	}
	return errs
}

// RuleFor returns the rule for driver: its entry, each field it leaves
// unset taken from the default (an entry that only sets a retry budget keeps
// a fleet-wide "permanent: Ignore"), else the default. An entry cannot unset
// a default retry budget: give budgets per driver instead.
func (p *DriverFailurePolicy) RuleFor(driver string) DriverRule {
	for _, entry := range p.Drivers {
		if entry.Driver == driver {
			rule := entry.DriverRule
			if rule.Permanent == "" {
				rule.Permanent = p.Default.Permanent
			}
			if rule.RetryBudget == nil {
				rule.RetryBudget = p.Default.RetryBudget
			}
			return rule
		}
	}
	return p.Default
}

// String is the policy in one line, for the kubelet's log and tools: each
// driver's rule as in effect, defaults included.
func (p *DriverFailurePolicy) String() string {
	parts := []string{"default: " + p.Default.String()}
	for _, entry := range p.Drivers {
		parts = append(parts, entry.Driver+": "+p.RuleFor(entry.Driver).String())
	}
	return strings.Join(parts, "; ")
}

func (r DriverRule) String() string {
	s := string(r.permanent())
	if b := r.RetryBudget; b != nil {
		s += ", retry budget " + b.String()
	}
	return s
}

func (r DriverRule) permanent() PermanentAction {
	if r.Permanent == "" {
		return PermanentHonor
	}
	return r.Permanent
}

func (b *RetryBudget) String() string {
	var limits []string
	if b.Attempts > 0 {
		limits = append(limits, fmt.Sprintf("%d %s", b.Attempts, plural(b.Attempts, "attempt", "attempts")))
	}
	if b.Duration != nil {
		limits = append(limits, b.Duration.Duration.String())
	}
	return strings.Join(limits, " or ")
}

// exhausted tells whether attempts failed attempts, the first one since long
// ago, use up the budget.
func (b *RetryBudget) exhausted(attempts int, since time.Duration) bool {
	return (b.Attempts > 0 && attempts >= b.Attempts) || (b.Duration != nil && since >= b.Duration.Duration)
}

// load reads and checks the node's policy when the kubelet starts and, with
// a pollInterval, starts the goroutine that watches the file (refresh).
func (s *policySource) load(logger klog.Logger, pollInterval time.Duration) error {
	path, explicit := driverPolicyPath()
	policy, stamp, err := readDriverPolicy(path, explicit, &s.reads)
	if err != nil {
		return fmt.Errorf("DRA driver failure policy %s: %w", path, err)
	}
	s.set(path, explicit, policy, stamp)
	logger.Info("DRA driver failure policy in effect", "path", path, "fromFile", stamp.exists, "policy", policy.String())
	if pollInterval > 0 {
		go wait.Until(func() { s.refresh(logger, time.Now()) }, pollInterval, wait.NeverStop)
	}
	return nil
}

// ReadDriverPolicy reads the node's policy as the kubelet does: the file
// named by DriverPolicyEnv, else DefaultDriverPolicyPath when it exists, else
// the default policy. For tools (dra-failfast-check); path overrides both
// when set.
func ReadDriverPolicy(path string) (string, *DriverFailurePolicy, error) {
	explicit := path != ""
	if !explicit {
		path, explicit = driverPolicyPath()
	}
	policy, _, err := readDriverPolicy(path, explicit, nil)
	if err != nil {
		return path, nil, fmt.Errorf("DRA driver failure policy %s: %w", path, err)
	}
	return path, policy, nil
}

func driverPolicyPath() (string, bool) {
	if path := os.Getenv(DriverPolicyEnv); path != "" {
		return path, true
	}
	return DefaultDriverPolicyPath, false
}

// MaxDriverPolicySize bounds the policy file: a larger file is refused
// without being read (a policy of a few hundred drivers is a few KiB).
const MaxDriverPolicySize = 1 << 20

// fileStamp identifies one version of the policy file: a rename gives a new
// inode, a write in place a new size, mtime or ctime.
type fileStamp struct {
	exists  bool
	regular bool
	size    int64
	modTime time.Time
	ctime   int64
	inode   uint64
}

func stampOf(info fs.FileInfo) fileStamp {
	stamp := fileStamp{exists: true, regular: info.Mode().IsRegular(), size: info.Size(), modTime: info.ModTime()}
	stamp.ctime, stamp.inode = fileIdentity(info)
	return stamp
}

// statPolicy stats the file (following symlinks, as in a ConfigMap volume);
// a missing file is a stamp that does not exist, not an error.
func statPolicy(path string) (fileStamp, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(info), nil
}

// usable says why a version of the file cannot be read, nil when it can.
func (s fileStamp) usable() error {
	switch {
	case !s.regular:
		return errors.New("not a regular file")
	case s.size > MaxDriverPolicySize:
		return fmt.Errorf("%d bytes, larger than the limit of %d", s.size, MaxDriverPolicySize)
	}
	return nil
}

// readDriverPolicy reads the policy file; a missing file is the default
// policy unless the file was named explicitly. It never blocks on a FIFO nor
// reads more than MaxDriverPolicySize bytes, and the stamp returned is the
// one of the version it read. reads, when not nil, counts the reads of a
// file's content.
func readDriverPolicy(path string, explicit bool, reads *atomic.Int64) (*DriverFailurePolicy, fileStamp, error) {
	stamp, err := statPolicy(path)
	if err != nil {
		return nil, stamp, err
	}
	if !stamp.exists {
		if explicit {
			return nil, stamp, fmt.Errorf("no such file (named by %s)", DriverPolicyEnv)
		}
		return &DriverFailurePolicy{}, stamp, nil
	}
	if err := stamp.usable(); err != nil {
		return nil, stamp, err
	}
	// O_NONBLOCK: the path may have become a FIFO since the stat.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, stamp, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, stamp, err
	}
	if stamp = stampOf(info); stamp.usable() != nil {
		return nil, stamp, stamp.usable()
	}
	if reads != nil {
		reads.Add(1)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxDriverPolicySize+1))
	if err != nil {
		return nil, stamp, err
	}
	if int64(len(data)) != stamp.size {
		return nil, stamp, fmt.Errorf("changed while read (%d bytes, %d before)", len(data), stamp.size)
	}
	policy, err := ParseDriverPolicy(data)
	return policy, stamp, err
}

// policySettle is how long a new version of the policy file must stay the
// same (same stamp at two looks that far apart) before it is read: a file
// rewritten in place (truncate, then write) shows a prefix in between, and a
// prefix can be a valid policy that says something else.
const policySettle = time.Second

// policySource is the node's policy. Prepares take the policy in effect
// without a lock and without touching the file (policy); one goroutine looks
// at the file once a second (refresh) and reads a new version once it has
// settled, once: an operator can switch a misbehaving driver to Ignore
// without restarting the kubelet. Whatever happens to the file after a
// policy was loaded from it (removed, replaced by a directory, a FIFO, a file
// over MaxDriverPolicySize, invalid content, a version still being written)
// keeps the policy in effect, logged and counted once per version: bad input
// never changes what happens to pods. To go back to the default policy,
// write a policy without rules, or remove the file and restart the kubelet.
type policySource struct {
	current atomic.Pointer[DriverFailurePolicy]
	// reads counts the reads of the file's content (the tests check that a
	// version is read once, and an unusable file never).
	reads atomic.Int64

	mu       sync.Mutex // serializes set and refresh
	path     string
	explicit bool
	// stamp is the version of the file in effect; a stamp that does not
	// exist when the policy is the default one for a missing file.
	stamp fileStamp
	// seen and seenAt: a version not in effect yet, and when refresh first
	// saw it, waiting to settle.
	seen   *fileStamp
	seenAt time.Time
	// rejected is the version last found unusable (logged and counted
	// once), nil when the file is the version in effect.
	rejected *fileStamp
}

func (s *policySource) set(path string, explicit bool, policy *DriverFailurePolicy, stamp fileStamp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path, s.explicit, s.stamp, s.seen, s.rejected = path, explicit, stamp, nil, nil
	s.current.Store(policy)
}

// policy returns the policy in effect: the default one until Start
// ran (as in tests of the kubelet's packages, which read no file).
func (s *policySource) policy() *DriverFailurePolicy {
	if p := s.current.Load(); p != nil {
		return p
	}
	return &DriverFailurePolicy{}
}

// refresh looks at the policy file once, at time now.
func (s *policySource) refresh(logger klog.Logger, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		return
	}
	stamp, err := statPolicy(s.path)
	switch {
	case err != nil:
		s.reject(logger, stamp, err)
		return
	case stamp == s.stamp:
		s.seen, s.rejected = nil, nil
		return
	case !stamp.exists:
		// Removed (or between the rm and the cp of an edit): a policy read
		// from a file stays, as does the error for a named file.
		s.seen = nil
		if s.stamp.exists || s.explicit {
			s.reject(logger, stamp, errors.New("the file is gone"))
		}
		return
	}
	if s.rejected != nil && *s.rejected == stamp {
		return // this version was read and refused already
	}
	if s.seen == nil || *s.seen != stamp {
		s.seen, s.seenAt = &stamp, now
		return
	}
	if now.Sub(s.seenAt) < policySettle {
		return
	}
	s.seen = nil
	policy, read, err := readDriverPolicy(s.path, s.explicit, &s.reads)
	if err != nil {
		s.reject(logger, read, err)
		return
	}
	if read != stamp {
		return // changed again while read: wait for it to settle
	}
	s.stamp, s.rejected = read, nil
	s.current.Store(policy)
	logger.Info("DRA driver failure policy changed", "path", s.path, "policy", policy.String())
}

// reject logs and counts a version of the file that cannot be used, once.
func (s *policySource) reject(logger klog.Logger, stamp fileStamp, err error) {
	if s.rejected != nil && *s.rejected == stamp {
		return
	}
	s.rejected = &stamp
	policyReloadFailures.Inc()
	logger.Error(err, "DRA driver failure policy changed but cannot be used: keeping the policy in effect", "path", s.path, "policy", s.policy().String())
}

// budgetKey is one pod's failures with one driver.
type budgetKey struct {
	pod    string
	driver string
}

// budgetCount is what the kubelet remembers of a pod's failed attempts with
// a driver: in memory only, so a kubelet restart starts every count again.
// last is the last attempt counted.
type budgetCount struct {
	attempts    int
	first, last time.Time
}

// budgetAttemptSpacing: failed attempts closer together than this count as
// one. The kubelet retries a failed pod sync 10 s after it ended at the
// soonest (its pod worker's back-off), but any update of the pod (a label,
// an annotation, a spec change) syncs it again at once, and each sync calls
// the driver: a controller that annotates Pending pods would otherwise use up
// "attempts: 3" in seconds.
const budgetAttemptSpacing = 10 * time.Second

// budgetCounts holds the counts of every pod with a retry budget running.
// An entry ends when the driver prepares the pod's claims, when the budget
// runs out, and at the latest budgetExpiry after its last failed attempt
// (a pod deleted while it was retried): a pending pod is retried every
// resync (60-90 s by default), far more often.
type budgetCounts struct {
	mu        sync.Mutex
	counts    map[budgetKey]*budgetCount
	lastSweep time.Time
}

const budgetExpiry = time.Hour

// failed counts a failed attempt, unless the last one counted was less than
// budgetAttemptSpacing ago, and returns the count so far, when this attempt
// was made and whether it counted.
func (b *budgetCounts) failed(key budgetKey, t time.Time) (count budgetCount, now time.Time, counted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.counts == nil {
		b.counts = map[budgetKey]*budgetCount{}
	}
	if t.Sub(b.lastSweep) > budgetExpiry/4 {
		for k, c := range b.counts {
			if t.Sub(c.last) > budgetExpiry {
				delete(b.counts, k)
			}
		}
		b.lastSweep = t
	}
	c := b.counts[key]
	if c == nil {
		c = &budgetCount{first: t}
		b.counts[key] = c
	}
	if counted = c.attempts == 0 || t.Sub(c.last) >= budgetAttemptSpacing; counted {
		c.attempts++
		c.last = t
	}
	return *c, t, counted
}

func (b *budgetCounts) forget(key budgetKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.counts, key)
}

func (b *budgetCounts) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.counts)
}

// Policy outcomes, the values of the outcome label of the policy metric.
const (
	// PolicyHonored: a Permanent answer was kept (Honor).
	PolicyHonored = "honored"
	// PolicyIgnored: a Permanent answer was treated as transient (Ignore).
	PolicyIgnored = "ignored"
	// PolicyBudgetRetry: a failed attempt counted against the retry budget.
	PolicyBudgetRetry = "budget_retry"
	// PolicyBudgetExhausted: the retry budget ran out: the claim failed permanently.
	PolicyBudgetExhausted = "budget_exhausted"
)

// applyPolicy applies the driver's rule to its classified result, in place,
// for pod: Ignore turns permanent claims transient; a retry budget counts
// the attempt and, once used up, turns the transient claims permanent.
func (m *Manager) applyPolicy(logger klog.Logger, podUID string, result *DriverResult) {
	policy := m.policy.policy()
	rule := policy.RuleFor(result.Driver)
	key := budgetKey{pod: podUID, driver: result.Driver}
	if !result.Failed() {
		if rule.RetryBudget != nil {
			m.budgets.forget(key)
		}
		return
	}
	permanent, transient, ignored := false, false, 0
	for i := range result.Claims {
		claim := &result.Claims[i]
		switch claim.Outcome {
		case FailedPermanent:
			if rule.permanent() == PermanentIgnore {
				claim.Outcome, claim.Downgraded = FailedTransient, DowngradePolicyIgnore
				ignored++
				transient = true
				continue
			}
			policyOutcomes.WithLabelValues(result.Driver, PolicyHonored).Inc()
			permanent = true
		case FailedTransient:
			transient = true
		}
	}
	// Ignored answers count as ignored, unless the budget they count
	// against runs out with this attempt: then they are budget_exhausted.
	countIgnored := func() {
		if ignored > 0 {
			policyOutcomes.WithLabelValues(result.Driver, PolicyIgnored).Add(float64(ignored))
		}
	}
	// Only claim errors of a driver that answered count against a budget;
	// a permanent claim fails the pod anyway.
	if rule.RetryBudget == nil || result.Err != nil || permanent || !transient {
		countIgnored()
		return
	}
	count, now, counted := m.budgets.failed(key, m.clock())
	elapsed := now.Sub(count.first)
	if !rule.RetryBudget.exhausted(count.attempts, elapsed) {
		countIgnored()
		if counted {
			policyOutcomes.WithLabelValues(result.Driver, PolicyBudgetRetry).Inc()
		}
		logger.V(4).Info("DRA driver failed; attempt checked against the node's retry budget", "driverName", result.Driver, "attempts", count.attempts, "counted", counted, "budget", rule.RetryBudget.String())
		return
	}
	m.budgets.forget(key)
	policyOutcomes.WithLabelValues(result.Driver, PolicyBudgetExhausted).Inc()
	spent := fmt.Sprintf("%d failed %s in %s, budget %s", count.attempts, plural(count.attempts, "attempt", "attempts"), elapsed.Round(time.Second), rule.RetryBudget)
	for i := range result.Claims {
		if claim := &result.Claims[i]; claim.Outcome == FailedTransient {
			// An ignored Permanent answer counted like any other error; once
			// the budget fails the claim it is no longer a downgrade.
			claim.Outcome, claim.Budget, claim.Downgraded = FailedPermanent, spent, ""
		}
	}
	logger.Info("DRA driver kept failing: the node's retry budget ran out, failing the pod's claims permanently", "driverName", result.Driver, "budget", spent)
}

// PolicyDecision describes what policy does with one driver's classified
// answer, for tools (dra-failfast-check): the driver's rule and its effect.
func PolicyDecision(policy *DriverFailurePolicy, result DriverResult) string {
	rule := policy.RuleFor(result.Driver)
	var effects []string
	if slices.ContainsFunc(result.Claims, func(c ClaimResult) bool { return c.Outcome == FailedPermanent }) {
		switch {
		case rule.permanent() == PermanentIgnore && rule.RetryBudget != nil && result.Err == nil:
			effects = append(effects, "the Permanent answer is ignored and counts against the retry budget ("+rule.RetryBudget.String()+"): the pod fails when it runs out")
		case rule.permanent() == PermanentIgnore:
			effects = append(effects, "the Permanent answer is ignored: the pod is retried")
		default:
			effects = append(effects, "the Permanent answer is honored: the pod fails")
		}
	} else if result.Err == nil && slices.ContainsFunc(result.Claims, func(c ClaimResult) bool { return c.Outcome == FailedTransient }) {
		if rule.RetryBudget != nil {
			effects = append(effects, "the error counts against the retry budget ("+rule.RetryBudget.String()+"): the pod fails when it runs out")
		} else {
			effects = append(effects, "no retry budget: the pod is retried")
		}
	}
	text := "driver " + result.Driver + ": " + rule.String()
	if len(effects) > 0 {
		text += "; " + strings.Join(effects, "; ")
	}
	return text
}
