#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds everything a local single-node cluster needs except the kubelet (hack/build-kubelet.sh
# builds _output/bin/kubelet and _output/bin/kubelet-stock):
#   - kube-apiserver, kube-controller-manager, kube-scheduler, kubectl: KUBE_VERSION's pristine
#     tree (hack/tree.sh), built as the stock kubelet is (go_build_kube: cgo, -trimpath, the release
#     tags), so that the two thirds of their packages the kubelet also imports come from the build
#     cache instead of a second cold compile (static builds shared nothing with it: 785 s of
#     make test's build stage from cold). The kind node images need them static: hack/kind-image.sh
#     builds its own;
#   - etcd: go.etcd.io/etcd/server/v3 at the version k8s.io/kubernetes pins, same module graph (static);
#   - containerd, containerd-shim-runc-v2, ctr: CONTAINERD_VERSION, installed with `go install`;
#   - local-cluster (cmd/local-cluster), dra-test-driver, dra-failfast-demo, dra-failfast-bench, dra-failfast-check,
#     upstream-e2e, test-workload (cmd/test-workload), imagepack (hack/imagepack);
#   - images: dra-failfast.local/{pause,workload}:v1 as OCI tarballs under _output/images;
#   - runc and the CNI plugins from Debian (apt-get) when missing.
# Everything is incremental: a second run takes seconds.
#
# Usage: hack/build-cluster-binaries.sh [--no-apt] [STEP...]
#   STEP: debs kube etcd containerd tools images (default: all, in this order)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"
cd "${REPO_ROOT}" || exit 1

# build_control_plane: KUBE_VERSION's control plane from its pristine tree into BIN_DIR.
build_control_plane() {
  with_tree_lock ensure_pristine
  log "building kube-apiserver kube-controller-manager kube-scheduler kubectl (${KUBE_VERSION}) from ${PRISTINE_TREE#"${REPO_ROOT}/"}"
  go_build_kube "${PRISTINE_TREE}" "$(stock_workspace)" "${KUBE_VERSION}" "${BIN_DIR}/" \
    ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubectl
}

