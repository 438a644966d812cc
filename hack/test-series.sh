#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make test-series: the kubelet of the upstream-shaped series (upstream/patches/, built with
# nothing of this repository: hack/build-kubelet.sh --series) through this repository's own
# checks, as the fork goes through them (issue 36, deliverable 3):
#   1. the whole e2e_node suite (test/e2e_node) with _output/bin/kubelet-series as the node's
#      kubelet; the tests of what only the fork has (the node's driver failure policy) skip
#      themselves for a kubelet that is not the fork's, saying why, and the checks of the fork's
#      own message, bound, container states and downgrade reports apply to the fork alone
#      (forkKubelet in test/e2e_node; docs/upstream.md, "Fork and series: what differs");
#   2. the benchmark's failing path (BENCH_MODE=failing: time to Failed, the raised-QPS storm) on
#      the fork's kubelet, then on the series' kubelet, each on a fresh local cluster.
# Prints each goal of both benchmark runs side by side. Not in make test (about 25 minutes); run
# it after changing upstream/patches/ or the kubelet side. Needs root.
# Results: ${OUTPUT_DIR}/test/e2e-series.log, ${OUTPUT_DIR}/bench/series-<timestamp>/{fork,series}/.
# shellcheck source=hack/lib.sh
# On the series' own version (SERIES_KUBE_VERSION): lib.sh takes it, and refuses any other, for
# SERIES=upstream. Not exported: hack/build.sh builds the fork's kubelet of that version.
SERIES=upstream
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
unset SERIES
export KUBE_VERSION
cd "${REPO_ROOT}" || exit 1

[ "$(id -u)" -eq 0 ] || die "run as root: the e2e tests run a real kubelet and containerd"
hack/build.sh
hack/build-kubelet.sh --series
rc=0
e2e_summary=$(e2e_suite_with "${VERSION_BIN_DIR}/kubelet-series" "${OUTPUT_DIR}/test/e2e-series.log") || rc=$?
echo "${e2e_summary}"

bench_dir="${OUTPUT_DIR}/bench/series-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "${bench_dir}"
for kubelet in fork series; do
  binary=${VERSION_BIN_DIR}/kubelet
  [ "${kubelet}" = fork ] || binary=${VERSION_BIN_DIR}/kubelet-series
  timed "benchmark, failing path, ${kubelet} kubelet" \
    "${OUTPUT_DIR}/bin/dra-failfast-bench" -mode failing -fork-kubelet "${binary}" -out "${bench_dir}/${kubelet}" \
    > "${bench_dir}/${kubelet}.log" 2>&1 || { rc=1; tail -20 "${bench_dir}/${kubelet}.log"; }
done
echo "goals of the failing path (fork | series):"
for kubelet in fork series; do
  grep -E '^\| (1 time to Failed|3b storm) ' "${bench_dir}/${kubelet}/report.md" | sed "s/^/${kubelet}: /" || rc=1
done
log "benchmark reports: ${bench_dir#"${REPO_ROOT}/"}/{fork,series}/report.md"
log "e2e_node suite with kubelet-series: $(grep -E '^[0-9]+ passed' <<<"${e2e_summary}") (skipped: the fork's own features)"
exit "${rc}"
