#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make kind-image: a kind node image with the dra-failfast kubelet, dra-failfast/kind-node:FORK_VERSION
# (the name deploy/kind/cluster.yaml uses). Builds the kubelet for linux/GOARCH first, then, when a
# container engine (docker or podman, or CONTAINER_ENGINE) is installed, builds the image from
# deploy/kind/Dockerfile; without one, prints the exact commands to run on a machine that has one.
# Environment: KIND_NODE_IMAGE (the kindest/node v1.37.x base, see the Dockerfile).
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

image="dra-failfast/kind-node:${FORK_VERSION}"
context="${OUTPUT_DIR}/kind-image"
engine=${CONTAINER_ENGINE:-}
if [ -z "${engine}" ]; then
  for candidate in docker podman; do
    if command -v "${candidate}" > /dev/null; then
      engine=${candidate}
      break
    fi
  done
fi
base_arg=()
[ -z "${KIND_NODE_IMAGE:-}" ] || base_arg=(--build-arg "KIND_NODE_IMAGE=${KIND_NODE_IMAGE}")

hack/build-kubelet.sh
rm -rf "${context}"
mkdir -p "${context}"
cp deploy/kind/Dockerfile "${OUTPUT_DIR}/bin/kubelet" "${context}/"
log "build context: ${context#"${REPO_ROOT}/"} (Dockerfile, kubelet $("${context}/kubelet" --version))"

build=("${engine:-docker}" build "${base_arg[@]}" -t "${image}" "${context#"${REPO_ROOT}/"}")
if [ -z "${engine}" ]; then
  log "no container engine here (docker, podman); on a machine with one, from this repository:"
  echo "  ${build[*]}"
  echo "  kind create cluster --config deploy/kind/cluster.yaml"
  echo "or copy ${context#"${REPO_ROOT}/"} there and build it as above. docs/kind.md has the rest."
  exit 0
fi
"${build[@]}"
log "built ${image}; next: kind create cluster --config deploy/kind/cluster.yaml"
