// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package decision

import "io/fs"

// fileIdentity: size and modification time only on other systems (the
// kubelet's DRA support is Linux's; tools read the policy anywhere).
func fileIdentity(fs.FileInfo) (ctime int64, inode uint64) { return 0, 0 }
