#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make test-upstream-e2e: upstream's own DRA node e2e specs (test/e2e_node of the pristine
# KUBE_VERSION tree) against the stock kubelet, the fork and the upstream-shaped series' kubelet
# (upstream/patches/), each with DRAHandlePermanentDriverFailures off and on, compared spec by
# spec (cmd/upstream-e2e); the fork with the gate on also runs the fork series' own KEP-5322 spec
# (test/e2e_node/dra_failfast_test.go in staging-patches/), the series' kubelet runs the series'
# own e2e_node.test: upstream's specs plus the nine 0005 adds to test/e2e_node/dra_test.go.
# Needs root; never run it while a local cluster is up (same ports, same /var/lib/kubelet).
#   1. builds what make demo builds (hack/build.sh), and upstream's e2e_node.test with
#      upstream's build tags: from the pristine tree, from the patched tree and (for the series'
#      runs, with the series' kubelet: hack/build-kubelet.sh --series) from the series' tree;
#   2. packs the busybox image the specs run, under the name the suite expects (printed by
#      upstream-e2e -busybox-image-name), from Debian's busybox-static;
#   3. with UPSTREAM_E2E_NODE=systemd (the default): starts the kind container engine and builds
#      the kind base image (hack/kind/engine.sh, hack/kind-image.sh: Debian 12 with systemd), so
#      that each kubelet's suite runs in a fresh container with systemd as PID 1, the kubelet as a
#      transient systemd unit, and the specs that restart the kubelet run too; the engine is
#      stopped again (and the host checked) unless it was running before;
#      with UPSTREAM_E2E_NODE=host: the suite runs on this host, systemd hidden from it, and the
#      kubelet-restart specs are skipped (make test's stage: no engine, no image);
#   4. runs cmd/upstream-e2e, which prints the three-way table and writes
#      ${OUTPUT_DIR}/upstream-e2e/<timestamp>/report.md and results.json.
# UPSTREAM_E2E_RUNS=stock,fork-gate-off,fork-gate-on,series-gate-off,series-gate-on (default)
# picks the runs; make test runs
# fork-gate-on alone, on the host, without the series' own specs (UPSTREAM_E2E_OWN_SPECS=0: the
# e2e_node suite of this repository covers what they check). Extra arguments go to upstream-e2e, e.g. -focus REGEXP for a
# quick check.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"

[ "$(id -u)" -eq 0 ] || die "run as root: the suite runs a real kubelet and containerd (like make demo)"
"${REPO_ROOT}/hack/build.sh"
# Upstream's kubelet config for the suite evicts every pod while the node's file system has less
# than nodefs.available (10 %) free, and then reclaims 5 % more: every spec would time out waiting
# for a pod. Say so before building anything.
nodefs_hard=$(sed -n 's/^ *nodefs.available: *\([0-9]*\)%$/\1/p' "$(kube_module_dir)/test/e2e_node/jenkins/default-kubelet-config.yaml" | head -1)
read -r fs_size fs_avail < <(df --output=size,avail -k /var/lib | tail -1)
if [ -n "${nodefs_hard}" ] && [ $((fs_avail * 100)) -lt $(((nodefs_hard + 1) * fs_size)) ]; then
  die "the file system of /var/lib/kubelet has $((fs_avail / 1048576)) GiB free of $((fs_size / 1048576)) GiB ($((fs_avail * 100 / fs_size)) %): upstream's suite evicts every pod below ${nodefs_hard} % free (nodefs.available in its kubelet config); free at least $(((nodefs_hard + 1) * fs_size / 100 / 1048576 - fs_avail / 1048576 + 1)) GiB (Go's build cache: go clean -cache)"
fi

E2E_BIN_DIR="${OUTPUT_DIR}/upstream-e2e/bin"
runs=${UPSTREAM_E2E_RUNS:-stock,fork-gate-off,fork-gate-on,series-gate-off,series-gate-on}
! ${ported} || E2E_BIN_DIR+="/${KUBE_VERSION}"
if [ "${KUBE_VERSION}" != "${SERIES_KUBE_VERSION}" ]; then
  # The upstream-shaped series is written against one version (upstream/README.md); on the others
  # the stock kubelet and the fork's, with that version's own specs.
  runs=${UPSTREAM_E2E_RUNS:-stock,fork-gate-off,fork-gate-on}
  [[ ",${runs}," != *,series-* ]] ||
    die "UPSTREAM_E2E_RUNS=${runs}: the upstream-shaped series' runs need KUBE_VERSION=${SERIES_KUBE_VERSION}, the series' version"
