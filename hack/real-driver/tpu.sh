# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034 # sourced by hack/test-real-driver.sh, which uses the settings

# kubernetes-sigs/dra-driver-google-tpu v0.2.0 (Go dependencies vendored, k8s.io/* v0.37.0-rc.0)
# and its own BATS suite (tests/, run as its Makefile runs it: make test-e2e). The suite makes its
# own kind cluster (tests/setup_suite.bash: make image-build, demo/clusters/kind/create-cluster.sh,
# whose DaemonSet makes /dev/accel0-3 on the worker; the driver installed by its Helm chart) and
# deletes it at the end: one cluster per run, made on the kubelet of the run (the config
# test/realdriver/tpu/cluster.yaml, through KIND_CLUSTER_CONFIG_PATH). What its recipe fetches
# from elsewhere is substituted without touching the suite (docs/real-driver.md lists it):
#   - docker build (a Go image, then a base image): a docker on PATH that runs the Dockerfile's
#     build stage (make PREFIX=... cmds) on this host, CGO off, and imports the command in
#     /usr/bin of an image with no base under the tag asked for; every other docker command is
#     the engine's own (hack/real-driver/docker);
#   - kind's node image: this project's, named by the config;
#   - the images of the fake-device DaemonSet (a Debian slim image for sh and nsenter, pause):
#     busybox-static from Debian's package, and this project's pause, mounted into the nodes'
#     preloaded images (they are pulled before the suite could load anything);
#   - busybox:latest of demo/specs/tpu-test.yaml (pull policy Always): busybox-static under a
#     local tag, with this host's printenv (Debian's busybox has no such applet), the copy's spec
#     file rewritten to it;
#   - helm (its Makefile runs helm v3.20.1 from the module proxy): helm v3.20.2, the nearest
#     patch the proxy serves, built from its module;
#   - bats-support and bats-assert (its README clones them into tests/test_helper): Debian's
#     packages, linked there; bats itself: Debian's package.

SNAPSHOT_DIR=dra-driver-google-tpu-v0.2.0
SNAPSHOT_SHA256=c297dae49ea418d4f06262f5d10f3c6560bb4d94c333c3c76e3ef371a99afb7b
ADOPTION_PATCH=examples/dra-driver-google-tpu/permanent-errors.patch
SPEC_PATCH=test/realdriver/tpu/permanent-test.patch
DRIVER_CLIENT_GO=v0.37.0-rc.0
HELM_MODULE=helm.sh/helm/v3/cmd/helm@v3.20.2
TPU_CLUSTER=dra-driver-google-tpu-cluster
BUSYBOX_IMAGE=dra-failfast.local/busybox:v1
TPU_BIN="${REAL_DIR}/path"
UNRUNNABLE=""

# driver_build VARIANT [suite] [unit]: the kubelet plugin as its Makefile builds it (make cmds),
# CGO off (it runs over no base); with suite, bats counts the suite's tests (it parses every
# file); with unit, the driver's vet and unit tests (its make test: go test ./...).
driver_build() {
  local variant=$1 dir
  shift
  dir=$(src_dir "${variant}")
  mkdir -p "${REAL_DIR}/bin/${variant}"
  (cd "${dir}" && GOWORK=off CGO_ENABLED=0 make --no-print-directory PREFIX="${REAL_DIR}/bin/${variant}" cmds) ||
    die "the ${variant} driver does not build"
  if [[ " $* " == *" suite "* ]]; then
    apt_install bats bats-support bats-assert
    link_bats_helpers "${variant}"
    log "${variant} suite: $(cd "${dir}" && bats --count tests/) tests"
  fi
  if [[ " $* " == *" unit "* ]]; then
    (cd "${dir}" && GOWORK=off go vet ./... && GOWORK=off go test -count=1 ./...) ||
      die "the ${variant} driver's unit tests fail"
  fi
}

# link_bats_helpers VARIANT: Debian's bats-support and bats-assert where the suite loads them.
link_bats_helpers() {
  local helpers
  helpers="$(src_dir "$1")/tests/test_helper"
  mkdir -p "${helpers}"
  ln -sfn /usr/lib/bats/bats-support "${helpers}/bats-support"
  ln -sfn /usr/lib/bats/bats-assert "${helpers}/bats-assert"
  if [ ! -f "${helpers}/bats-support/load.bash" ] || [ ! -f "${helpers}/bats-assert/load.bash" ]; then
    die "Debian's bats-support or bats-assert has no load.bash under /usr/lib/bats"
  fi
}

# recipe_images: the images the suite's create-kind-cluster.sh names, read from it (a slim shell
# image for the DaemonSet's init container, pause for its container).
recipe_images() { sed -n 's/^ *image: *//p' "$(src_dir unmodified)/demo/clusters/kind/scripts/create-kind-cluster.sh"; }

