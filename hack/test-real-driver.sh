#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make test-real-driver: a DRA driver nobody here wrote, kubernetes-sigs/dra-example-driver v0.4.0
# (../shared/third_party, checked by its sha256), with its own Helm chart and its own e2e suite
# (test/e2e, Ginkgo), on a kind cluster of this project's nodes (test/realdriver/cluster.yaml).
#   check    unpack the snapshot twice under _output/real-driver (never into the repository): as it
#            is, and with the adoption patch (examples/dra-example-driver/permanent-errors.patch,
#            the library taken from this checkout by a replace) plus our Ginkgo specs
#            (test/realdriver/permanent-spec.patch); build both drivers and suites; the driver's
#            unit tests on the adopted copy. The cheap part make test runs.
#   images   the driver's image under the name its chart asks for, one per copy; a shell image for
#            the demo pods; the demo manifests with that image.
#   cluster  the kind cluster (hack/kind-up.sh with test/realdriver/cluster.yaml).
#   suite    the driver's suite, per copy, on each kubelet: the workers switched in place between
#            the fork with the gate on (fork-on), the fork with the gate off (fork-off) and the stock
#            kubelet (stock); a cert-manager stand-in (test/realdriver/cert-standin) on the host.
#   report   docs/real-driver.md from the runs' Ginkgo JSON reports (REAL_DRIVER_REPORT to write
#            elsewhere); fails when a spec fails that is not named below, or when a spec's result
#            differs between kubelets where it must not.
# Default: all five, then the cluster is taken down (KIND_KEEP=1 keeps it).
# Substitutions for what these machines cannot fetch: docs/real-driver.md lists them.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

SNAPSHOT="${REPO_ROOT}/../shared/third_party/dra-example-driver-v0.4.0.tar.gz"
SNAPSHOT_SHA256=189d6897f293b840b6b8bdba0f1787afa9c94edf79e7ebb04598483d1d92d5d2
SNAPSHOT_DIR=dra-example-driver-v0.4.0
ADOPTION_PATCH=examples/dra-example-driver/permanent-errors.patch
SPEC_PATCH=test/realdriver/permanent-spec.patch
REAL_DIR="${OUTPUT_DIR}/real-driver"
SHELL_IMAGE=dra-failfast.local/shell:v1
VARIANTS=(unmodified adopted)
# Specs that cannot run on this project's Kubernetes version, with why (a -ginkgo.skip pattern and
# a reason, one per line, separated by " | ").
UNRUNNABLE="PodGroups | needs scheduling.k8s.io/v1alpha2 PodGroup, which Kubernetes 1.37 replaced with v1alpha3 (the suite targets 1.36)
native CPU resources | needs ResourceSlice nodeAllocatableResourceMappings (DRANodeAllocatableResources as in 1.36), a field Kubernetes 1.37 removed"

# driver_go: the go command for the driver's module, outside this repository's workspace.
driver_go() { GOWORK=off GOFLAGS=-mod=mod go "$@"; }

ALL_STAGES=(check images cluster suite report)
stages=()
for arg in "$@"; do
  case "${arg}" in
    check | images | cluster | suite | report) stages+=("${arg}") ;;
    -h | --help)
      sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown stage ${arg} (stages: ${ALL_STAGES[*]})" ;;
  esac
