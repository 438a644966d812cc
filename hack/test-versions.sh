#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Tests the fork on every Kubernetes version it supports (hack/lib.sh, SUPPORTED_KUBE_VERSIONS) and
# writes the report docs/versions.md is made from. Per version, the stages:
#   series   the series ported to that version's tree (hack/tree.sh: merged three ways from the
#            default version, or hand-ported in staging-patches/ports/<minor>/), the 45-line budget,
#            and ./cmd/kubelet built there (hack/verify-patches.sh);
#   unit     upstream's unit tests of the packages the series touches, in that patched tree, and this
#            repository's pkg/kubelet/cm/dra compiled against that tree and tested there
#            (hack/test-upstream.sh);
#   e2e      this project's end-to-end suite (test/e2e_node) with that version's fork kubelet, and its
#            stock kubelet where the suite compares, on the local cluster with that version's control
#            plane (needs root). TEST_VERSIONS_CONTROL_PLANE=default runs it under the default
#            version's control plane instead: a kubelet older than its API server, as the skew
#            policy allows and as every node is during a control plane upgrade.
#   upstream-e2e  upstream's own DRA node e2e suite of that version (its pristine tree's
#            test/e2e_node) against that version's fork kubelet with the gate off and on, the fork's
#            own KEP-5322 specs with the gate on (hack/test-upstream-e2e.sh; needs root). By default
#            the specs that prepare and unprepare claims, on the host, as make test runs them:
#            TEST_VERSIONS_UPSTREAM_E2E_RUNS (default fork-gate-off,fork-gate-on; add stock to
#            compare spec by spec) and TEST_VERSIONS_UPSTREAM_E2E_ARGS (default
#            -prepare-specs-only; empty for the whole suite) choose more.
#   bench    the benchmark's failing path with that version's fork kubelet on the local cluster of
#            that version's control plane (BENCH_MODE=failing: driver answer -> Failed, and the
#            raised-QPS storm; needs root).
# make test runs a cheaper check on every version but the default (hack/test.sh, stage versions:
# hack/verify-patches.sh --typecheck), and the default's full suite in its other stages.
#
# Usage: hack/test-versions.sh [STAGE...]      (default: series unit e2e upstream-e2e bench)
# Environment: TEST_VERSIONS="v1.36.3 ..."     (default: every supported version)
#              TEST_VERSIONS_REPORT=FILE       (default: _output/test-versions/versions.md)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ALL_STAGES=(series unit e2e upstream-e2e bench)
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=("${ALL_STAGES[@]}")
for stage in "${stages[@]}"; do
  [[ " ${ALL_STAGES[*]} " == *" ${stage} "* ]] || die "unknown stage ${stage} (stages: ${ALL_STAGES[*]})"
done
read -ra versions <<< "${TEST_VERSIONS:-${SUPPORTED_KUBE_VERSIONS[*]}}"
results="${OUTPUT_DIR}/test-versions"
report=${TEST_VERSIONS_REPORT:-${results}/versions.md}
mkdir -p "${results}"

# run_stage VERSION STAGE: runs STAGE for VERSION, its log in results/VERSION-STAGE.log; prints
# "result seconds detail".
run_stage() {
  local version=$1 stage=$2 log="${results}/$1-$2.log" start rc=0 detail="" summary
  start=$(date +%s)
  case "${stage}" in
    series) KUBE_VERSION=${version} "${REPO_ROOT}/hack/verify-patches.sh" > "${log}" 2>&1 || rc=$? ;;
    unit) KUBE_VERSION=${version} "${REPO_ROOT}/hack/test-upstream.sh" > "${log}" 2>&1 || rc=$? ;;
    e2e) e2e "${version}" > "${log}" 2>&1 || rc=$? ;;
    upstream-e2e)
      rm -rf "${results}/${version}-upstream-e2e"
      # shellcheck disable=SC2086 # the arguments are words
      KUBE_VERSION=${version} UPSTREAM_E2E_NODE=${UPSTREAM_E2E_NODE:-host} \
        UPSTREAM_E2E_RUNS=${TEST_VERSIONS_UPSTREAM_E2E_RUNS:-fork-gate-off,fork-gate-on} \
        "${REPO_ROOT}/hack/test-upstream-e2e.sh" -out "${results}/${version}-upstream-e2e" \
        ${TEST_VERSIONS_UPSTREAM_E2E_ARGS--prepare-specs-only} > "${log}" 2>&1 || rc=$?
      ;;
    bench)
      rm -rf "${results}/${version}-bench"
      KUBE_VERSION=${version} BENCH_MODE=failing "${REPO_ROOT}/hack/bench.sh" -out "${results}/${version}-bench" > "${log}" 2>&1 || rc=$?
      ;;
  esac
  case "${stage}" in
    series)
      detail="$(grep -c '(merged from' "${log}") merged, $(grep -c '(ported by hand)' "${log}") hand-ported, $(grep -c 'applied [0-9]*-.*patch$' "${log}") as written"
      detail+="; $(sed -n 's/.*\] \([0-9]*\) non-test upstream lines changed.*/\1/p' "${log}") non-test lines"
      ;;
    unit)
      summary="${OUTPUT_DIR}/test-upstream"
      [ "${version}" = "${DEFAULT_KUBE_VERSION}" ] || summary+="/${version}"
      detail=$(tail -2 "${summary}/summary.txt" 2>/dev/null | paste -sd';' | sed 's/;/; /') || detail=""
      ;;
    upstream-e2e)
      detail=$(grep -E '^(tests|verdict):' "${log}" | paste -sd';' | sed 's/;/; /')
      ;;
    bench)
      detail=$(bench_detail "${results}/${version}-bench")
      ;;
    e2e)
      detail="$(grep -c '^--- PASS' "${log}") passed, $(grep -c '^--- FAIL' "${log}") failed, $(grep -c '^--- SKIP' "${log}") skipped; kubelet $(sed -n 's/.*kubelet under test: Kubernetes \(.*\)$/\1/p' "${log}" | head -1), control plane $(sed -n 's/.*control plane: Kubernetes \(.*\)$/\1/p' "${log}" | head -1)"
      ;;
  esac
  echo "$([ "${rc}" -eq 0 ] && echo passed || echo FAILED) $(($(date +%s) - start)) ${detail}"
  return "${rc}"
}

