# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034 # sourced by hack/test-real-driver.sh, which uses the settings

# kubernetes-sigs/dra-example-driver v0.4.0 with its own Helm chart and its own e2e suite (test/e2e,
# Ginkgo), on a kind cluster we create (test/realdriver/example/cluster.yaml, one worker). The suite
# installs the chart itself (Helm SDK, one release per spec); the worker's kubelet is switched in
# place between runs; a cert-manager stand-in (test/realdriver/cert-standin) runs on the host.

SNAPSHOT_DIR=dra-example-driver-v0.4.0
SNAPSHOT_SHA256=189d6897f293b840b6b8bdba0f1787afa9c94edf79e7ebb04598483d1d92d5d2
ADOPTION_PATCH=examples/dra-example-driver/permanent-errors.patch
SPEC_PATCH=test/realdriver/example/permanent-spec.patch
# The driver's k8s.io/* version, which adopting the library must not move.
DRIVER_CLIENT_GO=v0.36.2
SHELL_IMAGE=dra-failfast.local/shell:v1
# Specs that cannot run on this project's Kubernetes version, with why (a -ginkgo.skip pattern and
# a reason, one per line, separated by " | ").
UNRUNNABLE="PodGroups | needs scheduling.k8s.io/v1alpha2 PodGroup, which Kubernetes 1.37 replaced with v1alpha3 (the suite targets 1.36)
native CPU resources | needs ResourceSlice nodeAllocatableResourceMappings (DRANodeAllocatableResources as in 1.36), a field Kubernetes 1.37 removed"

# driver_build VARIANT [suite] [unit]: the three commands (static, as its image has them); with
# suite, the e2e suite's test binary (the Helm SDK: minutes of compile); with unit, the driver's vet
# and unit tests.
driver_build() {
  local variant=$1 dir
  shift
  dir=$(src_dir "${variant}")
  mkdir -p "${REAL_DIR}/bin/${variant}"
  (cd "${dir}" && CGO_ENABLED=0 driver_go build -trimpath -ldflags "-s -w" -o "${REAL_DIR}/bin/${variant}/" ./cmd/...) ||
    die "the ${variant} driver does not build"
  if [[ " $* " == *" suite "* ]]; then
    (cd "${dir}" && driver_go test -c -tags e2e -o "${REAL_DIR}/bin/${variant}/e2e.test" ./test/e2e) ||
      die "the ${variant} driver's e2e suite does not build"
  fi
  if [[ " $* " == *" unit "* ]]; then
    (cd "${dir}" && driver_go vet ./cmd/... && driver_go test -count=1 ./cmd/... ./internal/... ./pkg/...) ||
      die "the ${variant} driver's unit tests fail"
  fi
}

