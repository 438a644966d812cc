// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package iptables

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeIPTables is a shell script that acts as iptables on a state directory: one file per chain
// (STATE/<table>/<chain>), one rule per line. It logs each call to STATE/calls and answers as
// iptables does: exit 1 for a missing chain or rule, 2 for a usage error. It sets its own PATH:
// tests change the process's.
const fakeIPTables = `#!/bin/sh
PATH=/usr/bin:/bin
state=$(dirname "$0")/state
echo "$*" >> "$state/calls"
[ "$1" = -w ] || { echo "no -w" >&2; exit 2; }
shift 2
[ "$1" = -t ] || { echo "no -t" >&2; exit 2; }
table=$2 op=$3 chain=$4
shift 4
case "$table" in nat|filter|mangle) ;; *) echo "can't initialize iptables table '$table'" >&2; exit 3 ;; esac
mkdir -p "$state/$table"
for builtin in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do touch "$state/$table/$builtin"; done
file="$state/$table/$chain"
rule="$*"
case "$op" in
  -S) [ -f "$file" ] || { echo "No chain/target/match by that name." >&2; exit 1; }; cat "$file" ;;
  -N) [ ! -f "$file" ] || { echo "Chain already exists." >&2; exit 1; }; : > "$file" ;;
  -C) [ -f "$file" ] && grep -qxF -- "$rule" "$file" || { echo "Bad rule." >&2; exit 1; } ;;
  -A) [ -f "$file" ] || exit 1; echo "$rule" >> "$file" ;;
  -I) [ -f "$file" ] || exit 1; { echo "$rule"; cat "$file"; } > "$file.new" && mv "$file.new" "$file" ;;
  *) echo "unknown option $op" >&2; exit 2 ;;
esac
`

// newFake writes the fake as DIR/NAME and returns a runner of it and its state directory.
func newFake(t *testing.T, name string, protocol Protocol) (*runner, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(fakeIPTables), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	return &runner{protocol: protocol, binary: filepath.Join(dir, name)}, state
}

