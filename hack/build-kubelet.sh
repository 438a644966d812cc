#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds the patched kubelet, _output/bin/kubelet (version KUBE_VERSION-dra-failfast.FORK_REVISION):
#   1. _output/tree/pristine: k8s.io/kubernetes@KUBE_VERSION + staging modules from the module cache,
#      a git repo with one commit "upstream KUBE_VERSION" (assembled once);
#   2. _output/tree/patched: pristine + staging-patches/*.patch in order, one commit per patch
#      (redone only when the patch set changes; edits and commits you make there are built as they are);
#   3. _output/tree/patched.work: the Go workspace joining the tree, its staging modules and this
#      repository, so the patched tree can import github.com/dra-failfast/dra-failfast/pkg/...;
#   4. go build ./cmd/kubelet in the patched tree with upstream's release flags.
# With --stock, builds _output/bin/kubelet-stock (version KUBE_VERSION) from the pristine tree with
# upstream's own go.work instead. With --race, builds the patched kubelet with the Go race detector
# as _output/bin/kubelet-race (for make test-e2e-race). With --series, builds
# _output/bin/kubelet-series (version SERIES_VERSION) from the upstream-shaped series' tree
# (_output/tree/<SERIES_KUBE_VERSION>/upstream = pristine + upstream/patches/, nothing of this repository in its
# workspace), for make test-series. A rerun with nothing changed takes seconds.
#
# Usage: hack/build-kubelet.sh [--stock | --race | --series]
# Environment: DBG=1 keeps symbols and disables optimisations (for a debugger), like upstream's DBG.
# The series' tree is tree.sh's SERIES=upstream: chosen before it is sourced.
for arg in "$@"; do
  [ "${arg}" != --series ] || export SERIES=upstream
done
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"

stock=false
race=false
series=false
for arg in "$@"; do
  case "${arg}" in
    --stock) stock=true ;;
    --race) race=true ;;
    --series) series=true ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ {exit} NR > 1 && !/shellcheck/ {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument ${arg} (usage: hack/build-kubelet.sh [--stock | --race | --series])" ;;
  esac
done

start=$(date +%s)
mkdir -p "${BIN_DIR}"
with_tree_lock ensure_pristine
if ${stock}; then
  out="${BIN_DIR}/kubelet-stock"
  version=${KUBE_VERSION}
  log "building ${out#"${REPO_ROOT}/"} (${version}) from the pristine tree"
  timed "go build ./cmd/kubelet (stock)" \
    go_build_kube "${PRISTINE_TREE}" "$(stock_workspace)" "${version}" "${out}" ./cmd/kubelet
elif ${series}; then
  out="${BIN_DIR}/kubelet-series"
  version=${SERIES_VERSION}
  with_tree_lock ensure_patched
  with_tree_lock write_workspace "${PATCHED_TREE}" "${PATCHED_WORK}" --upstream
  log "building ${out#"${REPO_ROOT}/"} (${version}) from the series' tree ($(tree_git "${PATCHED_TREE}" rev-parse --short HEAD))"
  timed "go build ./cmd/kubelet (series)" \
    go_build_kube "${PATCHED_TREE}" "${PATCHED_WORK}" "${version}" "${out}" ./cmd/kubelet
else
  out="${BIN_DIR}/kubelet"
  if ${race}; then
    out="${BIN_DIR}/kubelet-race"
    export KUBE_BUILD_RACE=1
  fi
  version=${FORK_VERSION}
  with_tree_lock ensure_patched
  with_tree_lock write_workspace "${PATCHED_TREE}" "${PATCHED_WORK}"
  check_workspace_versions "${PATCHED_TREE}" "${PATCHED_WORK}"
  log "building ${out#"${REPO_ROOT}/"} (${version}) from the patched tree ($(tree_git "${PATCHED_TREE}" rev-parse --short HEAD))"
  timed "go build ./cmd/kubelet" \
    go_build_kube "${PATCHED_TREE}" "${PATCHED_WORK}" "${version}" "${out}" ./cmd/kubelet
fi
log "$("${out}" --version) -> ${out#"${REPO_ROOT}/"} ($(($(date +%s) - start))s in all)"
