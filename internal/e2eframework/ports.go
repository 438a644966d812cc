// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package e2eframework

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The processes the tests start (test drivers, webhooks) are told which
// port to listen on, so a port is picked here, checked, released, and bound
// again by the process a moment later. A port from the kernel's ephemeral
// range could be taken meanwhile by any outgoing connection on the machine
// (a CI run failed on that: "bind: address already in use"), so ports are
// picked below that range, where only listeners take ports, and never twice
// by this process.
var ports struct {
	sync.Mutex
	next, end int
	given     map[int]bool
}

// portsBelowEphemeral is how many ports below the ephemeral range are used.
const portsBelowEphemeral = 10000

// freePort returns a port on 127.0.0.1 that was free a moment ago, below
// the ephemeral port range, and not returned before by this process.
func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		low := ephemeralLow()
		// Start at a place that depends on the process, so that two test
		// processes at once (go test of two packages) seldom probe the same
		// ports; the bind check below settles the rest.
		ports.end = low
		ports.next = low - portsBelowEphemeral + os.Getpid()%(portsBelowEphemeral/2)
		ports.given = map[int]bool{}
	}
	for range portsBelowEphemeral {
		port := ports.next
		ports.next++
		if ports.next >= ports.end {
			ports.next = ports.end - portsBelowEphemeral
		}
		if ports.given[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port among the %d below the ephemeral range", portsBelowEphemeral)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux
// default 32768).
func ephemeralLow() int {
	const linuxDefault = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return linuxDefault
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= portsBelowEphemeral+1024 {
		return linuxDefault
	}
	return low
}
