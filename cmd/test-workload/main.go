// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command test-workload is the container workload of the local cluster's images.
//
// In the default "workload" mode it prints every environment variable whose name starts with
// DRA_ (sorted, one NAME=VALUE a line) to stdout, then sleeps until SIGTERM or SIGINT (exit 0),
// or until --exit-after has passed (exit 0).
//
// In "pause" mode it is the pod sandbox's pause process: it prints nothing, reaps any child
// that is re-parented to it and exits 0 on SIGTERM or SIGINT.
//
// It is built static (CGO_ENABLED=0) and is the only file of the images
// dra-failfast.local/workload and dra-failfast.local/pause.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	mode := flag.String("mode", "workload", `"workload" or "pause"`)
	exitAfter := flag.Duration("exit-after", 0, "exit 0 after this duration (0: run until SIGTERM)")
	flag.Parse()

	switch *mode {
	case "workload":
		os.Exit(workload(*exitAfter))
	case "pause":
		os.Exit(pause())
	default:
		fmt.Fprintf(os.Stderr, "test-workload: unknown --mode %q\n", *mode)
		os.Exit(2)
	}
}

// draEnv returns the NAME=VALUE entries of env whose names start with DRA_, sorted.
func draEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "DRA_") {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}

func workload(exitAfter time.Duration) int {
	// Register before printing so that a SIGTERM right after the output is handled; as PID 1
	// of a container an unhandled SIGTERM would be ignored.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	vars := draEnv(os.Environ())
	for _, kv := range vars {
		fmt.Println(kv)
	}
	fmt.Printf("test-workload: %d DRA_ variables, running\n", len(vars))

	var timeout <-chan time.Time
	if exitAfter > 0 {
		timeout = time.After(exitAfter)
	}
	select {
	case sig := <-sigs:
		fmt.Printf("test-workload: %v, exiting\n", sig)
	case <-timeout:
		fmt.Printf("test-workload: --exit-after=%v elapsed, exiting\n", exitAfter)
	}
	return 0
}

func pause() int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return 0
		}
		// Reap every exited child; with a shared PID namespace orphans land here.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}