driver_images() {
  rm -rf "${REAL_DIR}/images" && mkdir -p "${REAL_DIR}/images" "${TPU_BIN}"
  go build -o "${OUTPUT_DIR}/bin/" ./hack/imagepack
  CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${REAL_DIR}/bin/" ./cmd/test-workload
  # The fake-device DaemonSet's images, by the names it asks for.
  local image
  for image in $(recipe_images); do
    case "${image##*/}" in
      pause:*) "${OUTPUT_DIR}/bin/imagepack" --binary "${REAL_DIR}/bin/test-workload" --name "${image}" \
        --entrypoint /test-workload,--mode=pause --output "${REAL_DIR}/images/recipe-pause.tar" ;;
      *) pack_busybox "${image}" "${REAL_DIR}/images/recipe-shell.tar" ;;
    esac
  done
  [ "$(find "${REAL_DIR}/images" -name 'recipe-*.tar' | wc -l)" -eq 2 ] ||
    die "create-kind-cluster.sh names images $(recipe_images | tr '\n' ' '): want a shell image and pause"
  pack_busybox "${BUSYBOX_IMAGE}" "${REAL_DIR}/images/busybox.tar" printenv
  # The demo spec of each copy with that busybox (busybox:latest would be pulled, pull policy
  # Always).
  local variant spec
  for variant in "${VARIANTS[@]}"; do
    spec="$(src_dir "${variant}")/demo/specs/tpu-test.yaml"
    sed -i "s#image: busybox:latest#image: ${BUSYBOX_IMAGE}#" "${spec}"
    ! grep -n 'image:' "${spec}" | grep -v "${BUSYBOX_IMAGE}" || die "${spec##*/} names an image this test does not substitute"
  done
  # helm, bats, and the docker that builds the driver's image here.
  [ -x "${REAL_DIR}/../bin/helm" ] ||
    (cd "${REAL_DIR}" && GOWORK=off GOFLAGS=-mod=mod GOBIN="${REAL_DIR}/../bin" go install "${HELM_MODULE}") ||
    die "cannot build ${HELM_MODULE}"
  ln -sfn "${REAL_DIR}/../bin/helm" "${TPU_BIN}/helm"
  install -m 0755 hack/real-driver/docker "${TPU_BIN}/docker"
  apt_install bats bats-support bats-assert busybox-static
  for variant in "${VARIANTS[@]}"; do link_bats_helpers "${variant}"; done
  log "images: $(recipe_images | tr '\n' ' ')(the fake-device DaemonSet's), ${BUSYBOX_IMAGE} (tpu-test.yaml's busybox:latest); $("${TPU_BIN}/helm" version --short)"
}

# driver_cluster: the node images; the suite makes the cluster. A cluster config per kubelet.
driver_cluster() {
  hack/kind/engine.sh start
  hack/kind-image.sh
  local config mode
  config=$(KIND_CONFIG=test/realdriver/tpu/cluster.yaml kind_cluster_config)
  for mode in fork-on fork-off stock; do
    mode_config "${config}" "${mode}" > "${REAL_DIR}/cluster-${mode}.yaml"
  done
}

# mode_config CONFIG MODE: CONFIG for the kubelet of MODE, with absolute mount paths (the suite runs
# kind from its own folder) and the images built here (driver_images) among the nodes' preloaded
# ones.
mode_config() {
  local config=$1 mode=$2 mounts="" tar
  for tar in "${REAL_DIR}"/images/*.tar; do
    mounts+="\n  - {hostPath: ${tar}, containerPath: /kind/images/$(basename "${tar}"), readOnly: true}"
  done
  sed -e "s#hostPath: deploy/#hostPath: ${REPO_ROOT}/deploy/#" -e "s#^  extraMounts:\$#&${mounts}#" "${config}" |
    case "${mode}" in
      fork-on) cat ;;
      fork-off) sed 's/DRAHandlePermanentDriverFailures=true/DRAHandlePermanentDriverFailures=false/' ;;
      stock) sed -e "s#${KIND_NODE_IMAGE}#${KIND_STOCK_NODE_IMAGE}#" -e '/name: feature-gates, value: DRAHandlePermanentDriverFailures=/d' ;;
    esac
}

driver_teardown() {
  if [ "$(hack/kind/engine.sh status)" != stopped ]; then
    kind_env
    ! kind get clusters 2> /dev/null | grep -qx "${TPU_CLUSTER}" || kind delete cluster --name "${TPU_CLUSTER}"
  fi
  hack/kind-down.sh
}

driver_cleanup() { :; }
driver_suite_begin() {
  kind_env
  ! kind get clusters 2> /dev/null | grep -q . || die "a kind cluster exists ($(kind get clusters | tr '\n' ' ')): the suite makes its own; two clusters do not fit 2 cores"
}
driver_suite_end() { :; }

# driver_suite VARIANT MODE: the suite as its Makefile runs it (make test-e2e: bats -o _artifacts
# --print-output-on-failure tests/), TAP on stdout; the run's cluster config and kubelet by the
# settings its scripts read.
driver_suite() {
  local variant=$1 mode=$2 real_docker
  real_docker=$(command -v docker)
  [ "${real_docker}" != "${TPU_BIN}/docker" ] || die "PATH already holds the stand-in docker"
  (
    cd "$(src_dir "${variant}")" &&
      PATH="${TPU_BIN}:${PATH}" REAL_DRIVER_DOCKER="${real_docker}" KUBECONFIG="${REAL_DIR}/kubeconfig" \
        KIND_CLUSTER_CONFIG_PATH="${REAL_DIR}/cluster-${mode}.yaml" KIND_IMAGE="${KIND_NODE_IMAGE}" \
        DRA_FAILFAST_EXPECT="$(expectation "${variant}" "${mode}")" \
        make --no-print-directory test-e2e
  ) > "${REAL_DIR}/reports/${variant}-${mode}.tap" 2> "${REAL_DIR}/reports/${variant}-${mode}.log"
}

driver_suite_summary() {
  local tap="${REAL_DIR}/reports/$1-$2.tap"
  echo "$(grep -cE '^ok ' "${tap}") ok, $(grep -cE '^not ok ' "${tap}") not ok of $(sed -n 's/^1\.\.//p' "${tap}" | head -1)"
}

driver_unrunnable() { :; }