# bench_detail DIR: the benchmark's goals and what it measured, from its results in DIR.
bench_detail() {
  local results="$1/results.json"
  [ -f "${results}" ] || { echo "no results"; return 0; }
  jq -r '[.goals[] | "\(.scenario): \(.measured), goal \(.target): \(if .met then "met" else "NOT met" end)"] | join("; ")' "${results}"
}

# e2e VERSION: builds VERSION's fork and stock kubelets and the control plane of the local cluster
# (VERSION's, or the default's with TEST_VERSIONS_CONTROL_PLANE=default), then runs test/e2e_node.
e2e() {
  local version=$1 kubelet
  [ "$(id -u)" -eq 0 ] || die "stage e2e runs a real kubelet and containerd: run as root"
  local control_plane=${version} bin=_output/bin cluster_bin=_output/bin
  [ "${TEST_VERSIONS_CONTROL_PLANE:-own}" = own ] || control_plane=${DEFAULT_KUBE_VERSION}
  KUBE_VERSION=${version} "${REPO_ROOT}/hack/build-kubelet.sh"
  KUBE_VERSION=${version} "${REPO_ROOT}/hack/build-kubelet.sh" --stock
  KUBE_VERSION=${control_plane} "${REPO_ROOT}/hack/build-cluster-binaries.sh"
  [ "${version}" = "${DEFAULT_KUBE_VERSION}" ] || bin+="/${version}"
  kubelet=${bin}/kubelet
  [ "${control_plane}" = "${DEFAULT_KUBE_VERSION}" ] || cluster_bin+="/${control_plane}"
  export LOCAL_CLUSTER_BIN_DIR=${REPO_ROOT}/${cluster_bin}
  while IFS= read -r setting; do
    export "${setting?}"
  done < <(control_plane_env "${control_plane}")
  echo "kubelet under test: $("${REPO_ROOT}/${kubelet}" --version)"
  echo "control plane: $("${LOCAL_CLUSTER_BIN_DIR}/kube-apiserver" --version)"
  (cd "${REPO_ROOT}" && LOCAL_CLUSTER_KUBELET=${kubelet} go test -tags e2e_node -count=1 -v -timeout 30m -parallel 48 ./test/e2e_node/)
}

failed=0
rows=()
for version in "${versions[@]}"; do
  row="| ${version}"
  [ "${version}" != "${DEFAULT_KUBE_VERSION}" ] || row+=" (default)"
  row+=" |"
  for stage in "${ALL_STAGES[@]}"; do
    if [[ " ${stages[*]} " != *" ${stage} "* ]]; then
      row+=" not run |"
      continue
    fi
    log "${version}: ${stage}"
    if out=$(run_stage "${version}" "${stage}"); then :; else failed=$((failed + 1)); fi
    read -r result seconds detail <<< "${out}"
    log "${version}: ${stage} ${result} in ${seconds}s (${detail}); log: ${results#"${REPO_ROOT}/"}/${version}-${stage}.log"
    row+=" ${result} in ${seconds} s: ${detail} |"
  done
  rows+=("${row}")
done

{
  echo "| version | series (ported, budget, ./cmd/kubelet built) | unit (upstream's tests of the touched packages and pkg/kubelet/cm/dra, in that tree) | e2e (test/e2e_node with that version's kubelets on the local cluster) | upstream-e2e (upstream's DRA e2e_node specs of that version, the fork with the gate off and on) | bench (failing path, fork) |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  dirty=""
  [ -z "$(git -C "${REPO_ROOT}" status --porcelain)" ] || dirty=" (with uncommitted changes)"
  echo "Commit $(git -C "${REPO_ROOT}" rev-parse --short HEAD)${dirty}, $(date -u +%Y-%m-%d), \`hack/test-versions.sh ${stages[*]}\`."
} > "${report}"
log "report: ${report#"${REPO_ROOT}/"}"
[ "${failed}" -eq 0 ] || die "${failed} stage(s) failed (above)"
log "every version passed: ${versions[*]}"
