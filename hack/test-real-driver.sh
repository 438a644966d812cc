#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make test-real-driver [DRIVER=NAME]: DRA drivers nobody here wrote, each built from its snapshot
# (../shared/third_party, checked by its sha256) and run with its own suite, unmodified, on kind
# clusters of this project's nodes: stock kubelet, fork with DRAHandlePermanentDriverFailures off,
# fork with it on; then again with this project's adoption patch (the driver marks the errors no
# retry can cure as permanent) and our tests in the suite's own style.
#   hack/test-real-driver.sh [--driver NAME]... [STAGE...]     (--list: the drivers' names)
# Drivers (hack/real-driver/NAME.sh says what each one needs; default: every one, in this order):
#   example  kubernetes-sigs/dra-example-driver v0.4.0: Ginkgo suite against a cluster we create
#   tpu      kubernetes-sigs/dra-driver-google-tpu v0.2.0: BATS suite that creates its own cluster
# Stages (default: all five; then the cluster is taken down, KIND_KEEP=1 keeps it):
#   check    unpack the snapshot twice under _output/real-driver/NAME (never into the repository):
#            as it is (unmodified) and with the adoption patch, our tests and this checkout's
#            library (adopted); build both, the driver's vet and unit tests on the adopted copy.
#            REAL_DRIVER_CHECK_ONLY=1 (make test) stops at the adopted copy: the cheap part.
#   images   what the driver's recipe would fetch, built here (docs/real-driver.md lists it).
#   cluster  the kind cluster, for a driver whose suite needs one made for it.
#   suite    the driver's suite, per copy, on each kubelet (REAL_DRIVER_RUNS="adopted/fork-on ...":
#            only those runs; the report then fails for the runs missing).
#   report   the driver's section of docs/real-driver.md (REAL_DRIVER_REPORT: another file) from
#            the runs' reports; fails when a test fails that is not named unrunnable, or when a
#            test's result differs between kubelets where it must not.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

ALL_DRIVERS=(example tpu)
ALL_STAGES=(check images cluster suite report)
VARIANTS=(unmodified adopted)
drivers=()
stages=()
while [ $# -gt 0 ]; do
  case "$1" in
    --driver)
      [[ " ${ALL_DRIVERS[*]} " == *" ${2:-} "* ]] || die "unknown driver '${2:-}' (drivers: ${ALL_DRIVERS[*]})"
      drivers+=("$2")
      shift
      ;;
    check | images | cluster | suite | report) stages+=("$1") ;;
    --list)
      echo "${ALL_DRIVERS[*]}"
      exit 0
      ;;
    -h | --help)
      sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument $1 (--driver NAME, stages: ${ALL_STAGES[*]})" ;;
  esac
  shift