done
[ ${#stages[@]} -gt 0 ] || stages=("${ALL_STAGES[@]}")

src_dir() { echo "${REAL_DIR}/$1/${SNAPSHOT_DIR}"; }

# prepare_source VARIANT: a fresh copy of the snapshot; adopted: with both patches applied and the
# library from this checkout.
prepare_source() {
  local variant=$1 dir
  dir="${REAL_DIR}/${variant}"
  rm -rf "${dir}" && mkdir -p "${dir}"
  tar -xzf "${SNAPSHOT}" -C "${dir}"
  [ "${variant}" = adopted ] || return 0
  (
    cd "$(src_dir "${variant}")" &&
      patch -p1 --no-backup-if-mismatch --quiet < "${REPO_ROOT}/${ADOPTION_PATCH}" &&
      patch -p1 --no-backup-if-mismatch --quiet < "${REPO_ROOT}/${SPEC_PATCH}" &&
      driver_go mod edit -replace "${MODULE_PREFIX}/pkg/failfastplugin=${REPO_ROOT}/pkg/failfastplugin" \
        -replace "${MODULE_PREFIX}/api=${REPO_ROOT}/api" &&
      driver_go mod tidy
  ) || die "${ADOPTION_PATCH} or ${SPEC_PATCH} does not apply to ${SNAPSHOT_DIR}, or its module does not resolve"
  # The library must not move the driver's k8s.io/* (v0.36.2): a v0.36 driver stays on v0.36.
  local kube
  kube=$(cd "$(src_dir adopted)" && driver_go list -m -f '{{.Version}}' k8s.io/client-go)
  [ "${kube}" = v0.36.2 ] || die "adopting the library moved the driver's k8s.io/client-go from v0.36.2 to ${kube}"
}

# build VARIANT [suite] [unit]: the three commands (static, as its image has them); with suite,
# the e2e suite's test binary; with unit, the driver's vet and unit tests.
build() {
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

# stage_check: REAL_DRIVER_CHECK_ONLY=1 (make test) stops at what catches a break cheaply: both
# patches apply, the adopted driver builds, vets and passes its unit tests. The suites' test
# binaries (the Helm SDK: minutes of compile) and the unmodified copy are for the full run.
stage_check() {
  [ -f "${SNAPSHOT}" ] || die "${SNAPSHOT#"${REPO_ROOT}/"}: not found (../shared beside the repository)"
  echo "${SNAPSHOT_SHA256}  ${SNAPSHOT}" | sha256sum --check --quiet - ||
    die "${SNAPSHOT#"${REPO_ROOT}/"}: sha256 is not ${SNAPSHOT_SHA256}"
  log "adoption patch: $(changed_lines "${ADOPTION_PATCH}") changed lines (${ADOPTION_PATCH})"
  if [ "${REAL_DRIVER_CHECK_ONLY:-}" = 1 ]; then
    timed "adopted source" prepare_source adopted
    timed "adopted driver: build, vet, unit tests" build adopted unit
    return
  fi
  local variant
  for variant in "${VARIANTS[@]}"; do
    timed "${variant} source" prepare_source "${variant}"
  done
  timed "adopted driver: build, suite, vet, unit tests" build adopted suite unit
  timed "unmodified driver: build, suite" build unmodified suite
}

# changed_lines PATCH: the lines a unified diff adds or removes.
changed_lines() { grep -c '^[-+]\([^-+]\|$\)' "$1"; }

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

stage_images() {
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
  rm -rf "${layer}" && mkdir -p "${layer}"
  local file lib
  for file in /usr/bin/bash /usr/bin/sleep; do
    install -D "${file}" "${layer}${file}"
    for lib in $(ldd "${file}" | grep -o '/[^ ]*'); do
      [ -e "${layer}${lib}" ] || install -D "$(readlink -f "${lib}")" "${layer}${lib}"
    done
  done
  tar --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "${layer}.tar" -C "${layer}" .
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

stage_cluster() {
  KIND_CONFIG=test/realdriver/cluster.yaml hack/kind-up.sh
  kind_env
  kind load image-archive "${REAL_DIR}/images/shell.tar" --name "${KIND_CLUSTER}" > /dev/null
}

KUBEADM_FLAGS=/var/lib/kubelet/kubeadm-flags.env

# switch_kubelet MODE: every worker's kubelet becomes MODE (fork-on, fork-off, stock) as an
# operator rolls a node: the binary renamed over the running one, the gate in kubeadm-flags.env,
# systemctl restart; then each worker must be Ready with the wanted kubelet.
switch_kubelet() {
  local mode=$1 binary=kubelet worker want gate=false
  [ "${mode}" = stock ] && binary="kubelet-stock"
  [ "${mode}" = fork-on ] && gate=true
  for worker in $(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o name); do
    worker=${worker#node/}
    docker cp "${OUTPUT_DIR}/bin/${binary}" "${worker}:/usr/bin/kubelet.new" > /dev/null
    docker exec "${worker}" sh -c "mv /usr/bin/kubelet.new /usr/bin/kubelet &&
      sed -i 's/ *--feature-gates=DRAHandlePermanentDriverFailures=[a-z]*//' ${KUBEADM_FLAGS} &&
      { [ ${mode} = stock ] || sed -i 's/^KUBELET_KUBEADM_ARGS=\"/&--feature-gates=DRAHandlePermanentDriverFailures=${gate} /' ${KUBEADM_FLAGS}; } &&
      systemctl restart kubelet"
    want=$("${OUTPUT_DIR}/bin/${binary}" --version | awk '{print $2}')
    local deadline=$((SECONDS + 180))
    until [ "$(kubectl get node "${worker}" -o jsonpath='{.status.nodeInfo.kubeletVersion}')" = "${want}" ] &&
      kubectl wait --for=condition=Ready "node/${worker}" --timeout=5s > /dev/null 2>&1; do
      [ "${SECONDS}" -lt "${deadline}" ] || die "${worker}: not Ready with kubelet ${want} (${mode}) after 180s"
      sleep 2
    done
    log "${worker}: kubelet ${want}, $(docker exec "${worker}" grep -o 'DRAHandlePermanentDriverFailures=[a-z]*' "${KUBEADM_FLAGS}" || echo 'no gate flag') (${mode})"
  done
}

# run_suite VARIANT MODE: the driver's own suite, unmodified but for the demo manifests' image;
# our specs (adopted copy) expect a Failed pod only where the feature is on.
run_suite() {
  local variant=$1 mode=$2 expect=retry skip="" pattern rc=0 start=${SECONDS}
  [ "${variant}/${mode}" = adopted/fork-on ] && expect=failed
  while IFS='|' read -r pattern _; do
    skip="${skip:+${skip}|}${pattern% }"
  done <<< "${UNRUNNABLE}"
  mkdir -p "${REAL_DIR}/reports"
  (
    cd "$(src_dir "${variant}")/test/e2e" &&
      HELM_CHART_PATH="$(src_dir "${variant}")/deployments/helm/dra-example-driver" DRA_FAILFAST_EXPECT="${expect}" \
        "${REAL_DIR}/bin/${variant}/e2e.test" -test.timeout 90m -ginkgo.timeout 90m -ginkgo.v \
        -ginkgo.skip "${skip}" -ginkgo.json-report "${REAL_DIR}/reports/${variant}-${mode}.json" \
        -demo-manifests-dir "${REAL_DIR}/manifests"
  ) > "${REAL_DIR}/reports/${variant}-${mode}.log" 2>&1 || rc=$?
  log "suite ${variant} on ${mode}: exit ${rc} in $((SECONDS - start))s ($(grep -E '^(Ran|FAIL|PASS|SUCCESS)' "${REAL_DIR}/reports/${variant}-${mode}.log" | tr '\n' ' '))"
}

# run_unrunnable: the specs left out, once, focused, with the unmodified driver on the stock
# kubelet: they must fail there too (the report checks it), so that it is the cluster's Kubernetes
# version that cannot run them, not the fork.
run_unrunnable() {
  local focus="" pattern rc=0
  while IFS='|' read -r pattern _; do
    focus="${focus:+${focus}|}${pattern% }"
  done <<< "${UNRUNNABLE}"
  (
    cd "$(src_dir unmodified)/test/e2e" &&
      HELM_CHART_PATH="$(src_dir unmodified)/deployments/helm/dra-example-driver" \
        "${REAL_DIR}/bin/unmodified/e2e.test" -test.timeout 30m -ginkgo.timeout 30m -ginkgo.v \
        -ginkgo.focus "${focus}" -ginkgo.json-report "${REAL_DIR}/reports/unrunnable-stock.json" \
        -demo-manifests-dir "${REAL_DIR}/manifests"
  ) > "${REAL_DIR}/reports/unrunnable-stock.log" 2>&1 || rc=$?
  log "unrunnable specs on stock: exit ${rc} (they must fail)"
}

STANDIN_PID=
stop_standin() { [ -z "${STANDIN_PID}" ] || { kill "${STANDIN_PID}" 2> /dev/null; wait "${STANDIN_PID}" 2> /dev/null; STANDIN_PID=; }; }

stage_suite() {
  kind_env
  go build -o "${REAL_DIR}/bin/" ./test/realdriver/cert-standin
  "${REAL_DIR}/bin/cert-standin" --kubeconfig "${KIND_KUBECONFIG}" > "${REAL_DIR}/cert-standin.log" 2>&1 &
  STANDIN_PID=$!
  local variant mode modes
  rm -rf "${REAL_DIR}/reports"
  for variant in "${VARIANTS[@]}"; do
    kind load image-archive "${REAL_DIR}/images/driver-${variant}.tar" --name "${KIND_CLUSTER}" > /dev/null
    # Fewest switches: the cluster starts on fork-on, the first copy ends on stock.
    modes=(fork-on fork-off stock)
    [ "${variant}" = adopted ] && modes=(stock fork-off fork-on)
    for mode in "${modes[@]}"; do
      switch_kubelet "${mode}"
      run_suite "${variant}" "${mode}"
    done
    [ "${variant}" = unmodified ] && run_unrunnable
  done
  stop_standin
}

stage_report() {
  go run ./test/realdriver/report --reports "${REAL_DIR}/reports" --unrunnable "${UNRUNNABLE}" \
    --adoption-patch "${ADOPTION_PATCH}" --commit "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+dirty')" \
    --kube-version "${KUBE_VERSION}" --output "${REAL_DRIVER_REPORT:-docs/real-driver.md}"
}

full=false
[ ${#stages[@]} -eq ${#ALL_STAGES[@]} ] && full=true
start=${SECONDS}
# finish: whatever happened, the stand-in stops and (after a full run) the cluster goes; the
# teardown is part of the test, as in make test-kind.
finish() {
  local rc=$?
  stop_standin
  if ${full} && [ "${KIND_KEEP:-}" != 1 ]; then
    hack/kind-down.sh || rc=1
  fi
  [ "${rc}" -eq 0 ] || die "test-real-driver failed after $((SECONDS - start))s"
  log "test-real-driver (${stages[*]}) passed in $((SECONDS - start))s"
}
trap finish EXIT
for stage in "${stages[@]}"; do
  timed "real driver: ${stage}" "stage_${stage}"
done
