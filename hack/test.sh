#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# The project's test run (make test, README, .ci/run), or some of its stages:
#   hack/test.sh [STAGE...]      default: verify unit real-driver build upstream versions e2e
#                                release, in this order: what fits make test's 60-minute budget from
#                                cold on 2 cores. make test-extra runs the rest: adoption
#                                upstream-e2e bench kind (docs/building.md, "How long it takes").
#   verify   static checks (hack/verify.sh: gofmt, vet, shellcheck, license headers, codegen,
#            go.mod, the patch series applies to pristine KUBE_VERSION and builds; the two
#            checks only the kind recipe needs run in the kind stage)
#   unit     our unit tests with -race: the root module's, the library modules', the tools' and the
#            stand-ins' (make unit; no root)
#   adoption outside modules fetch the driver library by its release tag, with no replace, and build
#            and test against it (a scratch release; hack/verify-adoption.sh)
#   real-driver  per driver written elsewhere (../shared/third_party: dra-example-driver v0.4.0,
#            dra-driver-google-tpu v0.2.0): our adoption patch and tests apply, the adopted driver
#            builds and passes its own vet and unit tests (make test-real-driver runs each one's own
#            suite on kind, stock / gate off / gate on)
#   build    the fork and the stock kubelet, the local cluster, the test driver and tools
#   upstream upstream's unit tests in the patched tree
#   versions on every supported Kubernetes version but the default: the series ported to its tree
#            applies, stays within its budget, and ./cmd/kubelet and the touched packages with their
#            tests type-check there (hack/verify-patches.sh --typecheck; make test-versions builds,
#            tests and benchmarks each version)
#   e2e      end-to-end tests on a real local cluster (make e2e runs build and e2e)
#   upstream-e2e  upstream's DRA node e2e specs that prepare and unprepare claims, against the fork
#            with its gate on, on this host (make test-upstream-e2e runs all DRA specs, the
#            kubelet-restart ones included, in systemd nodes, stock / gate off / gate on, and the
#            series' own KEP-5322 specs)
#   bench    the benchmark's smoke run (make bench BENCH_MODE=smoke)
#   kind     the Helm chart's check and go vet of test/kind's cluster tests (KIND_VERIFY_CHECKS),
#            then make test-kind but its two slowest scenarios (driver DaemonSet roll, node reboot:
#            3 min each, waiting on the kubelets' pod resync; make test-kind runs them) and the
#            webhook load measurement (TestWebhookUnderForgedLoad): node images built with nothing
#            from a registry, the mixed fork/stock kind cluster, both drivers deployed from
#            deploy/, test/kind's cluster tests, the cluster and the engine taken down, the host
#            checked
#   release  two release builds give the same kubelet (hack/verify-release.sh)
# Ends with one line "N passed, N failed" over every test that ran. build, e2e, upstream-e2e, bench,
# kind and release need root (Debian packages, containerd, kubelet); all need the Go module proxy.
# shellcheck disable=SC2317 # stages are called through stage()
# shellcheck source=hack/tree.sh
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"
cd "${REPO_ROOT}" || exit 1

results="${OUTPUT_DIR}/test"
mkdir -p "${results}"
passed=0
failed=0
status=0

# count_go_tests LOG: adds the top-level test results of a `go test -v` log to the totals.
count_go_tests() {
  local p f
  p=$(grep -c '^--- PASS' "$1" || true)
  f=$(grep -c '^--- FAIL' "$1" || true)
  passed=$((passed + p))
  failed=$((failed + f))
}

stage() {
  local name=$1
  shift
  log "=== ${name}"
  local start=${SECONDS}
  if "$@"; then
    log "=== ${name}: ok ($((SECONDS - start))s)"
  else
    log "=== ${name}: FAILED ($((SECONDS - start))s)"
    status=1
  fi
}

# unit_tests: the root module's tests, then each library module's, the check tool's and
# hack/tools', all with -race.
unit_tests() {
  local rc=0 mod
  go test -race -count=1 -v ./... > "${results}/unit.log" 2>&1 || rc=$?
  for mod in "${LIBRARY_MODULES[@]}" "${TOOL_MODULE}"; do
    (cd "${mod}" && go test -race -count=1 -v ./...) >> "${results}/unit.log" 2>&1 || rc=$?
  done
  # Outside the workspace, as hack/verify.sh vets them.
  (cd hack/tools && GOWORK=off go test -race -count=1 -v ./...) >> "${results}/unit.log" 2>&1 || rc=$?
  (cd hack/standins/iptables-wrappers && GOWORK=off go test -race -count=1 -v ./...) >> "${results}/unit.log" 2>&1 || rc=$?
  grep -E '^(ok|FAIL|---)' "${results}/unit.log" | grep -v '^--- PASS' || true
  count_go_tests "${results}/unit.log"
  return "${rc}"
}

