// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Host settings the stack changes outside the state directory: the kubelet sets kernel tunables
// (protectKernelDefaults: false) and iptables chains, the CNI bridge plugin turns on IP forwarding.
// Up records the sysctls before starting anything; teardown puts them back and removes the chains.

// touchedSysctls are the /proc/sys entries the kubelet and the bridge plugin may write.
var touchedSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward",
}

// readSysctls returns the current values of touchedSysctls.
func readSysctls() map[string]string {
	values := map[string]string{}
	for _, name := range touchedSysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err == nil {
			values[name] = strings.TrimSpace(string(data))
		}
	}
	return values
}

// restoreSysctls writes back the values that differ from saved.
func restoreSysctls(saved map[string]string) error {
	var errs []error
	current := readSysctls()
	for name, value := range saved {
		if current[name] == value || !contains(touchedSysctls, name) {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s=%s: %w", name, value, err))
		}
	}
	return errors.Join(errs...)
}

// changedSysctls lists the sysctls that still differ from saved.
func changedSysctls(saved map[string]string) []string {
	var out []string
	current := readSysctls()
	for name, value := range saved {
		if contains(touchedSysctls, name) && current[name] != value {
			out = append(out, fmt.Sprintf("sysctl %s=%s (was %s)", name, current[name], value))
		}
	}
	return out
}

// kubeletChains are the iptables chains the kubelet creates, by table.
var kubeletChains = map[string][]string{
	"filter": {"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"},
	"nat":    {"KUBE-KUBELET-CANARY"},
	"mangle": {"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"},
}

var iptablesCommands = []string{"iptables", "ip6tables"}

// removeKubeletChains deletes the kubelet's jumps and chains from iptables and ip6tables.
func removeKubeletChains() error {
	var errs []error
	for _, ipt := range iptablesCommands {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		for _, builtin := range []string{"INPUT", "OUTPUT"} {
			for i := 0; i < 10; i++ {
				if exec.Command(ipt, "-w", "-t", "filter", "-D", builtin, "-j", "KUBE-FIREWALL").Run() != nil {
					break
				}
			}
		}
		for table, chains := range kubeletChains {
			for _, chain := range chains {
				if exec.Command(ipt, "-w", "-t", table, "-S", chain).Run() != nil {
					continue // no such chain
				}
				_ = exec.Command(ipt, "-w", "-t", table, "-F", chain).Run()
				if out, err := exec.Command(ipt, "-w", "-t", table, "-X", chain).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s -X %s: %v: %s", ipt, table, chain, err, strings.TrimSpace(string(out))))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// kubeletChainsLeft lists the kubelet chains still present.
func kubeletChainsLeft() []string {
	var out []string
	for _, ipt := range iptablesCommands {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		for table, chains := range kubeletChains {
			for _, chain := range chains {
				if exec.Command(ipt, "-w", "-t", table, "-S", chain).Run() == nil {
					out = append(out, fmt.Sprintf("%s chain %s/%s", ipt, table, chain))
				}
			}
		}
	}
	return out
}