func TestEnsureChain(t *testing.T) {
	r, state := newFake(t, "iptables", ProtocolIPv4)
	ctx := t.Context()
	for i, want := range []bool{false, true} {
		existed, err := r.EnsureChain(ctx, TableMangle, "KUBE-IPTABLES-HINT")
		if err != nil || existed != want {
			t.Fatalf("call %d: EnsureChain = %v, %v; want %v, nil", i, existed, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "mangle", "KUBE-IPTABLES-HINT")); err != nil {
		t.Fatalf("chain not created: %v", err)
	}
}

func TestEnsureRule(t *testing.T) {
	r, state := newFake(t, "iptables", ProtocolIPv4)
	ctx := t.Context()
	if _, err := r.EnsureChain(ctx, TableFilter, "KUBE-FIREWALL"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		position RulePosition
		args     []string
		existed  bool
	}{
		{Append, []string{"-j", "DROP"}, false},
		{Append, []string{"-j", "DROP"}, true},
		{Prepend, []string{"-j", "ACCEPT"}, false},
		{Prepend, []string{"-j", "ACCEPT"}, true},
	}
	for _, tc := range tests {
		existed, err := r.EnsureRule(ctx, tc.position, TableFilter, "KUBE-FIREWALL", tc.args...)
		if err != nil || existed != tc.existed {
			t.Fatalf("EnsureRule(%s %v) = %v, %v; want %v, nil", tc.position, tc.args, existed, err, tc.existed)
		}
	}
	rules, err := os.ReadFile(filepath.Join(state, "filter", "KUBE-FIREWALL"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(rules), "-j ACCEPT\n-j DROP\n"; got != want {
		t.Errorf("rules = %q, want %q (prepended first, each once)", got, want)
	}
}

// An error that is not "not found" names the command and keeps iptables' words; it is never
// taken for an existing chain or rule.
func TestErrorsNameTheCommand(t *testing.T) {
	r, _ := newFake(t, "iptables", ProtocolIPv4)
	ctx := t.Context()
	existed, err := r.EnsureChain(ctx, "raw2", "X")
	if err == nil || existed {
		t.Fatalf("EnsureChain in an unknown table = %v, %v; want an error", existed, err)
	}
	for _, want := range []string{r.binary, "-t raw2 -S X", "can't initialize iptables table"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if errors.Is(err, errNotFound) {
		t.Errorf("error %q is errNotFound, want another exit status", err)
	}
	if _, err := r.EnsureRule(ctx, Append, "raw2", "X", "-j", "DROP"); err == nil || !strings.Contains(err.Error(), "check rule in chain X of table raw2") {
		t.Errorf("EnsureRule in an unknown table: error %v, want one naming the chain and table", err)
	}
}

func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		protocol Protocol
		ipv6     bool
	}{{ProtocolIPv4, false}, {ProtocolIPv6, true}} {
		r := &runner{protocol: tc.protocol}
		if r.IsIPv6() != tc.ipv6 || r.Protocol() != tc.protocol {
			t.Errorf("%s: IsIPv6 = %v, Protocol = %s", tc.protocol, r.IsIPv6(), r.Protocol())
		}
	}
}

func TestNewBestEffort(t *testing.T) {
	r, _ := newFake(t, "iptables", ProtocolIPv4)
	tests := []struct {
		name string
		path string
		mode Mode
		want []Protocol
	}{
		{"IPv4 only installed", filepath.Dir(r.binary), UseInstalledMode, []Protocol{ProtocolIPv4}},
		{"none installed", t.TempDir(), UseInstalledMode, nil},
		{"another mode", filepath.Dir(r.binary), "nft", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			clients := NewBestEffort(t.Context(), tc.mode)
			if len(clients) != len(tc.want) {
				t.Fatalf("clients for %v, want %v", keys(clients), tc.want)
			}
			for _, p := range tc.want {
				if c, ok := clients[p]; !ok || c.Protocol() != p {
					t.Errorf("no %s client: %v", p, keys(clients))
				}
			}
		})
	}
}

func keys(m map[Protocol]Interface) []Protocol {
	var ps []Protocol
	for p := range m {
		ps = append(ps, p)
	}
	return ps
}

// Monitor creates its canaries, calls reloadFunc once they are flushed, creates them again, and
// returns when its context ends.
func TestMonitor(t *testing.T) {
	r, state := newFake(t, "iptables", ProtocolIPv4)
	ctx, cancel := context.WithCancel(t.Context())
	var reloads atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Monitor(ctx, "KUBE-KUBELET-CANARY", []Table{TableMangle, TableNAT, TableFilter}, func() { reloads.Add(1) }, 10*time.Millisecond)
	}()
	canaries := func() []string {
		var paths []string
		for _, table := range []string{"mangle", "nat", "filter"} {
			paths = append(paths, filepath.Join(state, table, "KUBE-KUBELET-CANARY"))
		}
		return paths
	}
	waitFor(t, "canaries created", func() bool { return allExist(canaries()) })
	time.Sleep(50 * time.Millisecond)
	if n := reloads.Load(); n != 0 {
		t.Fatalf("%d reloads before any flush", n)
	}
	for _, p := range canaries() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a reload after the flush", func() bool { return reloads.Load() == 1 })
	waitFor(t, "canaries created again", func() bool { return allExist(canaries()) })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Monitor did not return after its context ended")
	}
	if n := reloads.Load(); n != 1 {
		t.Errorf("%d reloads, want 1", n)
	}
}

// Monitor stops when it cannot create its canaries.
func TestMonitorStopsWithoutCanaries(t *testing.T) {
	r, _ := newFake(t, "iptables", ProtocolIPv4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Monitor(t.Context(), "CANARY", []Table{"nosuchtable"}, func() { t.Error("reload called") }, time.Millisecond)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Monitor kept running without its canary")
	}
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
