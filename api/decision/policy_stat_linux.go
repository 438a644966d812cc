// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"io/fs"
	"syscall"
)

// fileIdentity returns the change time (ns) and inode of a file: a rename
// gives a new inode, a chmod or a write within one mtime tick a new ctime.
func fileIdentity(info fs.FileInfo) (ctime int64, inode uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano(), st.Ino
	}
	return 0, 0
}
