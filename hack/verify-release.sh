#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when two release builds of the same commit differ: runs hack/release.sh twice (the kubelet
# is linked anew each time; deleted in between) and compares the kubelet checksums and manifests.
# Then applies the release's patches to the pristine KUBE_VERSION tree with git am and checks that
# they give the tree the kubelet was built from. With warm caches it takes about a minute. For a check from cold caches, run it with an empty
# GOCACHE, or compare kubelet.sha256 across two machines.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
for build in first second; do
  rm -f "${VERSION_BIN_DIR}/kubelet"
  RELEASE_DIR="${tmp}/${build}" hack/release.sh > "${tmp}/${build}.log" 2>&1 ||
    { cat "${tmp}/${build}.log"; die "the ${build} release build failed"; }
done
if ! diff -u "${tmp}/first/MANIFEST" "${tmp}/second/MANIFEST" || ! cmp -s "${tmp}/first/kubelet" "${tmp}/second/kubelet"; then
  die "two release builds of the same commit differ"
fi
log "release is reproducible: two builds give kubelet sha256 $(cut -d' ' -f1 "${tmp}/first/kubelet.sha256")"

# The release's patches are what a user applies to upstream KUBE_VERSION: `git am` of them on the
# pristine tree gives exactly the tree the kubelet was built from.
# shellcheck source-path=SCRIPTDIR
source "${REPO_ROOT}/hack/tree.sh"
tree_git "${PRISTINE_TREE}" worktree add -q --detach "${tmp}/am" HEAD
trap 'tree_git "${PRISTINE_TREE}" worktree remove --force "${tmp}/am"; rm -rf "${tmp}"' EXIT
tree_git "${tmp}/am" am -q "${tmp}/first/patches/"*.patch || die "the release's patches do not apply to ${KUBE_VERSION} with git am"
[ "$(tree_git "${tmp}/am" rev-parse 'HEAD^{tree}')" = "$(tree_git "${PATCHED_TREE}" rev-parse 'HEAD^{tree}')" ] ||
  die "the release's patches applied to ${KUBE_VERSION} do not give the tree its kubelet was built from (${PATCHED_TREE#"${REPO_ROOT}/"})"
log "the release's $(find "${tmp}/first/patches" -name '*.patch' | wc -l) patches apply to upstream ${KUBE_VERSION} with git am and give the patched tree"