# On another KUBE_VERSION than the default: that version's control plane into _output/bin/<version>;
# everything else is not tied to the Kubernetes version: built for the default and linked there.
if [ "${KUBE_VERSION}" != "${DEFAULT_KUBE_VERSION}" ]; then
  # The default's steps but kube: its control plane is not needed here.
  default_args=() default_steps=false want_kube=false
  for arg in "$@"; do
    case "${arg}" in
      -*) default_args+=("${arg}") ;;
      kube) want_kube=true ;;
      *) default_args+=("${arg}") default_steps=true ;;
    esac
  done
  if ! ${want_kube} && ! ${default_steps}; then # no step named: all of them
    want_kube=true default_steps=true default_args+=(debs etcd containerd tools images)
  fi
  if ${default_steps}; then
    KUBE_VERSION=${DEFAULT_KUBE_VERSION} "${BASH_SOURCE[0]}" "${default_args[@]}"
  fi
  ${want_kube} || exit 0
  mkdir -p "${BIN_DIR}"
  build_control_plane
  for binary in "${OUTPUT_DIR}/bin"/*; do
    name=$(basename "${binary}")
    case "${name}" in
      kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet*) continue ;;
    esac
    if [ ! -f "${binary}" ] || [ ! -x "${binary}" ]; then continue; fi
    ln -sfn "../${name}" "${BIN_DIR}/${name}"
  done
  log "control plane ${KUBE_VERSION} in ${BIN_DIR#"${REPO_ROOT}/"}, the rest linked to the default's"
  exit 0
fi

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.2.9}
BIN_DIR="${OUTPUT_DIR}/bin"
IMAGE_DIR="${OUTPUT_DIR}/images"
IMAGE_TAG=v1
ALL_STEPS=(debs kube etcd containerd tools images)
apt=true
steps=()
for arg in "$@"; do
  case "${arg}" in
    --no-apt) apt=false ;;
    debs | kube | etcd | containerd | tools | images) steps+=("${arg}") ;;
    -h | --help)
      sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument ${arg} (steps: ${ALL_STEPS[*]})" ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || steps=("${ALL_STEPS[@]}")
mkdir -p "${BIN_DIR}" "${IMAGE_DIR}"

install_debian_packages() {
  local missing=()
  [ -x /usr/sbin/runc ] || command -v runc >/dev/null 2>&1 || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
    missing+=(containernetworking-plugins)
  [ -x /usr/sbin/iptables ] || command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  [ -x /usr/sbin/ip ] || [ -x /usr/bin/ip ] || command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  [ ${#missing[@]} -eq 0 ] && return 0
  ${apt} || die "missing Debian packages: ${missing[*]} (rerun without --no-apt)"
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build_etcd() {
  log "building etcd ($(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3))"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "${BIN_DIR}/etcd" go.etcd.io/etcd/server/v3
}

build_containerd() {
  local stamp="${BIN_DIR}/.containerd-${CONTAINERD_VERSION}" b
  if [ -f "${stamp}" ]; then
    for b in containerd containerd-shim-runc-v2 ctr; do
      [ -x "${BIN_DIR}/${b}" ] || { rm -f "${stamp}"; break; }
    done
  fi
  if [ -f "${stamp}" ]; then
    log "containerd ${CONTAINERD_VERSION}: up to date"
    return 0
  fi
  log "building containerd containerd-shim-runc-v2 ctr (${CONTAINERD_VERSION})"
  rm -f "${BIN_DIR}"/.containerd-*
  local mod=github.com/containerd/containerd/v2/cmd
  # GOFLAGS may carry -mod settings that `go install pkg@version` rejects.
  CGO_ENABLED=0 GOBIN="${BIN_DIR}" GOFLAGS=-buildvcs=false go install -trimpath -ldflags="-s -w" \
    -tags "no_btrfs no_devmapper no_zfs" \
    "${mod}/containerd@${CONTAINERD_VERSION}" \
    "${mod}/containerd-shim-runc-v2@${CONTAINERD_VERSION}" \
    "${mod}/ctr@${CONTAINERD_VERSION}"
  touch "${stamp}"
}

# The tools and the example driver build in the patched tree's workspace with the kubelet's flags
# (fork_go, hack/tree.sh), reusing its compile; make test-extra's adoption stage builds the example
# driver as a driver author does, against the library fetched by tag.
build_tools() {
  prepare_fork_workspace
  log "building local-cluster imagepack dra-test-driver dra-failfast-demo dra-failfast-bench dra-failfast-check upstream-e2e test-workload gpu-driver"
  fork_go build -o "${BIN_DIR}/" ./cmd/local-cluster ./hack/imagepack ./cmd/dra-test-driver ./cmd/dra-failfast-demo \
    ./cmd/dra-failfast-bench ./cmd/dra-failfast-check ./cmd/upstream-e2e
  # The workload runs inside containers: static, no cgo.
  CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${BIN_DIR}/test-workload" ./cmd/test-workload
  # The example driver, from its own module (the e2e tests run it).
  (cd "${REPO_ROOT}/${EXAMPLE_MODULE}" && fork_go build -o "${BIN_DIR}/gpu-driver" .)
}

build_images() {
  # pause: the sandbox image containerd is configured with; workload: what test pods run.
  "${BIN_DIR}/imagepack" --binary "${BIN_DIR}/test-workload" --name "dra-failfast.local/pause:${IMAGE_TAG}" \
    --entrypoint /test-workload,--mode=pause --output "${IMAGE_DIR}/pause.tar"
  "${BIN_DIR}/imagepack" --binary "${BIN_DIR}/test-workload" --name "dra-failfast.local/workload:${IMAGE_TAG}" \
    --entrypoint /test-workload --output "${IMAGE_DIR}/workload.tar"
}

total_start=$(date +%s)
for step in "${steps[@]}"; do
  case "${step}" in
    debs) install_debian_packages ;;
    kube) timed "kube binaries" build_control_plane ;;
    etcd) timed "etcd" build_etcd ;;
    containerd) timed "containerd" build_containerd ;;
    tools) timed "tools" build_tools ;;
    images) timed "images" build_images ;;
  esac
done
log "steps done (${steps[*]}), output in ${BIN_DIR#"${REPO_ROOT}/"}: $(($(date +%s) - total_start))s"
if [ ! -x "${BIN_DIR}/kubelet" ] || [ ! -x "${BIN_DIR}/kubelet-stock" ]; then
  log "note: the kubelets come from hack/build-kubelet.sh (_output/bin/kubelet) and hack/build-kubelet.sh --stock (_output/bin/kubelet-stock)"
fi
