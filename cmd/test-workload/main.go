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
// In "serve" mode it answers every HTTP request on --listen with its host name (the pod's name),
// until SIGTERM or SIGINT. In "fetch" mode it GETs --url until an answer comes or --exit-after
// has passed, prints the answer and exits 0, or exits 1: the kind clusters' network check.
//
// It is built static (CGO_ENABLED=0) and is the only file of the images
// dra-failfast.local/workload and dra-failfast.local/pause.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	mode := flag.String("mode", "workload", `"workload", "pause", "serve" or "fetch"`)
	exitAfter := flag.Duration("exit-after", 0, "workload: exit 0 after this duration (0: run until SIGTERM); fetch: give up after it")
	listen := flag.String("listen", ":8080", "serve: address to listen on")
	url := flag.String("url", "", "fetch: URL to GET")
	flag.Parse()

	switch *mode {
	case "workload":
		os.Exit(workload(*exitAfter))
	case "pause":
		os.Exit(pause())
	case "serve":
		os.Exit(serve(*listen))
	case "fetch":
		os.Exit(fetch(*url, *exitAfter))
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

func serve(listen string) int {
	host, _ := os.Hostname()
	server := &http.Server{Addr: listen, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = server.Shutdown(context.Background())
	}()
	fmt.Printf("test-workload: serving %s on %s\n", host, listen)
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "test-workload: %v\n", err)
		return 1
	}
	return 0
}

func fetch(url string, giveUpAfter time.Duration) int {
	if url == "" {
		fmt.Fprintln(os.Stderr, "test-workload: --mode=fetch needs --url")
		return 2
	}
	if giveUpAfter <= 0 {
		giveUpAfter = time.Minute
	}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(giveUpAfter)
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if readErr == nil && resp.StatusCode == http.StatusOK {
				fmt.Printf("test-workload: %s answered: %s", url, body)
				return 0
			}
			err = fmt.Errorf("status %d, read error %v", resp.StatusCode, readErr)
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "test-workload: %s: no answer in %v, last error: %v\n", url, giveUpAfter, err)
			return 1
		}
		time.Sleep(time.Second)
	}
}
