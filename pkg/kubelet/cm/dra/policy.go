// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/api/decision"
)

// load reads and checks the node's policy when the kubelet starts and, with
// a pollInterval, starts the goroutine that watches the file (refresh).
func (s *policySource) load(logger klog.Logger, pollInterval time.Duration) error {
	path, explicit := decision.DriverPolicyPath()
	policy, stamp, err := decision.ReadPolicyFile(path, explicit, &s.reads)
	if err != nil {
		return fmt.Errorf("DRA driver failure policy %s: %w", path, err)
	}
	s.set(path, explicit, policy, stamp)
	logger.Info("DRA driver failure policy in effect", "path", path, "fromFile", stamp.Exists(), "policy", policy.String())
	if pollInterval > 0 {
		go wait.Until(func() { s.refresh(logger, time.Now()) }, pollInterval, wait.NeverStop)
	}
	return nil
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
	stamp decision.FileStamp
	// seen and seenAt: a version not in effect yet, and when refresh first
	// saw it, waiting to settle.
	seen   *decision.FileStamp
	seenAt time.Time
	// rejected is the version last found unusable (logged and counted
	// once), nil when the file is the version in effect.
	rejected *decision.FileStamp
}

func (s *policySource) set(path string, explicit bool, policy *DriverFailurePolicy, stamp decision.FileStamp) {
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
	stamp, err := decision.StatPolicyFile(s.path)
	switch {
	case err != nil:
		s.reject(logger, stamp, err)
		return
	case stamp == s.stamp:
		s.seen, s.rejected = nil, nil
		return
	case !stamp.Exists():
		// Removed (or between the rm and the cp of an edit): a policy read
		// from a file stays, as does the error for a named file.
		s.seen = nil
		if s.stamp.Exists() || s.explicit {
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
	policy, read, err := decision.ReadPolicyFile(s.path, s.explicit, &s.reads)
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
func (s *policySource) reject(logger klog.Logger, stamp decision.FileStamp, err error) {
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
// the attempt and, once used up, turns the transient claims permanent and
// returns what was spent, for the error's text ("" otherwise).
func (m *Manager) applyPolicy(logger klog.Logger, podUID string, result *DriverResult) (budgetSpent string) {
	policy := m.policy.policy()
	rule := policy.RuleFor(result.Driver)
	key := budgetKey{pod: podUID, driver: result.Driver}
	if !result.Failed() {
		if rule.RetryBudget != nil {
			m.budgets.forget(key)
		}
		return ""
	}
	permanent, transient, ignored := false, false, 0
	for i := range result.Claims {
		claim := &result.Claims[i]
		switch claim.Outcome {
		case FailedPermanent:
			if rule.Action() == PermanentIgnore {
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
		return ""
	}
	count, now, counted := m.budgets.failed(key, m.clock())
	elapsed := now.Sub(count.first)
	if !rule.RetryBudget.Exhausted(count.attempts, elapsed) {
		countIgnored()
		if counted {
			policyOutcomes.WithLabelValues(result.Driver, PolicyBudgetRetry).Inc()
		}
		logger.V(4).Info("DRA driver failed; attempt checked against the node's retry budget", "driverName", result.Driver, "attempts", count.attempts, "counted", counted, "budget", rule.RetryBudget.String())
		return ""
	}
	m.budgets.forget(key)
	policyOutcomes.WithLabelValues(result.Driver, PolicyBudgetExhausted).Inc()
	spent := fmt.Sprintf("%d failed %s in %s, budget %s", count.attempts, plural(count.attempts, "attempt", "attempts"), elapsed.Round(time.Second), rule.RetryBudget)
	for i := range result.Claims {
		if claim := &result.Claims[i]; claim.Outcome == FailedTransient {
			// An ignored Permanent answer counted like any other error; once
			// the budget fails the claim it is no longer a downgrade.
			claim.Outcome, claim.Downgraded = FailedPermanent, ""
		}
	}
	logger.Info("DRA driver kept failing: the node's retry budget ran out, failing the pod's claims permanently", "driverName", result.Driver, "budget", spent)
	return spent
}
