// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package iptables is this project's stand-in for the package of the same path in
// sigs.k8s.io/iptables-wrappers v1.0.0 (README.md beside go.mod): the part of its API that the
// Kubernetes 1.38 kubelet calls, implemented by running iptables and ip6tables.
package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Protocol is the IP family a client works on.
type Protocol string

// The IP families.
const (
	ProtocolIPv4 Protocol = "IPv4"
	ProtocolIPv6 Protocol = "IPv6"
)

// Table is an iptables table.
type Table string

// The tables the kubelet uses.
const (
	TableNAT    Table = "nat"
	TableFilter Table = "filter"
	TableMangle Table = "mangle"
)

// Chain is an iptables chain.
type Chain string

// The built-in chains.
const (
	ChainPostrouting Chain = "POSTROUTING"
	ChainPrerouting  Chain = "PREROUTING"
	ChainOutput      Chain = "OUTPUT"
	ChainInput       Chain = "INPUT"
	ChainForward     Chain = "FORWARD"
)

// RulePosition is where EnsureRule adds a missing rule: first (Prepend) or last (Append).
type RulePosition string

// The rule positions, as iptables' flags.
const (
	Prepend RulePosition = "-I"
	Append  RulePosition = "-A"
)

// Mode picks the iptables backend (legacy or nft) a client runs.
type Mode string

// UseInstalledMode runs the iptables binaries the host's PATH names, whatever their backend.
const UseInstalledMode Mode = "installed"

// Interface runs iptables commands for one IP family. It is safe for concurrent use.
type Interface interface {
	// EnsureChain creates chain in table unless it exists; it reports whether it existed.
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	// EnsureRule adds the rule args to chain at position unless it is there; it reports whether
	// it was.
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	// IsIPv6 reports whether the client works on IPv6.
	IsIPv6() bool
	// Protocol is the client's IP family.
	Protocol() Protocol
	// Monitor creates the chain canary in each of tables and, every interval, checks that it
	// still exists in tables[0]. Once it is gone (an outside tool flushed the rules), it waits
	// briefly for the other tables' canaries to go as well, calls reloadFunc, and creates the
	// canaries again. It returns when ctx ends, or when it cannot create a canary.
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
}

// binaries names the command of each IP family.
var binaries = map[Protocol]string{ProtocolIPv4: "iptables", ProtocolIPv6: "ip6tables"}

// NewBestEffort returns a client for each IP family whose iptables command is installed and
// works here (it can list the filter table), none when neither does. mode must be
// UseInstalledMode.
func NewBestEffort(ctx context.Context, mode Mode) map[Protocol]Interface {
	clients := map[Protocol]Interface{}
	if mode != UseInstalledMode {
		return clients
	}
	for _, protocol := range []Protocol{ProtocolIPv4, ProtocolIPv6} {
		path, err := exec.LookPath(binaries[protocol])
		if err != nil {
			continue
		}
		r := &runner{protocol: protocol, binary: path}
		if _, err := r.run(ctx, "-t", string(TableFilter), "-S", string(ChainInput)); err == nil {
			clients[protocol] = r
		}
	}
	return clients
}

// runner is an Interface that runs binary.
type runner struct {
	protocol Protocol
	binary   string
}

// errNotFound is an iptables exit status 1: for -S and -C, the chain or rule does not exist.
var errNotFound = errors.New("not found")

// waitSeconds is how long a command waits for the xtables lock that other writers hold.
const waitSeconds = "5"

// run runs the binary with args after its lock-wait flag. An exit status of 1 wraps errNotFound.
func (r *runner) run(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"-w", waitSeconds}, args...)
	cmd := exec.CommandContext(ctx, r.binary, full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return out, nil
	}
	command := r.binary + " " + strings.Join(full, " ")
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return out, fmt.Errorf("%s: %w: %s", command, errNotFound, strings.TrimSpace(stderr.String()))
	}
	return out, fmt.Errorf("%s: %w: %s", command, err, strings.TrimSpace(stderr.String()))
}

func (r *runner) chainExists(ctx context.Context, table Table, chain Chain) (bool, error) {
	_, err := r.run(ctx, "-t", string(table), "-S", string(chain))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errNotFound):
		return false, nil
	default:
		return false, err
	}
}

func (r *runner) EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error) {
	if exists, err := r.chainExists(ctx, table, chain); err != nil || exists {
		return exists, err
	}
	if _, err := r.run(ctx, "-t", string(table), "-N", string(chain)); err != nil {
		// Another writer may have created it since the check.
		if exists, existsErr := r.chainExists(ctx, table, chain); existsErr == nil && exists {
			return true, nil
		}
		return false, fmt.Errorf("create chain %s in table %s: %w", chain, table, err)
	}
	return false, nil
}

func (r *runner) EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error) {
	check := append([]string{"-t", string(table), "-C", string(chain)}, args...)
	_, err := r.run(ctx, check...)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, errNotFound):
		return false, fmt.Errorf("check rule in chain %s of table %s: %w", chain, table, err)
	}
	add := append([]string{"-t", string(table), string(position), string(chain)}, args...)
	if _, err := r.run(ctx, add...); err != nil {
		return false, fmt.Errorf("add rule to chain %s of table %s: %w", chain, table, err)
	}
	return false, nil
}

func (r *runner) IsIPv6() bool { return r.protocol == ProtocolIPv6 }

func (r *runner) Protocol() Protocol { return r.protocol }

// flushSettle bounds how long Monitor waits, once tables[0]'s canary is gone, for the other
// tables' canaries to go too (a flush of several tables is several commands).
const flushSettle = 5 * time.Second

func (r *runner) Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration) {
	if len(tables) == 0 {
		return
	}
	for {
		for _, table := range tables {
			if _, err := r.EnsureChain(ctx, table, canary); err != nil {
				return
			}
		}
		if !r.waitGone(ctx, canary, tables[:1], interval, 0) {
			return
		}
		r.waitGone(ctx, canary, tables[1:], interval/10+time.Millisecond, flushSettle)
		if ctx.Err() != nil {
			return
		}
		reloadFunc()
	}
}

// waitGone checks every period until canary exists in none of tables; it gives up after limit
// (0: never) or when ctx ends. It reports whether the canary is gone from all of them.
func (r *runner) waitGone(ctx context.Context, canary Chain, tables []Table, period, limit time.Duration) bool {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	var deadline <-chan time.Time
	if limit > 0 {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		deadline = timer.C
	}
	for {
		gone := true
		for _, table := range tables {
			// A failed check counts as present: only a definite "no such chain" is a flush.
			if exists, err := r.chainExists(ctx, table, canary); err != nil || exists {
				gone = false
				break
			}
		}
		if gone {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-ticker.C:
		}
	}
}
