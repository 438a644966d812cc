// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package e2eframework

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePort(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= low || port < low-portsBelowEphemeral {
			t.Errorf("port %d outside [%d, %d): an outgoing connection could take it", port, low-portsBelowEphemeral, low)
		}
		if seen[port] {
			t.Errorf("port %d returned twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", port, err)
		}
		defer func() { _ = l.Close() }()
	}
}