done
[ ${#drivers[@]} -gt 0 ] || drivers=("${ALL_DRIVERS[@]}")
[ ${#stages[@]} -gt 0 ] || stages=("${ALL_STAGES[@]}")

# driver_go: the go command for a driver's module, outside this repository's workspace.
driver_go() { GOWORK=off GOFLAGS=-mod=mod go "$@"; }

# changed_lines PATCH: the lines a unified diff adds or removes.
changed_lines() { grep -c '^[-+]\([^-+]\|$\)' "$1"; }

src_dir() { echo "${REAL_DIR}/$1/${SNAPSHOT_DIR}"; }

# prepare_source VARIANT: a fresh copy of the snapshot, a git repository of one commit as a clone
# of the driver would be (its scripts ask git for the checkout's root); adopted: with the adoption
# patch and our tests applied, this checkout's library by a replace, the vendor tree (if the
# driver vendors) updated as its maintainers do it (go mod vendor).
prepare_source() {
  local variant=$1 dir src
  dir="${REAL_DIR}/${variant}"
  rm -rf "${dir}" && mkdir -p "${dir}"
  tar -xzf "${SNAPSHOT}" -C "${dir}"
  src=$(src_dir "${variant}")
  (cd "${src}" && git init -q && git add -A && git -c user.name=snapshot -c user.email=snapshot@invalid commit -qm "${SNAPSHOT_DIR}") ||
    die "${SNAPSHOT_DIR}: cannot make a git repository of it"
  [ "${variant}" = adopted ] || return 0
  (
    cd "${src}" &&
      patch -p1 --no-backup-if-mismatch --quiet < "${REPO_ROOT}/${ADOPTION_PATCH}" &&
      patch -p1 --no-backup-if-mismatch --quiet < "${REPO_ROOT}/${SPEC_PATCH}" &&
      go mod edit -replace "${MODULE_PREFIX}/pkg/failfastplugin=${REPO_ROOT}/pkg/failfastplugin" \
        -replace "${MODULE_PREFIX}/api=${REPO_ROOT}/api"
  ) || die "${ADOPTION_PATCH} or ${SPEC_PATCH} does not apply to ${SNAPSHOT_DIR}"
  if [ -d "${src}/vendor" ]; then
    vendor_library "${src}"
  else
    (cd "${src}" && driver_go mod tidy) || die "${SNAPSHOT_DIR} with the library: go mod tidy fails"
  fi
  # The library must not move the driver's k8s.io/*: the library requires v0.36.0 and nothing newer.
  local kube
  kube=$(cd "${src}" && GOWORK=off go list -m -f '{{.Version}}' k8s.io/client-go)
  [ "${kube}" = "${DRIVER_CLIENT_GO}" ] || die "adopting the library moved ${SNAPSHOT_DIR}'s k8s.io/client-go from ${DRIVER_CLIENT_GO} to ${kube}"
}

# vendor_library DIR: the library's two modules added to DIR's vendor tree as go mod vendor adds
# them (the packages the library needs, their files but tests and testdata, the repository's
# LICENSE at each module's root, vendor/modules.txt's entries), and go.mod's requirements. Done by
# hand because go mod vendor, which its maintainers run, resolves the driver's whole graph, and a
# driver on a pre-release k8s.io/* may require a version the module proxy does not serve
# (dra-driver-google-tpu v0.2.0: k8s.io/kubernetes v1.37.0-rc.0). The build that follows runs
# -mod=vendor, which checks vendor/modules.txt against go.mod.
vendor_library() {
  local dir=$1 module package file version=v0.1.0 goversion
  local -a packages
  mapfile -t packages < <(go list -deps ./pkg/failfastplugin | grep "^${MODULE_PREFIX}/")
  [ ${#packages[@]} -gt 0 ] || die "go list found no package of the library"
  (cd "${dir}" && go mod edit -require "${MODULE_PREFIX}/pkg/failfastplugin@${version}" -require "${MODULE_PREFIX}/api@${version}") ||
    die "${dir##*/}: go mod edit"
  for module in api pkg/failfastplugin; do
    goversion=$(sed -n 's/^go //p' "${REPO_ROOT}/${module}/go.mod")
    printf '# %s %s => %s\n## explicit; go %s\n' "${MODULE_PREFIX}/${module}" "${version}" "${REPO_ROOT}/${module}" "${goversion}" >> "${dir}/vendor/modules.txt"
    install -D -m 0644 "${REPO_ROOT}/LICENSE" "${dir}/vendor/${MODULE_PREFIX}/${module}/LICENSE"
    for package in "${packages[@]}"; do
      [[ "${package}/" == "${MODULE_PREFIX}/${module}/"* ]] || continue
      echo "${package}" >> "${dir}/vendor/modules.txt"
      for file in "${REPO_ROOT}/${package#"${MODULE_PREFIX}/"}"/*.go; do
        [[ "${file}" == *_test.go ]] || install -D -m 0644 "${file}" "${dir}/vendor/${package}/${file##*/}"
      done
    done
  done
  # go mod vendor lists the replacements once more at the end.
  printf '# %s => %s\n' "${MODULE_PREFIX}/api" "${REPO_ROOT}/api" "${MODULE_PREFIX}/pkg/failfastplugin" "${REPO_ROOT}/pkg/failfastplugin" >> "${dir}/vendor/modules.txt"
  (cd "${dir}" && GOWORK=off go list -mod=vendor ./... > /dev/null) || die "${dir##*/}: the vendor tree with the library is not consistent with go.mod"
}

stage_check() {
  [ -f "${SNAPSHOT}" ] || die "${SNAPSHOT#"${REPO_ROOT}/"}: not found (../shared beside the repository)"
  echo "${SNAPSHOT_SHA256}  ${SNAPSHOT}" | sha256sum --check --quiet - ||
    die "${SNAPSHOT#"${REPO_ROOT}/"}: sha256 is not ${SNAPSHOT_SHA256}"
  log "${DRIVER}: adoption patch $(changed_lines "${ADOPTION_PATCH}") changed lines (${ADOPTION_PATCH}), our tests ${SPEC_PATCH}"
  if [ "${REAL_DRIVER_CHECK_ONLY:-}" = 1 ]; then
    timed "${DRIVER}: adopted source" prepare_source adopted
    timed "${DRIVER}: adopted driver: build, vet, unit tests" driver_build adopted unit
    return
  fi
  local variant
  for variant in "${VARIANTS[@]}"; do
    timed "${DRIVER}: ${variant} source" prepare_source "${variant}"
  done
  timed "${DRIVER}: adopted driver: build, suite, vet, unit tests" driver_build adopted suite unit
  timed "${DRIVER}: unmodified driver: build, suite" driver_build unmodified suite
}

stage_images() { driver_images; }
stage_cluster() { driver_cluster; }

# expectation VARIANT MODE: what our tests in the adopted copy expect (DRA_FAILFAST_EXPECT).
expectation() { if [ "$1/$2" = adopted/fork-on ]; then echo failed; else echo retry; fi; }

stage_suite() {
  local variant mode modes
  rm -rf "${REAL_DIR}/reports" && mkdir -p "${REAL_DIR}/reports"
  driver_suite_begin
  for variant in "${VARIANTS[@]}"; do
    # Fewest kubelet switches where the suite keeps one cluster: the cluster starts on fork-on,
    # the first copy ends on stock.
    modes=(fork-on fork-off stock)
    [ "${variant}" = adopted ] && modes=(stock fork-off fork-on)
    for mode in "${modes[@]}"; do
      [ -z "${REAL_DRIVER_RUNS:-}" ] || [[ " ${REAL_DRIVER_RUNS} " == *" ${variant}/${mode} "* ]] || continue
      local suite_start=${SECONDS} rc=0
      driver_suite "${variant}" "${mode}" || rc=$?
      echo "$((SECONDS - suite_start))" > "${REAL_DIR}/reports/${variant}-${mode}.seconds"
      log "${DRIVER}: suite ${variant} on ${mode}: exit ${rc} in $((SECONDS - suite_start))s ($(driver_suite_summary "${variant}" "${mode}"))"
    done
    [ "${variant}" = unmodified ] && [ -n "${UNRUNNABLE}" ] && driver_unrunnable
  done
  driver_suite_end
}

stage_report() {
  go run ./test/realdriver/report --driver "${DRIVER}" --reports "${REAL_DIR}/reports" --unrunnable "${UNRUNNABLE}" \
    --adoption-patch "${ADOPTION_PATCH}" --commit "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+dirty')" \
    --kube-version "${KUBE_VERSION}" --output "${REAL_DRIVER_REPORT:-docs/real-driver.md}"
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

# host_layer LAYER PROGRAM...: LAYER.tar, an image layer of this host's PROGRAMs (at their paths)
# and the libraries they load.
host_layer() {
  local layer=$1 program lib
  shift
  rm -rf "${layer}" && mkdir -p "${layer}"
  for program in "$@"; do
    program=$(command -v "${program}") || die "${program}: not on this host"
    install -D "${program}" "${layer}${program}"
    for lib in $(ldd "${program}" | grep -o '/[^ ]*'); do
      [ -e "${layer}${lib}" ] || install -D "$(readlink -f "${lib}")" "${layer}${lib}"
    done
  done
  tar --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "${layer}.tar" -C "${layer}" .
  rm -rf "${layer}"
}

# pack_busybox NAME OUTPUT [PROGRAM...]: an image of Debian's busybox-static (its applets linked in
# /bin), for the shell images a driver's recipe pulls; PROGRAMs (this host's, with the libraries
# they load) for what Debian's busybox leaves out that upstream's has (printenv).
pack_busybox() {
  local name=$1 output=$2 links
  shift 2
  [ -x /bin/busybox ] || apt_install busybox-static
  links=$(/bin/busybox --list | sed 's#^#/bin/#' | paste -sd, -)
  host_layer "${output%.tar}-layer" "$@"
  "${OUTPUT_DIR}/bin/imagepack" --binary /bin/busybox --name "${name}" --entrypoint /bin/sh \
    --env PATH=/bin:/usr/bin --links "${links}" --base-layer "${output%.tar}-layer.tar" --output "${output}"
  rm -f "${output%.tar}-layer.tar"
}

# apt_install PACKAGE...: Debian packages a driver's suite needs (bats, busybox-static), installed
# once.
apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg -s "${package}" > /dev/null 2>&1 || missing+=("${package}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null ||
    { apt-get update -qq > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null; } ||
    die "apt-get install ${missing[*]} failed"
}

full=false
[ ${#stages[@]} -eq ${#ALL_STAGES[@]} ] && full=true
run_start=${SECONDS}
# finish: whatever happened, the driver's helpers stop and (after a full run) its cluster goes; the
# teardown is part of the test, as in make test-kind.
finish() {
  local rc=$?
  if [ -n "${DRIVER:-}" ]; then
    driver_cleanup
    if ${full} && [ "${KIND_KEEP:-}" != 1 ]; then
      driver_teardown || rc=1
    fi
  fi
  [ "${rc}" -eq 0 ] || die "test-real-driver (${DRIVER:-}) failed after $((SECONDS - run_start))s"
  log "test-real-driver (${drivers[*]}: ${stages[*]}) passed in $((SECONDS - run_start))s"
}
trap finish EXIT
for DRIVER in "${drivers[@]}"; do
  REAL_DIR="${OUTPUT_DIR}/real-driver/${DRIVER}"
  UNRUNNABLE=""
  # shellcheck source=hack/real-driver/example.sh
  source "${REPO_ROOT}/hack/real-driver/${DRIVER}.sh"
  SNAPSHOT="${REPO_ROOT}/../shared/third_party/${SNAPSHOT_DIR}.tar.gz"
  for stage in "${stages[@]}"; do
    timed "real driver ${DRIVER}: ${stage}" "stage_${stage}"
  done
  if ${full} && [ "${KIND_KEEP:-}" != 1 ]; then
    driver_teardown
  fi
done
DRIVER=