# chart_image: the image the chart installs by default (image.repository and image.tag, or the
# chart's appVersion), so that the unmodified chart finds the image built here.
chart_image() {
  local chart repo tag
  chart="$(src_dir unmodified)/deployments/helm/dra-example-driver"
  repo=$(sed -n '/^image:/,/^[^ ]/s/^  repository: *//p' "${chart}/values.yaml")
  tag=$(sed -n '/^image:/,/^[^ ]/s/^  tag: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${chart}/values.yaml")
  [ -n "${tag}" ] || tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${chart}/Chart.yaml")
  if [ -z "${repo}" ] || [ -z "${tag}" ]; then
    die "no image.repository or tag in ${chart}"
  fi
  echo "${repo}:${tag}"
}

driver_images() {
  local variant layer image
  image=$(chart_image)
  mkdir -p "${REAL_DIR}/images"
  go build -o "${OUTPUT_DIR}/bin/" ./hack/imagepack
  # The driver: its three commands in /usr/bin, as its Dockerfile installs them, over no base.
  for variant in "${VARIANTS[@]}"; do
    layer="${REAL_DIR}/images/${variant}-layer"
    rm -rf "${layer}" && mkdir -p "${layer}/usr/bin"
    cp "${REAL_DIR}/bin/${variant}"/dra-example-* "${layer}/usr/bin/"
    tar --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "${layer}.tar" -C "${layer}" usr
    "${OUTPUT_DIR}/bin/imagepack" --binary "${REAL_DIR}/bin/${variant}/dra-example-kubeletplugin" --name "${image}" \
      --env PATH=/usr/bin --base-layer "${layer}.tar" --output "${REAL_DIR}/images/driver-${variant}.tar"
  done
  # The demo pods' shell: bash and sleep with the libraries they load, from this host.
  layer="${REAL_DIR}/images/shell-layer"
  host_layer "${layer}" /usr/bin/bash /usr/bin/sleep
  "${OUTPUT_DIR}/bin/imagepack" --binary /usr/bin/bash --name "${SHELL_IMAGE}" --env PATH=/usr/bin \
    --base-layer "${layer}.tar" --output "${REAL_DIR}/images/shell.tar"
  # The demo manifests with that image.
  rm -rf "${REAL_DIR}/manifests"
  cp -r "$(src_dir unmodified)/demo/examples" "${REAL_DIR}/manifests"
  grep -rl 'image: ubuntu:22.04' "${REAL_DIR}/manifests" | xargs sed -i "s#image: ubuntu:22.04#image: ${SHELL_IMAGE}#"
  ! grep -rn 'image:' "${REAL_DIR}/manifests" | grep -v "${SHELL_IMAGE}" ||
    die "a demo manifest names an image this test does not substitute"
  log "images: ${image} (driver, per copy), ${SHELL_IMAGE} (for the demo manifests' ubuntu:22.04)"
}

driver_cluster() {
  KIND_CONFIG=test/realdriver/example/cluster.yaml hack/kind-up.sh
  kind_env
  kind load image-archive "${REAL_DIR}/images/shell.tar" --name "${KIND_CLUSTER}" > /dev/null
}

driver_teardown() { hack/kind-down.sh; }

STANDIN_PID=
driver_cleanup() { [ -z "${STANDIN_PID}" ] || { kill "${STANDIN_PID}" 2> /dev/null; wait "${STANDIN_PID}" 2> /dev/null; STANDIN_PID=; }; }

driver_suite_begin() {
  kind_env
  go build -o "${REAL_DIR}/bin/" ./test/realdriver/cert-standin
  "${REAL_DIR}/bin/cert-standin" --kubeconfig "${KIND_KUBECONFIG}" > "${REAL_DIR}/cert-standin.log" 2>&1 &
  STANDIN_PID=$!
}

driver_suite_end() { driver_cleanup; }

# unrunnable_patterns: the Ginkgo patterns of UNRUNNABLE, joined by |.
unrunnable_patterns() {
  local patterns="" pattern
  while IFS='|' read -r pattern _; do
    patterns="${patterns:+${patterns}|}${pattern% }"
  done <<< "${UNRUNNABLE}"
  echo "${patterns}"
}

# driver_suite VARIANT MODE: the driver's own suite, unmodified but for the demo manifests' image;
# our specs (adopted copy) expect a Failed pod only where the feature is on.
driver_suite() {
  local variant=$1 mode=$2
  # A new copy's image goes into the cluster before its first run.
  if [ "${mode}" = "$([ "${variant}" = adopted ] && echo stock || echo fork-on)" ]; then
    kind load image-archive "${REAL_DIR}/images/driver-${variant}.tar" --name "${KIND_CLUSTER}" > /dev/null
  fi
  switch_kubelet "${mode}"
  (
    cd "$(src_dir "${variant}")/test/e2e" &&
      HELM_CHART_PATH="$(src_dir "${variant}")/deployments/helm/dra-example-driver" DRA_FAILFAST_EXPECT="$(expectation "${variant}" "${mode}")" \
        "${REAL_DIR}/bin/${variant}/e2e.test" -test.timeout 90m -ginkgo.timeout 90m -ginkgo.v \
        -ginkgo.skip "$(unrunnable_patterns)" -ginkgo.json-report "${REAL_DIR}/reports/${variant}-${mode}.json" \
        -demo-manifests-dir "${REAL_DIR}/manifests"
  ) > "${REAL_DIR}/reports/${variant}-${mode}.log" 2>&1
}

driver_suite_summary() { grep -E '^(Ran|FAIL|PASS|SUCCESS)' "${REAL_DIR}/reports/$1-$2.log" | tr '\n' ' '; }

# driver_unrunnable: the specs left out, once, focused, with the unmodified driver on the stock
# kubelet: they must fail there too (the report checks it), so that it is the cluster's Kubernetes
# version that cannot run them, not the fork.
driver_unrunnable() {
  local rc=0
  (
    cd "$(src_dir unmodified)/test/e2e" &&
      HELM_CHART_PATH="$(src_dir unmodified)/deployments/helm/dra-example-driver" \
        "${REAL_DIR}/bin/unmodified/e2e.test" -test.timeout 30m -ginkgo.timeout 30m -ginkgo.v \
        -ginkgo.focus "$(unrunnable_patterns)" -ginkgo.json-report "${REAL_DIR}/reports/unrunnable-stock.json" \
        -demo-manifests-dir "${REAL_DIR}/manifests"
  ) > "${REAL_DIR}/reports/unrunnable-stock.log" 2>&1 || rc=$?
  log "unrunnable specs on stock: exit ${rc} (they must fail)"
}
