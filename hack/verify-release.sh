#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when two release builds of the same commit differ: runs hack/release.sh twice (the kubelet
# is linked anew each time; deleted in between) and compares the kubelet checksums and manifests.
# With warm caches it takes about a minute. For a check from cold caches, run it with an empty
# GOCACHE, or compare kubelet.sha256 across two machines.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
for build in first second; do
  rm -f "${OUTPUT_DIR}/bin/kubelet"
  RELEASE_DIR="${tmp}/${build}" hack/release.sh > "${tmp}/${build}.log" 2>&1 ||
    { cat "${tmp}/${build}.log"; die "the ${build} release build failed"; }
done
if ! diff -u "${tmp}/first/MANIFEST" "${tmp}/second/MANIFEST" || ! cmp -s "${tmp}/first/kubelet" "${tmp}/second/kubelet"; then
  die "two release builds of the same commit differ"
fi
log "release is reproducible: two builds give kubelet sha256 $(cut -d' ' -f1 "${tmp}/first/kubelet.sha256")"
