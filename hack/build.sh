#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds everything the demo, the e2e tests and the benchmarks use: the dra-failfast kubelet and
# the stock kubelet of KUBE_VERSION (hack/build-kubelet.sh), and the rest of the local cluster with the
# test DRA driver (hack/build-cluster-binaries.sh). Installs the Debian packages it needs.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || die "run as root: the build installs Debian packages, the cluster runs containers"
"${REPO_ROOT}/hack/build-kubelet.sh"
"${REPO_ROOT}/hack/build-kubelet.sh" --stock
"${REPO_ROOT}/hack/build-cluster-binaries.sh"
