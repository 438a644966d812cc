#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make bench: the fork against the stock kubelet (KUBE_VERSION) on a local cluster (cmd/dra-failfast-bench).
# BENCH_MODE=full (default, about 70 minutes), smoke (a few minutes; make test runs it), latency (the
# healthy path and the raised-QPS storm only, four repetitions: the goals one run cannot settle), healthy
# (the healthy path only, ten repetitions, about 50 minutes: its 1.02 ratio round by round) or failing
# (time to Failed and the raised-QPS storm on the fork alone, three repetitions; make test-series runs it
# with the fork's kubelet and with the series' kubelet as -fork-kubelet). Builds what
# is missing first (hack/build.sh, as make demo does). Results: ${OUTPUT_DIR}/bench/<timestamp>/.
# Extra arguments go to dra-failfast-bench, e.g. -out DIR.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark runs a real kubelet and containerd (like make demo)"
"${REPO_ROOT}/hack/build.sh"
cd "${REPO_ROOT}" || exit 1
# KUBE_VERSION's kubelets (hack/lib.sh also points the local cluster at that version's control plane).
exec "${OUTPUT_DIR}/bin/dra-failfast-bench" -mode "${BENCH_MODE:-full}" \
  -fork-kubelet "${VERSION_BIN_DIR}/kubelet" -stock-kubelet "${VERSION_BIN_DIR}/kubelet-stock" "$@"
