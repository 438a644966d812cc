// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command runtime-wrapper is the OCI runtime the project's Docker daemon runs kind nodes with
// (hack/kind/engine.sh). kind starts every node with `docker run --privileged`, which asks runc for
// every capability and for the image's rlimits. On hosts whose capability bounding set lacks some
// capabilities (CAP_SYS_RESOURCE on our CI machines), runc then fails with "unable to apply caps:
// operation not permitted", and raising rlimits fails the same way. The wrapper removes, before
// runc sees them, the capabilities this process cannot hold and the rlimits from the container's
// config.json (create, run) or process file (exec), then execs runc with the same arguments.
// A privileged container gets every capability the host can grant, which is what privileged means.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// capabilityNames are the Linux capabilities by number (linux/capability.h).
var capabilityNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runtime-wrapper: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	runc, err := exec.LookPath(envOr("RUNTIME_WRAPPER_RUNC", "runc"))
	if err != nil {
		return fmt.Errorf("finding runc: %w", err)
	}
	if file := specFile(args); file != "" {
		missing, err := missingCapabilities()
		if err != nil {
			return err
		}
		if err := rewriteSpec(file, missing); err != nil {
			return err
		}
	}
	return syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// specFile returns the JSON file runc reads the process from: the bundle's config.json for
// create and run, the --process file for exec; "" for every other command.
func specFile(args []string) string {
	command := slices.IndexFunc(args, func(a string) bool { return a == "create" || a == "run" || a == "exec" })
	if command < 0 {
		return ""
	}
	flag := "--bundle"
	short := "-b"
	if args[command] == "exec" {
		flag, short = "--process", "-p"
	}
	rest := args[command+1:]
	for i, a := range rest {
		switch {
		case (a == flag || a == short) && i+1 < len(rest):
			return resolve(rest[i+1], args[command])
		case strings.HasPrefix(a, flag+"="):
			return resolve(strings.TrimPrefix(a, flag+"="), args[command])
		}
	}
	if args[command] == "exec" {
		return "" // the process comes from the command line: nothing to rewrite
	}
	return "config.json" // runc's default bundle is the working directory
}

func resolve(value, command string) string {
	if command == "exec" {
		return value
	}
	return filepath.Join(value, "config.json")
}

// missingCapabilities lists the capabilities outside this process's bounding set.
func missingCapabilities() ([]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		hex, ok := strings.CutPrefix(scanner.Text(), "CapBnd:")
		if !ok {
			continue
		}
		bounding, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing CapBnd %q: %w", hex, err)
		}
		var missing []string
		for bit, name := range capabilityNames {
			if bounding&(1<<bit) == 0 {
				missing = append(missing, name)
			}
		}
		return missing, nil
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("no CapBnd line in /proc/self/status")
}

// rewriteSpec removes the missing capabilities and the rlimits from an OCI spec (create, run)
// or process (exec) file, keeping everything else as it is.
func rewriteSpec(file string, missing []string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("decoding %s: %w", file, err)
	}
	process := doc
	if p, ok := doc["process"].(map[string]any); ok {
		process = p
	}
	delete(process, "rlimits")
	if caps, ok := process["capabilities"].(map[string]any); ok {
		for set, list := range caps {
			names, ok := list.([]any)
			if !ok {
				continue
			}
			caps[set] = slices.DeleteFunc(names, func(n any) bool {
				s, _ := n.(string)
				return slices.Contains(missing, s)
			})
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, info.Mode().Perm())
}
