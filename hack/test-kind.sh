#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make test-kind: the kind end-to-end suite. Brings up a three-node kind cluster mid-rollout
# (deploy/kind/mixed-cluster.yaml: the fork on the first worker, the stock kubelet on the second;
# images built with nothing from a registry), deploys the test driver and the example driver
# (deploy/test-driver, the chart deploy/helm/gpu-driver), runs test/kind's cluster tests (build
# tag kindcluster: the chart's webhook certificates, mixed fleet, systemd kubelet restart, rollout
# and rollback on a live node, device fault across nodes, webhook down and back, driver DaemonSet
# roll, node reboot; each checks that no pod failed wrongly and nothing stays prepared), then
# takes everything down and checks the host is as it was: a failed check fails the test.
# KIND_KEEP=1 leaves the cluster up; KIND_TEST_SKIP, a go test -skip pattern, leaves tests out
# (make test leaves out the two slowest and the webhook load measurement, see hack/test.sh). The
# tests get helm (HELM, built at HELM_VERSION) and cert-manager's definitions (CERT_MANAGER_CRDS).
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

start=$(date +%s)
# The fleet mid-rollout: the fork on the first worker, the stock kubelet on the second.
export KIND_CONFIG=deploy/kind/mixed-cluster.yaml
# Chained with &&: set -e does not apply inside a function called as `run_tests || ...`.
run_tests() {
  hack/kind-up.sh &&
    hack/kind-deploy-driver.sh test-driver gpu-driver &&
    kind_env &&
    HELM=$(helm_bin) && CERT_MANAGER_CRDS=$(cert_manager_crds) && export HELM CERT_MANAGER_CRDS &&
    go test -tags kindcluster -count=1 -timeout 20m -v -skip "${KIND_TEST_SKIP:-^$}" ./test/kind
}
rc=0
run_tests || rc=$?
# The teardown is part of the test: it fails when anything of the engine is left on the host.
if [ "${KIND_KEEP:-}" != 1 ]; then
  hack/kind-down.sh || rc=1
fi
[ "${rc}" -eq 0 ] || die "test-kind failed after $(($(date +%s) - start))s"
log "test-kind passed in $(($(date +%s) - start))s"