# adoption_check: outside modules adopt the driver library by its release tag (hack/verify-adoption.sh:
# a scratch release, an outside module and the example driver, standard Go commands, no replace, no
# k8s.io/kubernetes in their graphs).
adoption_check() {
  local log="${results}/adoption.log" rc=0
  # The floor (v0.36.0) stands for its minor here; make verify-adoption also runs v0.36's newest patch.
  ADOPTION_RELEASES="${LIBRARY_KUBE_TESTED[*]: -1}" hack/verify-adoption.sh > "${log}" 2>&1 || rc=$?
  grep -E '^(ok|FAIL|---)|verify-adoption' "${log}" | grep -v '^--- PASS' || true
  [ "${rc}" -eq 0 ] || { echo "last lines of ${log#"${REPO_ROOT}/"}:"; tail -40 "${log}"; }
  count_go_tests "${log}"
  return "${rc}"
}

upstream_tests() {
  local rc=0 line
  hack/test-upstream.sh || rc=$?
  line=$(grep -E '^tests: ' "${OUTPUT_DIR}/test-upstream/summary.txt" || echo "tests: 0 passed, 1 failed")
  passed=$((passed + $(sed -E 's/^tests: ([0-9]+) passed.*/\1/' <<<"${line}")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"${line}")))
  return "${rc}"
}

# other_versions: on every supported version but the default, the series as ported there applies,
# stays within its budget, and ./cmd/kubelet and the touched packages with their tests type-check in
# that tree (hack/verify-patches.sh --typecheck: seconds per version, where compiling and running
# their unit tests costs ten minutes each from cold; make test-versions does that and more). Each
# version counts as one test.
other_versions() {
  local rc=0 version log
  for version in "${SUPPORTED_KUBE_VERSIONS[@]}"; do
    [ "${version}" != "${DEFAULT_KUBE_VERSION}" ] || continue
    log="${results}/versions-${version}.log"
    if KUBE_VERSION=${version} hack/verify-patches.sh --typecheck > "${log}" 2>&1; then
      passed=$((passed + 1))
      grep -E 'typecheck: |OK: ' "${log}" | sed "s/^/${version}: /"
    else
      failed=$((failed + 1)) rc=1
      echo "${version}: last lines of ${log#"${REPO_ROOT}/"}:"
      tail -40 "${log}"
    fi
  done
  return "${rc}"
}

# e2e_package NAME PKG [GO TEST FLAG...]: runs one package's e2e_node tests into NAME.log. One
# package at a time: every local cluster binds the same ports.
e2e_package() {
  local name=$1 pkg=$2 rc=0 log
  shift 2
  log="${results}/${name}.log"
  # In the workspace the tools were built in, reusing the kubelet's compile (fork_go, hack/tree.sh).
  prepare_fork_workspace > /dev/null
  fork_go test -tags "e2e_node,${KUBE_BUILD_TAGS}" -count=1 -v -timeout 30m "$@" "${pkg}" > "${log}" 2>&1 || rc=$?
  grep -E '^(ok|FAIL|--- |    [a-z0-9_]+_test\.go)' "${log}" | grep -v 'localcluster \[' | cut -c1-300 || true
  [ "${rc}" -eq 0 ] || { echo "last lines of ${log#"${REPO_ROOT}/"}:"; tail -40 "${log}"; }
  count_go_tests "${log}"
  return "${rc}"
}

e2e_tests() {
  local rc=0
  # The cluster itself (bring-up, a pod surviving a kubelet restart, recovery after a crash,
  # teardown leaving nothing), with the stock kubelet: comparisons with upstream run on it.
  LOCAL_CLUSTER_KUBELET=_output/bin/kubelet-stock \
    e2e_package localcluster ./internal/localcluster/ -run '^(TestLocalCluster|TestUpAfterCrash)$' || rc=$?
  # -parallel: the fault matrix's parallel tests mostly wait for the cluster, not for a CPU.
  e2e_package e2e ./test/e2e_node/ -parallel 48 || rc=$?
  return "${rc}"
}

# upstream_e2e: the fork-gate-on run of make test-upstream-e2e on upstream's specs that prepare
# and unprepare claims, on this host (the whole comparison takes about two hours, too long for
# make test's budget; the series' own specs are left to it: test/e2e_node covers what they check);
# every spec that runs must pass. Each spec counts as one test.
upstream_e2e() {
  local log="${results}/upstream-e2e.log" rc=0 line
  UPSTREAM_E2E_NODE=host UPSTREAM_E2E_RUNS=fork-gate-on UPSTREAM_E2E_OWN_SPECS=0 hack/test-upstream-e2e.sh -prepare-specs-only -out "${OUTPUT_DIR}/test/upstream-e2e" \
    > "${log}" 2>&1 || rc=$?
  line=$(grep -E '^tests: ' "${log}" || echo "tests: 0 passed, 1 failed")
  passed=$((passed + $(sed -E 's/^tests: ([0-9]+) passed.*/\1/' <<<"${line}")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"${line}")))
  grep -E '^\|' "${log}" || true
  [ "${rc}" -eq 0 ] || { echo "last lines of ${log#"${REPO_ROOT}/"}:"; tail -40 "${log}"; }
  return "${rc}"
}
# bench_smoke: make bench BENCH_MODE=smoke, so that the benchmark harness cannot rot. It checks
# only what holds on any machine (fork pods Failed, one prepare and one unprepare per failing pod,
# the webhook keeps the churn's pods waiting, at most one Failed pod per tainted broken device, the
# report files parse); timings are reported, never asserted. Counts as one test.
bench_smoke() {
  local log="${results}/bench-smoke.log"
  if BENCH_MODE=smoke hack/bench.sh -out "${OUTPUT_DIR}/test/bench-smoke" > "${log}" 2>&1; then
    passed=$((passed + 1))
    grep -E '^\[bench' "${log}" | tail -3
  else
    failed=$((failed + 1))
    echo "last lines of ${log#"${REPO_ROOT}/"}:"
    tail -40 "${log}"
    return 1
  fi
}

