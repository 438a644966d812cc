#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make test-kind: the kind smoke test. Brings the three-node kind cluster up (images built with
# nothing from a registry), deploys the test driver and the example driver (deploy/test-driver,
# deploy/gpu-driver), runs test/kind's cluster tests (build tag kindcluster: a healthy and a
# permanently failing pod on each worker; the example driver's webhook denial and a broken GPU
# across nodes; nothing left prepared), then takes everything down and checks the host is as it
# was. KIND_KEEP=1 leaves the cluster up.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

start=$(date +%s)
[ "${KIND_KEEP:-}" = 1 ] || trap 'hack/kind-down.sh' EXIT
hack/kind-up.sh
hack/kind-deploy-driver.sh test-driver gpu-driver
kind_env
go test -tags kindcluster -count=1 -v ./test/kind -run 'TestWorkerPods|TestExampleDriver|TestDriverPolicyInEffect'
log "test-kind passed in $(($(date +%s) - start))s"
