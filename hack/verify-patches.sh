#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Verifies the patch series staging-patches/*.patch, from scratch, in a fresh temporary copy of the
# pristine upstream tree (_output/tree/patched and your work there are not touched):
#   - every patch is a git format-patch mail with a Subject: and a non-empty message body;
#   - the patches apply cleanly in order (git apply --check, then applied as one commit each);
#   - this repository's module does not change upstream's dependency versions in the workspace;
#   - the patched tree builds ./cmd/kubelet with the generated go.work (output discarded).
# Thanks to -trimpath the build reuses the build cache of hack/build-kubelet.sh.
# With --typecheck, instead of the build: ./cmd/kubelet and the touched packages with their tests
# (TOUCHED_PACKAGES, hack/tree.sh) type-checked from source with the kubelet's build tags
# (hack/tools/typecheck): the same compile errors in seconds rather than a cold build's ten
# minutes, which is what make test affords on the versions other than the default.
#
# Usage: hack/verify-patches.sh [--typecheck]
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"
typecheck=false
case "$*" in
  "") ;;
  --typecheck) typecheck=true ;;
  *) die "usage: hack/verify-patches.sh [--typecheck]" ;;
esac

start=$(date +%s)
# On a version other than the default, the series as ported there (hack/tree.sh, port_of).
patches=()
while read -r patch; do
  patches+=("$(port_of "${patch}")")
done < <(patch_files)
log "verifying ${#patches[@]} patch(es) in staging-patches/ for ${KUBE_VERSION}"
for patch in "${patches[@]}"; do
  check_patch "${patch}"
done

# The upstream diff stays small and rebase-friendly: at most MAX_NON_TEST_LINES added or removed
# lines outside *_test.go files, over the whole series.
MAX_NON_TEST_LINES=45
non_test_lines=$(for patch in "${patches[@]}"; do git apply --numstat "${patch}"; done |
  awk '$3 !~ /_test\.go$/ { n += $1 + $2 } END { print n + 0 }')
[ "${non_test_lines}" -le "${MAX_NON_TEST_LINES}" ] ||
  die "the series changes ${non_test_lines} non-test upstream lines (at most ${MAX_NON_TEST_LINES})"
log "${non_test_lines} non-test upstream lines changed (at most ${MAX_NON_TEST_LINES})"

with_tree_lock ensure_pristine
mkdir -p "${TREE_DIR}"
tmp=$(mktemp -d "${TREE_DIR}/verify.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT
tree="${tmp}/tree"
work="${tmp}/tree.work"
log "copying the pristine tree to ${tmp#"${REPO_ROOT}/"}"
cp -a "${PRISTINE_TREE}" "${tree}"
apply_series "${tree}" "${patches[@]}"
write_workspace "${tree}" "${work}"
check_workspace_versions "${tree}" "${work}"
if ${typecheck}; then
  checker="${OUTPUT_DIR}/tools/typecheck"
  (cd "${REPO_ROOT}/hack/tools" && GOWORK=off go build -o "${checker}" ./typecheck)
  log "type-checking ./cmd/kubelet and ${TOUCHED_PACKAGES[*]} with their tests in the patched copy"
  (cd "${tree}" && GOWORK="${work}" "${checker}" -tags "${KUBE_BUILD_TAGS}" -test ./cmd/kubelet "${TOUCHED_PACKAGES[@]}")
  log "OK: ${#patches[@]} patch(es) well-formed, apply cleanly in order on ${KUBE_VERSION} and type-check ($(($(date +%s) - start))s)"
  exit 0
fi
log "building ./cmd/kubelet in the patched copy"
timed "go build ./cmd/kubelet" go_build_kube "${tree}" "${work}" "${FORK_VERSION}" /dev/null ./cmd/kubelet
log "OK: ${#patches[@]} patch(es) well-formed, apply cleanly in order on ${KUBE_VERSION} and build ./cmd/kubelet ($(($(date +%s) - start))s)"
