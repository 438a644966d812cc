#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make verify: every static check, no root and no cluster needed: gofmt, go vet (with and without
# the e2e_node tag), shellcheck, license headers, generated code, go.mod, the library modules'
# requirements (what a release tag publishes resolves with go get alone), the example driver's
# Helm chart (helm lint, and deploy/gpu-driver/manifests.yaml is its render), the patch series
# (applies to pristine KUBE_VERSION, builds, stays within its line budget), and the upstream-shaped
# series (hack/upstream.sh verify --quick: upstream's generators, the single-source checks, and
# upstream/verified.txt naming the series as it is; its compile, tests, kubelet build and
# upstream's own verify scripts only with make verify-upstream). Runs all checks and fails
# at the end if any failed. Installs shellcheck from Debian when missing and running as root.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

# VERIFY_SKIP: names of checks to leave out; VERIFY_ONLY: the only checks to run. make test leaves
# the two that only the kind recipe needs (manifests, vet-kind) to make test-extra's kind stage.
failed=()
check() {
  local name=$1
  shift
  if [[ " ${VERIFY_SKIP:-} " == *" ${name} "* ]] || [[ -n "${VERIFY_ONLY:-}" && " ${VERIFY_ONLY} " != *" ${name} "* ]]; then
    log "verify ${name}: skipped (VERIFY_SKIP, VERIFY_ONLY)"
    return 0
  fi
  if "$@"; then
    log "verify ${name}: ok"
  else
    log "verify ${name}: FAILED"
    failed+=("${name}")
  fi
}

gofmt_clean() {
  local unformatted
  unformatted=$(gofmt -l api cmd examples hack internal pkg test)
  [ -z "${unformatted}" ] || { echo "gofmt needed: ${unformatted}"; return 1; }
}

# go vet in the patched tree's workspace with the kubelet's flags (fork_go, hack/tree.sh): run after
# the series check, whose kubelet build has compiled most of what vet needs.
go_vet() {
  (
    # shellcheck source=hack/tree.sh
    source hack/tree.sh
    prepare_fork_workspace
    fork_go vet ./... && fork_go vet -tags "e2e_node,${KUBE_BUILD_TAGS}" ./test/... ./internal/... || exit 1
    for mod in "${LIBRARY_MODULES[@]}" "${TOOL_MODULE}" "${EXAMPLE_MODULE}"; do
      (cd "${mod}" && fork_go vet ./...) || exit 1
    done
  ) || return 1
  # Outside the workspace: its plugin versions must stay upstream's (hack/tools/go.mod); the
  # stand-ins for modules the proxy refuses have no dependencies (hack/tree.sh, STANDIN_MODULES).
  (cd hack/tools && GOWORK=off go vet ./...) && (cd hack/standins/iptables-wrappers && GOWORK=off go vet ./...)
}

# go vet of the kind recipe's cluster tests (build tag kindcluster), as go_vet.
go_vet_kind() {
  (
    # shellcheck source=hack/tree.sh
    source hack/tree.sh
    prepare_fork_workspace
    fork_go vet -tags "kindcluster,${KUBE_BUILD_TAGS}" ./test/kind/
  )
}

shellcheck_scripts() {
  if ! command -v shellcheck > /dev/null; then
    [ "$(id -u)" -eq 0 ] || { echo "shellcheck is not installed (apt-get install shellcheck)"; return 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck > /dev/null
  fi
  shellcheck -x hack/*.sh hack/kind/*.sh hack/real-driver/*.sh hack/real-driver/docker .ci/run
}

check gofmt gofmt_clean
check shellcheck shellcheck_scripts
check license-headers hack/verify-license.sh
check codegen hack/verify-codegen.sh
check gomod hack/verify-gomod.sh
check library-release hack/release-library.sh --check
check patches hack/verify-patches.sh
check vet go_vet
check vet-kind go_vet_kind
check manifests hack/update-manifests.sh --check
check upstream-series env -u KUBE_VERSION hack/upstream.sh verify --quick # on its own base, SERIES_KUBE_VERSION
[ "${#failed[@]}" -eq 0 ] || die "verify failed: ${failed[*]}"
log "verify: all checks passed"
