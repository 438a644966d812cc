// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	s := string(r.Action())
	if b := r.RetryBudget; b != nil {
		s += ", retry budget " + b.String()
	}
	return s
}

// Action is what the rule does with a Permanent answer: Honor when unset.
func (r DriverRule) Action() PermanentAction {
	if r.Permanent == "" {
		return PermanentHonor
	}
	return r.Permanent
}

func (b *RetryBudget) String() string {
	var limits []string
	if b.Attempts > 0 {
		limits = append(limits, fmt.Sprintf("%d %s", b.Attempts, attemptsNoun(b.Attempts)))
	}
	if b.Duration != nil {
		limits = append(limits, b.Duration.Duration.String())
	}
	return strings.Join(limits, " or ")
}

// Exhausted tells whether attempts failed attempts, the first one since long
// ago, use up the budget.
func (b *RetryBudget) Exhausted(attempts int, since time.Duration) bool {
	return (b.Attempts > 0 && attempts >= b.Attempts) || (b.Duration != nil && since >= b.Duration.Duration)
}

// ReadDriverPolicy reads the node's policy as the kubelet does: the file
// named by DriverPolicyEnv, else DefaultDriverPolicyPath when it exists, else
// the default policy. For tools (dra-failfast-check); path overrides both
// when set.
func ReadDriverPolicy(path string) (string, *DriverFailurePolicy, error) {
	explicit := path != ""
	if !explicit {
		path, explicit = DriverPolicyPath()
	}
	policy, _, err := ReadPolicyFile(path, explicit, nil)
	if err != nil {
		return path, nil, fmt.Errorf("DRA driver failure policy %s: %w", path, err)
	}
	return path, policy, nil
}

// DriverPolicyPath is the policy file the kubelet reads, and whether it was
// named (DriverPolicyEnv) rather than the default path.
func DriverPolicyPath() (string, bool) {
	if path := os.Getenv(DriverPolicyEnv); path != "" {
		return path, true
	}
	return DefaultDriverPolicyPath, false
}

// MaxDriverPolicySize bounds the policy file: a larger file is refused
// without being read (a policy of a few hundred drivers is a few KiB).
const MaxDriverPolicySize = 1 << 20

// FileStamp identifies one version of the policy file: a rename gives a new
// inode, a write in place a new size, mtime or ctime.
type FileStamp struct {
	exists  bool
	regular bool
	size    int64
	modTime time.Time
	ctime   int64
	inode   uint64
}

// Exists tells whether the file existed at this version.
func (s FileStamp) Exists() bool { return s.exists }

func stampOf(info fs.FileInfo) FileStamp {
	stamp := FileStamp{exists: true, regular: info.Mode().IsRegular(), size: info.Size(), modTime: info.ModTime()}
	stamp.ctime, stamp.inode = fileIdentity(info)
	return stamp
}

// StatPolicyFile stats the file (following symlinks, as in a ConfigMap volume);
// a missing file is a stamp that does not exist, not an error.
func StatPolicyFile(path string) (FileStamp, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return FileStamp{}, nil
	}
	if err != nil {
		return FileStamp{}, err
	}
	return stampOf(info), nil
}

// usable says why a version of the file cannot be read, nil when it can.
func (s FileStamp) usable() error {
	switch {
	case !s.regular:
		return errors.New("not a regular file")
	case s.size > MaxDriverPolicySize:
		return fmt.Errorf("%d bytes, larger than the limit of %d", s.size, MaxDriverPolicySize)
	}
	return nil
}

// ReadPolicyFile reads the policy file; a missing file is the default
// policy unless the file was named explicitly. It never blocks on a FIFO nor
// reads more than MaxDriverPolicySize bytes, and the stamp returned is the
// one of the version it read. reads, when not nil, counts the reads of a
// file's content.
func ReadPolicyFile(path string, explicit bool, reads *atomic.Int64) (*DriverFailurePolicy, FileStamp, error) {
	stamp, err := StatPolicyFile(path)
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

// PolicyDecision describes what policy does with one driver's classified
// answer, for tools (dra-failfast-check): the driver's rule and its effect.
func PolicyDecision(policy *DriverFailurePolicy, result DriverResult) string {
	rule := policy.RuleFor(result.Driver)
	var effects []string
	if slices.ContainsFunc(result.Claims, func(c ClaimResult) bool { return c.Outcome == FailedPermanent }) {
		switch {
		case rule.Action() == PermanentIgnore && rule.RetryBudget != nil && result.Err == nil:
			effects = append(effects, "the Permanent answer is ignored and counts against the retry budget ("+rule.RetryBudget.String()+"): the pod fails when it runs out")
		case rule.Action() == PermanentIgnore:
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

func attemptsNoun(n int) string {
	if n == 1 {
		return "attempt"
	}
	return "attempts"
}
