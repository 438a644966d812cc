#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Settings shared by the kind scripts (hack/kind-*.sh): one source for versions, names and paths.
# Sourced after hack/lib.sh.
# shellcheck disable=SC2034 # its variables are used by the scripts that source it

KIND_VERSION=$(cd "${REPO_ROOT}" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
# The CoreDNS and pause that the node images carry, built here: the versions kubeadm v1.37.2 deploys
# (cmd/kubeadm/app/constants). Every version's images carry them, packed under the tags that
# version's kubeadm asks for (v1.36.3: CoreDNS v1.14.2, v1.35.4: v1.13.1 and pause 3.10.1), as
# they carry the default's etcd: none of the three depends on the Kubernetes version.
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
# Shared by every Kubernetes version: kind, CoreDNS, flannel, the runtime wrapper (the Debian root file
# systems are in KIND_CACHE).
KIND_TOOLS_BIN="${KIND_DIR}/bin"
KIND_CACHE="${KIND_DIR}/cache"
# What a Kubernetes version has of its own: kubeadm, kube-proxy, kubectl, the control-plane images
# and the cluster config that names its node images. The default's at the top, another version's
# in a folder named after it.
KIND_BIN="${KIND_TOOLS_BIN}"
KIND_IMAGES="${KIND_DIR}/images"
if [ "${KUBE_VERSION}" != "${DEFAULT_KUBE_VERSION}" ]; then
  KIND_BIN+="/${KUBE_VERSION}"
  KIND_IMAGES+="/${KUBE_VERSION}"
fi
KIND_CLUSTER=dra-failfast
# The cluster make kind-up creates: every node on the fork, or (make test-kind) a fleet mid-rollout
# with a stock worker, deploy/kind/mixed-cluster.yaml. Relative to the repository root.
KIND_CONFIG=${KIND_CONFIG:-deploy/kind/cluster.yaml}
KIND_KUBECONFIG="${KIND_DIR}/kubeconfig"

# kind_env: use the project's engine, kind and KUBE_VERSION's kubectl, and the cluster's kubeconfig.
kind_env() {
  eval "$("${REPO_ROOT}/hack/kind/engine.sh" env)"
  export KUBECONFIG="${KIND_KUBECONFIG}"
  export PATH="${KIND_BIN}:${KIND_TOOLS_BIN}:${PATH}"
}

# kind_cluster_config: the path of the kind config to create the cluster from. KIND_CONFIG as it is
# on the default version; on another, a copy under KIND_BIN that names that version's node images
# and gives its control plane what control_plane_env (hack/lib.sh) says it needs to serve
# DeviceTaintRules (kind passes featureGates to every component, runtimeConfig to the API server).
kind_cluster_config() {
  if [ "${KUBE_VERSION}" = "${DEFAULT_KUBE_VERSION}" ]; then
    echo "${KIND_CONFIG}"
    return 0
  fi
  local out gates="" runtime_config="" setting args_form=(cat)
  # kind configures a node older than 1.36 with kubeadm's v1beta3, whose kubeletExtraArgs is a map
  # (name: value), not v1beta4's list ({name, value}) that deploy/kind's per-node patches use:
  # there each list entry becomes a map entry. deploy/kind uses the list form for nothing else.
  if [ "$(cut -d. -f2 <<< "${KUBE_VERSION}")" -lt 36 ]; then
    args_form=(sed -E 's/^( *)- \{name: ([^,}]+), value: ([^}]*)\}$/\1  \2: "\3"/')
  fi
  out="${KIND_BIN}/$(basename "${KIND_CONFIG}")"
  while IFS= read -r setting; do
    case "${setting}" in
      LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES=*) gates=${setting#*=} ;;
      LOCAL_CLUSTER_RUNTIME_CONFIG=*) runtime_config=${setting#*=} ;;
    esac
  done < <(control_plane_env "${KUBE_VERSION}")
  mkdir -p "${KIND_BIN}"
  {
    sed -e "s#dra-failfast/kind-node:${DEFAULT_KUBE_VERSION}-dra-failfast.${FORK_REVISION}#${KIND_NODE_IMAGE}#" \
      -e "s#dra-failfast/kind-node:${DEFAULT_KUBE_VERSION}-stock#${KIND_STOCK_NODE_IMAGE}#" "${REPO_ROOT}/${KIND_CONFIG}" |
      "${args_form[@]}"
    if [ -n "${gates}" ]; then
      echo "# ${KUBE_VERSION}: what its control plane needs to serve DeviceTaintRules (hack/lib.sh, control_plane_env)."
      echo "featureGates:"
      tr ',' '\n' <<< "${gates}" | sed 's/^\(.*\)=\(.*\)$/  \1: \2/'
    fi
    if [ -n "${runtime_config}" ]; then
      echo "runtimeConfig:"
      tr ',' '\n' <<< "${runtime_config}" | sed 's/^\(.*\)=\(.*\)$/  "\1": "\2"/'
    fi
  } > "${out}.tmp"
  grep -q "${KIND_NODE_IMAGE}" "${out}.tmp" || die "${KIND_CONFIG} names no node image dra-failfast/kind-node:${DEFAULT_KUBE_VERSION}-dra-failfast.${FORK_REVISION}"
  mv "${out}.tmp" "${out}"
  echo "${out}"
}
