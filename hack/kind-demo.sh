#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make kind-demo: the demo on the three-node kind cluster. Brings the cluster up (hack/kind-up.sh),
# deploys the test driver (hack/kind-deploy-driver.sh), then runs the demo's steps there: a healthy
# pod Running, a pod whose driver answers Permanent Failed within seconds (1 prepare, 1 unprepare),
# a transient failure Running after a retry, invalid config denied at apply by the webhook, and a
# broken device on the first worker: the Deployment's pod fails once, the device is tainted, the
# replacement runs on a healthy device. Prints the same summary as make demo. The cluster stays up;
# make kind-down removes it.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

start=$(date +%s)
hack/kind-up.sh
hack/kind-deploy-driver.sh
kind_env
go build -o "${OUTPUT_DIR}/bin/" ./cmd/dra-failfast-demo
"${OUTPUT_DIR}/bin/dra-failfast-demo" --kind-kubeconfig "${KIND_KUBECONFIG}"
log "kind demo done in $(($(date +%s) - start))s; the cluster is still up (make kind-down removes it)"