fi
mkdir -p "${E2E_BIN_DIR}"
with_tree_lock ensure_pristine
with_tree_lock ensure_patched
with_tree_lock write_workspace "${PATCHED_TREE}" "${PATCHED_WORK}"

# build_e2e_node TREE WORKSPACE OUT: upstream's node e2e test binary, with the tags of its
# release build (hack/make-rules/test-e2e-node.sh builds it the same way), and on an older tree
# the fork's KUBE_GO_TAGS (KUBE_BUILD_TAGS, hack/lib.sh).
build_e2e_node() {
  (cd "$1" && GOWORK="$2" GOFLAGS=-buildvcs=false \
    go test -c -trimpath -tags "${KUBE_BUILD_TAGS}" -o "$3" ./test/e2e_node)
}
timed "e2e_node.test (pristine tree)" \
  build_e2e_node "${PRISTINE_TREE}" "$(stock_workspace)" "${E2E_BIN_DIR}/e2e_node.test"
series_args=()
if [[ ",${runs}," == *,series-* ]]; then
  "${REPO_ROOT}/hack/build-kubelet.sh" --series
  timed "e2e_node.test (the series' tree, with its specs)" \
    build_e2e_node "${TREE_DIR}/upstream" "${TREE_DIR}/upstream.work" "${E2E_BIN_DIR}/e2e_node-series.test"
  series_args=(-series-e2e-binary "${E2E_BIN_DIR}/e2e_node-series.test")
fi
own_args=(-own-e2e-binary "${E2E_BIN_DIR}/e2e_node-patched.test")
if [ "${UPSTREAM_E2E_OWN_SPECS:-1}" = 0 ]; then
  own_args=(-own-specs=false)
else
  timed "e2e_node.test (patched tree, with the series' own spec)" \
    build_e2e_node "${PATCHED_TREE}" "${PATCHED_WORK}" "${E2E_BIN_DIR}/e2e_node-patched.test"
fi

# The specs' only image: busybox, with every applet linked into /bin as in the real image. It
# must be the static build: the image holds no C library (Debian's busybox package, dynamically
# linked, installs the same /bin/busybox; busybox-static replaces it).
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
  log "installing Debian's busybox-static"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static >/dev/null
fi
# upstream-e2e names the default version's busybox; the tag is the one KUBE_VERSION's specs use.
busybox_image=$("${BIN_DIR}/upstream-e2e" -busybox-image-name)
busybox_tag=$(sed -n 's/^\s*configs\[BusyBox\] = Config{[^,]*, "busybox", "\([^"]*\)"}$/\1/p' "${PRISTINE_TREE}/test/utils/image/manifest.go")
[ -n "${busybox_tag}" ] || die "no busybox tag in ${KUBE_VERSION}'s test/utils/image/manifest.go"
busybox_image="${busybox_image%:*}:${busybox_tag}"
"${BIN_DIR}/imagepack" --binary /bin/busybox --name "${busybox_image}" \
  --links "$(/bin/busybox --list | sed 's|^|/bin/|' | paste -sd, -)" \
  --env PATH=/bin --entrypoint /bin/sh --output "${OUTPUT_DIR}/images/busybox.tar"
log "packed busybox (${busybox_image#*/}, registry host omitted) from /bin/busybox ($(/bin/busybox | head -n1))"

cd "${REPO_ROOT}" || exit 1
node_args=()
case "${UPSTREAM_E2E_NODE:-systemd}" in
  host) ;;
  systemd)
    # shellcheck source=hack/kind/lib.sh
    source "${REPO_ROOT}/hack/kind/lib.sh"
    if [ "$(hack/kind/engine.sh status)" = stopped ]; then
      trap 'hack/kind/engine.sh stop' EXIT
    fi
    hack/kind/engine.sh start
    hack/kind-image.sh binaries rootfs base
    kind_env
    node_args=(-systemd-node-image "${KIND_BASE_IMAGE}")
    ;;
  *) die "UPSTREAM_E2E_NODE=${UPSTREAM_E2E_NODE}: want systemd or host" ;;
esac
"${BIN_DIR}/upstream-e2e" "${node_args[@]}" \
  -e2e-binary "${E2E_BIN_DIR}/e2e_node.test" \
  "${own_args[@]}" "${series_args[@]}" \
  -kubelet-config "${PRISTINE_TREE}/test/e2e_node/jenkins/default-kubelet-config.yaml" \
  -image "${OUTPUT_DIR}/images/busybox.tar" \
  -stock-kubelet "${BIN_DIR}/kubelet-stock" -fork-kubelet "${BIN_DIR}/kubelet" -series-kubelet "${BIN_DIR}/kubelet-series" \
  -runs "${runs}" "$@"
