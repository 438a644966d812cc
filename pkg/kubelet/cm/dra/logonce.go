// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import "sync"

// maxLoggedKeys bounds the memory of onceSet: when full it forgets
// everything, which at worst logs a message once more.
const maxLoggedKeys = 4096

// onceSet remembers what was already logged at the default verbosity, per
// pod: a failing pod is retried at every resync and must not flood the log.
type onceSet struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// firstTime reports whether key is new, and remembers it.
func (s *onceSet) firstTime(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[key]; ok {
		return false
	}
	if s.seen == nil || len(s.seen) >= maxLoggedKeys {
		s.seen = make(map[string]struct{})
	}
	s.seen[key] = struct{}{}
	return true
}
