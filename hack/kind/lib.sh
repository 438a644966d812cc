#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Settings shared by the kind scripts (hack/kind-*.sh): one source for versions, names and paths.
# Sourced after hack/lib.sh.
# shellcheck disable=SC2034 # its variables are used by the scripts that source it

KIND_VERSION=$(cd "${REPO_ROOT}" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
# The versions kubeadm v1.37.2 deploys (the same as v1.37.1) (cmd/kubeadm/app/constants): CoreDNS and pause by tag.
COREDNS_VERSION=v1.14.6
PAUSE_VERSION=3.10.2
# Pod network: flannel (host-gw: every node is on kind's one bridge network), and its CNI plugin
# from the last containernetworking/plugins release that carries it, v0.9.1 (flannel-io/cni-plugin is not
# served by the module proxy).
FLANNEL_VERSION=v0.28.10
FLANNEL_CNI_VERSION=v0.9.1
KIND_IMAGE_REPOSITORY=dra-failfast.local
KIND_BASE_IMAGE=dra-failfast/kind-base:bookworm
KIND_NODE_IMAGE="dra-failfast/kind-node:${FORK_VERSION}"
KIND_STOCK_NODE_IMAGE="dra-failfast/kind-node:${KUBE_VERSION}-stock"
KIND_DIR="${OUTPUT_DIR}/kind"
KIND_BIN="${KIND_DIR}/bin"
KIND_IMAGES="${KIND_DIR}/images"
KIND_CACHE="${KIND_DIR}/cache"
KIND_CLUSTER=dra-failfast
# The cluster make kind-up creates: every node on the fork, or (make test-kind) a fleet mid-rollout
# with a stock worker, deploy/kind/mixed-cluster.yaml. Relative to the repository root.
KIND_CONFIG=${KIND_CONFIG:-deploy/kind/cluster.yaml}
KIND_KUBECONFIG="${KIND_DIR}/kubeconfig"

# kind_env: use the project's engine, kind and kubectl, and the cluster's kubeconfig.
kind_env() {
  eval "$("${REPO_ROOT}/hack/kind/engine.sh" env)"
  export KUBECONFIG="${KIND_KUBECONFIG}"
  export PATH="${KIND_BIN}:${PATH}"
}
