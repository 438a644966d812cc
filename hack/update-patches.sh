#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Regenerates staging-patches/ from the commits of the patched tree.
#
# The patched tree _output/tree/patched is a git repo: its first commit "upstream KUBE_VERSION"
# (tag upstream-KUBE_VERSION) is the pristine upstream source, and each commit after it is one
# patch of the series. To change the series:
#   1. hack/build-kubelet.sh              creates/updates the tree from staging-patches/
#   2. cd _output/tree/patched
#      edit upstream files, then          git commit -a       (a new patch: subject line, blank line,
#                                                              and a body saying why upstream changes)
#      or fix the last patch with         git commit -a --amend
#      or fix/reorder/squash older ones   git rebase -i upstream-KUBE_VERSION
#      (build/test inside the tree with   GOWORK=$PWD/../patched.work go build ./cmd/kubelet;
#       hack/build-kubelet.sh and hack/test-upstream.sh build what is committed *and* uncommitted)
#   3. hack/update-patches.sh             rewrites staging-patches/*.patch (0001-<subject>.patch ...)
#   4. hack/verify-patches.sh             checks the new series from scratch; then commit
#                                         staging-patches/ in this repository.
# The patches are made with a fixed git configuration and flags that keep them stable: no commit
# hashes (--zero-commit), no git version trailer (--no-signature), no "n/m" in subjects (-N), full
# blob ids (--full-index), and the default diff algorithm whatever your git config says. Author and
# date of each commit are kept, so rewriting an unchanged series gives byte-identical files.
#
# Usage: hack/update-patches.sh
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"
[ $# -eq 0 ] || die "usage: hack/update-patches.sh"

tree=${PATCHED_TREE}
[ -d "${tree}/.git" ] || die "no patched tree at ${tree}: run ${TREE_MAKER} first"
tree_git "${tree}" rev-parse -q --verify "refs/tags/${UPSTREAM_TAG}" >/dev/null ||
  die "${tree} has no tag ${UPSTREAM_TAG}: it was not made by ${TREE_MAKER}"
if [ -n "$(tree_git "${tree}" status --porcelain)" ]; then
  tree_git "${tree}" status --short >&2
  die "${tree} has uncommitted changes (above): commit them (git commit -a) or discard them first"
fi
if [ -n "$(tree_git "${tree}" rev-list --merges "${UPSTREAM_TAG}..HEAD")" ]; then
  die "the series in ${tree} contains merge commits: rebase them away (git rebase ${UPSTREAM_TAG})"
fi
tree_git "${tree}" merge-base --is-ancestor "${UPSTREAM_TAG}" HEAD ||
  die "HEAD of ${tree} does not descend from ${UPSTREAM_TAG}"

# Never overwrite patches the tree has not seen (e.g. brought in by a git pull since the tree was
# made): the tree must have been made from, or last exported to, the current staging-patches/.
synced=""
if [ -f "${tree}/${SERIES_STAMP}" ]; then
  read -r synced _ < "${tree}/${SERIES_STAMP}"
fi
if [ "${synced}" != "$(series_hash)" ]; then
  die "${PATCHES_DIR#"${REPO_ROOT}/"}/ changed since ${tree} was made from it: exporting would lose those changes.
Rebuild the tree first (${TREE_MAKER}; move your commits aside if it refuses), then redo them."
fi

count=$(tree_git "${tree}" rev-list --count "${UPSTREAM_TAG}..HEAD")
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
if [ "${count}" -gt 0 ]; then
  tree_git "${tree}" format-patch -q --no-signature --zero-commit -N --full-index \
    --diff-algorithm=myers --no-color --start-number "${SERIES_START_NUMBER}" -o "${tmp}" "${UPSTREAM_TAG}..HEAD" >/dev/null
fi
for patch in "${tmp}"/*.patch; do
  [ -e "${patch}" ] || continue
  check_patch "${patch}"
done

mkdir -p "${PATCHES_DIR}"
find "${PATCHES_DIR}" -maxdepth 1 -type f -name '*.patch' -delete
if [ "${count}" -gt 0 ]; then
  cp "${tmp}"/*.patch "${PATCHES_DIR}/"
fi
# The tree now holds exactly the series: record it so hack/build-kubelet.sh keeps the tree as it is.
write_series_stamp "${tree}"
log "wrote ${count} patch(es) to ${PATCHES_DIR#"${REPO_ROOT}/"}:"
for patch in $(patch_files); do
  log "  $(basename "${patch}")"
done
if command -v git >/dev/null && git -C "${REPO_ROOT}" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "${REPO_ROOT}" status --short -- "${PATCHES_DIR}" >&2 || true
fi