# The checks of make verify that only the kind recipe needs: the Helm chart's (helm's own compile,
# about three minutes cold) and go vet of the kind cluster tests (kind's dependencies, about one
# minute): the kind stage runs them, the verify stage all the others.
KIND_VERIFY_CHECKS="manifests vet-kind"

verify_checks() {
  VERIFY_SKIP=${KIND_VERIFY_CHECKS} hack/verify.sh
}

# kind_smoke: the kind recipe's checks of make verify (KIND_VERIFY_CHECKS), then make test-kind,
# counted like the other go test stages.
kind_smoke() {
  local log="${results}/kind.log" rc=0
  VERIFY_ONLY=${KIND_VERIFY_CHECKS} hack/verify.sh > "${log}" 2>&1 || {
    echo "hack/verify.sh (${KIND_VERIFY_CHECKS}) failed:"
    tail -20 "${log}"
    failed=$((failed + 1))
    return 1
  }
  KIND_TEST_SKIP='^(TestDriverRollout|TestNodeReboot|TestWebhookUnderForgedLoad)$' hack/test-kind.sh >> "${log}" 2>&1 || rc=$?
  grep -E '^(ok|FAIL|--- )|test-kind|kind cluster .* up in' "${log}" | cut -c1-300 || true
  [ "${rc}" -eq 0 ] || { echo "last lines of ${log#"${REPO_ROOT}/"}:"; tail -40 "${log}"; }
  count_go_tests "${log}"
  return "${rc}"
}

run_stage() {
  case "$1" in
    verify) stage "static checks and the patch series (hack/verify.sh)" verify_checks ;;
    unit) stage "unit tests (-race)" unit_tests ;;
    adoption) stage "outside modules fetch the driver library by tag (hack/verify-adoption.sh)" adoption_check ;;
    real-driver) stage "a driver written elsewhere adopts the library (hack/test-real-driver.sh check)" real_driver_check ;;
    build) stage "build (fork and stock kubelet, local cluster, test driver, tools)" hack/build.sh ;;
    upstream) stage "upstream unit tests in the patched tree" upstream_tests ;;
    versions) stage "the series applies and type-checks on the other Kubernetes versions (hack/verify-patches.sh --typecheck)" other_versions ;;
    e2e) stage "end-to-end tests on a local cluster (stock kubelet, then the fork)" e2e_tests ;;
    upstream-e2e) stage "upstream's DRA node e2e specs, fork with the gate on (hack/test-upstream-e2e.sh)" upstream_e2e ;;
    bench) stage "benchmark smoke run (make bench BENCH_MODE=smoke)" bench_smoke ;;
    kind) stage "kind smoke: offline node images, a three-node cluster, both drivers (make test-kind)" kind_smoke ;;
    release) stage "release builds are reproducible (hack/verify-release.sh)" release_check ;;
    *) die "unknown stage $1 (stages: verify unit adoption real-driver build upstream versions e2e upstream-e2e bench kind release)" ;;
  esac
}

# real_driver_check counts one test per driver: a driver's own unit tests are its suite, not ours.
real_driver_check() {
  local driver log rc=0
  for driver in $(hack/test-real-driver.sh --list); do
    log="${results}/real-driver-${driver}.log"
    if REAL_DRIVER_CHECK_ONLY=1 hack/test-real-driver.sh --driver "${driver}" check > "${log}" 2>&1; then
      grep -E 'adoption patch|done in|^(ok|FAIL)' "${log}" || true
      passed=$((passed + 1))
    else
      echo "last lines of ${log#"${REPO_ROOT}/"}:"
      tail -40 "${log}"
      failed=$((failed + 1))
      rc=1
    fi
  done
  return "${rc}"
}

# release_check counts as one test.
release_check() {
  if hack/verify-release.sh; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    return 1
  fi
}

stages=("$@")
[ "${#stages[@]}" -gt 0 ] || stages=(verify unit real-driver build upstream versions e2e release)
for name in "${stages[@]}"; do
  case "${name}" in
    build | e2e | upstream-e2e | bench | kind | release) [ "$(id -u)" -eq 0 ] || die "run as root: stage ${name} runs a real kubelet and containerd or installs packages" ;;
  esac
done
for name in "${stages[@]}"; do
  run_stage "${name}"
done

log "all stages: $( [ "${status}" -eq 0 ] && echo ok || echo FAILED ) in ${SECONDS}s"
echo "${passed} passed, ${failed} failed"
exit "${status}"
