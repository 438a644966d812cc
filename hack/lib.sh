#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# shellcheck disable=SC2034 # its variables are used by the scripts that source it
# Shared settings for the hack/ scripts. Source it; do not run it.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export REPO_ROOT
# The one place the upstream version is pinned: the default of KUBE_VERSION, which a caller may set
# to another of SUPPORTED_KUBE_VERSIONS (docs/building.md, "Kubernetes versions").
DEFAULT_KUBE_VERSION=v1.37.2
# The Kubernetes releases whose tree the fork's patch series is known to apply to and build in: the
# newest patch of each minor the fork supports. The series is written against the default; on the
# others it is ported (hack/tree.sh, ensure_patched; docs/versions.md).
SUPPORTED_KUBE_VERSIONS=(v1.37.2 v1.38.0-beta.0 v1.36.3 v1.35.4)
# The version the upstream-shaped KEP-5322 series (upstream/patches/) is written against: the
# newest tree the Go module proxy serves, where a pull request would land (upstream/README.md).
# Its scripts (SERIES=upstream: hack/upstream.sh, hack/build-kubelet.sh --series, make
# test-series) run on it; the fork's run on KUBE_VERSION.
SERIES_KUBE_VERSION=v1.38.0-beta.0
if [ "${SERIES:-}" = upstream ]; then
  KUBE_VERSION=${KUBE_VERSION:-${SERIES_KUBE_VERSION}}
  [ "${KUBE_VERSION}" = "${SERIES_KUBE_VERSION}" ] ||
    { printf 'ERROR: KUBE_VERSION=%s: the upstream-shaped series is written against %s only (upstream/README.md)\n' "${KUBE_VERSION}" "${SERIES_KUBE_VERSION}" >&2; exit 1; }
fi
KUBE_VERSION=${KUBE_VERSION:-${DEFAULT_KUBE_VERSION}}
supported=" ${SUPPORTED_KUBE_VERSIONS[*]} "
[[ "${supported}" == *" ${KUBE_VERSION} "* ]] ||
  { printf 'ERROR: KUBE_VERSION=%s is not supported by this fork (supported: %s)\n' "${KUBE_VERSION}" "${SUPPORTED_KUBE_VERSIONS[*]}" >&2; exit 1; }
unset supported
# The scripts that work on every supported version; the others (the upstream-shaped series, the kind
# tests, the library's checks) are the default version's and stop at once on another rather than
# mix versions (docs/versions.md, "What runs on which version").
PORTABLE_SCRIPTS=(build-kubelet.sh verify-patches.sh test-upstream.sh test-versions.sh
  build-cluster-binaries.sh build.sh demo.sh kind-image.sh kind-up.sh kind-down.sh kind-demo.sh
  kind-deploy-driver.sh engine.sh release.sh verify-release.sh test-upstream-e2e.sh bench.sh)
if [ "${KUBE_VERSION}" != "${DEFAULT_KUBE_VERSION}" ] && [[ " ${PORTABLE_SCRIPTS[*]} " != *" $(basename "$0") "* ]] &&
  [ "${SERIES:-}" != upstream ]; then
  printf 'ERROR: KUBE_VERSION=%s: %s runs on %s only; on %s: make kubelet, demo, kind-demo, release, bench, test-versions (docs/versions.md)\n' \
    "${KUBE_VERSION}" "hack/$(basename "$0")" "${DEFAULT_KUBE_VERSION}" "${KUBE_VERSION}" >&2
  exit 1
fi
# Go build tags that select the fork's code for a tree older than the default's:
# dra_failfast_before_1_N for each minor N above KUBE_VERSION's, up to the default's
# (pkg/kubelet/cm/dra/*_before_1_N.go hold what such a tree lacks). Empty on the default version.
KUBE_GO_TAGS=""
for ((minor = $(cut -d. -f2 <<< "${KUBE_VERSION}") + 1; minor <= $(cut -d. -f2 <<< "${DEFAULT_KUBE_VERSION}"); minor++)); do
  KUBE_GO_TAGS+="${KUBE_GO_TAGS:+,}dra_failfast_before_1_${minor}"
done
# The tags of upstream's release builds (its hack/lib/golang.sh) and KUBE_GO_TAGS. Upstream's unit
# and node e2e tests compile with them too, so that they reuse what the kubelet build compiled
# (without them every k8s.io package compiles twice, about 5 minutes of a cold run); the two
# release tags drop only the fuzzer methods of three apimachinery types (notest) and grpc's
# x/net/trace hooks (grpcnotrace), which none of those tests use.
KUBE_BUILD_TAGS="selinux,notest,grpcnotrace${KUBE_GO_TAGS:+,${KUBE_GO_TAGS}}"
unset minor
# Every staging module of k8s.io/kubernetes v1.X.Y is released as v0.X.Y.
KUBE_STAGING_VERSION=v0.${KUBE_VERSION#v1.}
# Revision of this fork on top of KUBE_VERSION: the patched kubelet reports
# KUBE_VERSION-dra-failfast.FORK_REVISION (kubelet --version).
FORK_REVISION=1
FORK_VERSION="${KUBE_VERSION}-dra-failfast.${FORK_REVISION}"
# The kubelet of the upstream-shaped series (upstream/patches/, hack/build-kubelet.sh --series).
# It reports the version master's kubelet has once the series' 0000 (master's own bump of
# DefaultKubeBinaryVersion) is in: the next minor's first alpha. A kubelet evaluates its feature
# gates at its own version, and at SERIES_KUBE_VERSION's the series' gate (alpha from the next
# minor) is not yet there to set.
SERIES_VERSION="v1.$(($(cut -d. -f2 <<< "${SERIES_KUBE_VERSION}") + 1)).0-alpha.0-kep5322.${FORK_REVISION}"
OUTPUT_DIR=${OUTPUT_DIR:-${REPO_ROOT}/_output}
# The binaries built for KUBE_VERSION: _output/bin for the default, _output/bin/<version> for
# another, where the control plane and the kubelets are that version's and the rest (etcd,
# containerd, tools) links to the default's. The local cluster takes its binaries from there.
VERSION_BIN_DIR="${OUTPUT_DIR}/bin"
# control_plane_env VERSION: prints, as NAME=VALUE lines, what the local cluster's control plane of
# VERSION needs beyond its defaults (internal/localcluster reads them): the binaries of another
# version than the default, and before 1.37 the gates and API version that serve DeviceTaintRules
# (the driver library's device faults; docs/driver-authors.md).
control_plane_env() {
  local version=$1
  [ "${version}" = "${DEFAULT_KUBE_VERSION}" ] || echo "LOCAL_CLUSTER_BIN_DIR=${OUTPUT_DIR}/bin/${version}"
  case "${version}" in
    v1.36.*) printf '%s\n' LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES=DRADeviceTaintRules=true \
      LOCAL_CLUSTER_RUNTIME_CONFIG=resource.k8s.io/v1beta2=true ;;
    v1.35.*) printf '%s\n' LOCAL_CLUSTER_CONTROL_PLANE_FEATURE_GATES=DRADeviceTaints=true,DRADeviceTaintRules=true \
      LOCAL_CLUSTER_RUNTIME_CONFIG=resource.k8s.io/v1alpha3=true ;;
  esac
}
if [ "${KUBE_VERSION}" != "${DEFAULT_KUBE_VERSION}" ]; then
  VERSION_BIN_DIR+="/${KUBE_VERSION}"
  while IFS= read -r setting; do
    export "${setting?}"
  done < <(control_plane_env "${KUBE_VERSION}")
  unset setting
fi
# The light Go modules nested in this repository, for driver authors: the wire extension and the
# driver library (docs/building.md, "Modules"). Each requires the others at LIBRARY_VERSION and
# has no replace; in this repository the workspace go.work joins them (the root module, which no
# one requires, also replaces them with their directories for the patched tree's workspace).
# `go test ./...` at the root does not reach them, so scripts loop over this list.
LIBRARY_MODULES=(api pkg/failfastplugin)
# The library's release version: a fork release FORK_VERSION is also the library release
# v0.FORK_REVISION.0, tagged <module dir>/LIBRARY_VERSION (hack/release-library.sh).
LIBRARY_VERSION="v0.${FORK_REVISION}.0"
# The k8s.io/* releases (staging versions) the library is tested with besides the floor its go.mod
# requires: the newest patch of each supported minor (hack/verify-adoption.sh; docs/driver-authors.md).
# A pre-release's modules need the Go its go.mod names (toolchain_for in hack/verify-adoption.sh).
LIBRARY_KUBE_TESTED=(v0.36.6 v0.37.2 v0.38.0-beta.0)
# The module path prefix of this repository's modules.
MODULE_PREFIX=github.com/dra-failfast/dra-failfast
# The node's check tool (cmd/dra-failfast-check), a module of its own so that an operator can
# `go install` it: it requires the library's api module at LIBRARY_VERSION, no replace, and is
# tagged with the library.
TOOL_MODULE=cmd/dra-failfast-check
# The example driver, a module of its own that uses the library as an outside driver does.
EXAMPLE_MODULE=examples/gpu-driver
# Helm, for the example driver's chart (deploy/helm/gpu-driver), built from its module: the
# version dra-example-driver v0.4.0's e2e suite uses.
HELM_VERSION=v4.2.3
# The example driver's Helm chart; deploy/gpu-driver/manifests.yaml is rendered from it.
GPU_DRIVER_CHART=deploy/helm/gpu-driver
# cert-manager, whose own Issuer and Certificate definitions (its module's deploy/crds) the kind
# tests install to check the chart's cert-manager path (test/kind TestChartCertificates).
CERT_MANAGER_VERSION=v1.21.2
# The Go toolchain that Kubernetes 1.38 needs (its go.mod says go 1.27), fetched by the go command
# from the Go module proxy: everything built for a 1.38 tree (KUBE_VERSION v1.38.*), and modules
# requiring k8s.io/* v0.38 (hack/verify-adoption.sh, toolchain_for), run with GOTOOLCHAIN set to
# it; the rest with the machine's Go.
KUBE_PRERELEASE_TOOLCHAIN=go1.27.3
# kube_toolchain VERSION: the GOTOOLCHAIN that builds VERSION's tree.
kube_toolchain() {
  case "$1" in
    v1.38.*) echo "${KUBE_PRERELEASE_TOOLCHAIN}" ;;
    *) echo local ;;
  esac
}
if [ -z "${GOTOOLCHAIN:-}" ] || [ "${GOTOOLCHAIN}" = local ]; then
  GOTOOLCHAIN=$(kube_toolchain "${KUBE_VERSION}")
fi
export GOTOOLCHAIN
export GOFLAGS=${GOFLAGS:--buildvcs=false}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# timed NAME CMD...: runs CMD and logs how long it took.
timed() {
  local name=$1 start ms
  shift
  start=$(date +%s%N)
  "$@"
  ms=$((($(date +%s%N) - start) / 1000000))
  log "${name}: done in $((ms / 1000)).$((ms % 1000 / 100))s"
}

# helm_bin: prints the path of helm HELM_VERSION, built once (go install) into _output/bin.
helm_bin() {
  local helm="${OUTPUT_DIR}/bin/helm-${HELM_VERSION}" gobin
  if [ ! -x "${helm}" ]; then
    log "building helm ${HELM_VERSION}"
    gobin=$(mktemp -d)
    CGO_ENABLED=0 GOBIN="${gobin}" go install -trimpath -ldflags="-s -w" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}" >&2 || die "go install helm ${HELM_VERSION} failed"
    mkdir -p "${OUTPUT_DIR}/bin"
    mv "${gobin}/helm" "${helm}"
    rmdir "${gobin}"
  fi
  echo "${helm}"
}

# cert_manager_crds: prints the directory of cert-manager's CustomResourceDefinitions at
# CERT_MANAGER_VERSION, from the Go module proxy (go mod download).
cert_manager_crds() {
  local dir
  dir=$(GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || die "go mod download of cert-manager ${CERT_MANAGER_VERSION} failed"
  [ -f "${dir}/deploy/crds/cert-manager.io_certificates.yaml" ] || die "cert-manager ${CERT_MANAGER_VERSION}: no deploy/crds in its module (${dir})"
  echo "${dir}/deploy/crds"
}

# e2e_suite_with KUBELET LOG: the whole e2e_node suite (test/e2e_node) with KUBELET (relative to
# the repository) as the node's kubelet, its output in LOG; prints the top-level results and
# returns the suite's status.
e2e_suite_with() {
  local kubelet=$1 log_file=$2 rc=0
  mkdir -p "$(dirname "${log_file}")"
  timed "e2e_node suite with ${kubelet##*/}" \
    env LOCAL_CLUSTER_KUBELET="${kubelet}" \
    go test -tags e2e_node -count=1 -v -timeout 60m -parallel 48 ./test/e2e_node/ > "${log_file}" 2>&1 || rc=$?
  grep -E '^(--- |ok|FAIL)|data race' "${log_file}" || true
  echo "$(grep -c '^--- PASS' "${log_file}") passed, $(grep -c '^--- SKIP' "${log_file}") skipped, $(grep -c '^--- FAIL' "${log_file}") failed"
  log "log: ${log_file#"${REPO_ROOT}/"}"
  return "${rc}"
}

# kube_module_dir prints the module-cache directory of k8s.io/kubernetes at KUBE_VERSION,
# downloading it when missing.
kube_module_dir() {
  go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

# staging_modules [GOMOD] prints the staging module paths read from upstream's go.mod replace block
# (GOMOD: that go.mod, by default the one of k8s.io/kubernetes@KUBE_VERSION in the module cache).
staging_modules() {
  local gomod=${1:-} dir
  if [ -z "${gomod}" ]; then
    dir=$(kube_module_dir)
    [ -n "${dir}" ] || die "cannot download k8s.io/kubernetes@${KUBE_VERSION}"
    gomod="${dir}/go.mod"
  fi
  sed -n 's#^\t\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/.*#\1#p' "${gomod}"
}

# version_ldflags VERSION COMMIT TREE_STATE DATE prints the -X flags that upstream's
# hack/lib/version.sh sets, stamping VERSION (gitMajor/gitMinor derived from it). An empty COMMIT
# leaves gitCommit unset. The one copy of version stamping: kubelet builds (tree.sh) and the
# control-plane binaries (build-cluster-binaries.sh) both use it.
version_ldflags() {
  local version=$1 commit=$2 state=$3 date=$4 major minor key val
  local -a flags=()
  major=${version#v}
  major=${major%%.*}
  minor=${version#v*.}
  minor=${minor%%.*}
  for key in gitVersion gitMajor gitMinor gitCommit gitTreeState buildDate; do
    case "${key}" in
      gitVersion) val=${version} ;;
      gitMajor) val=${major} ;;
      gitMinor) val=${minor} ;;
      gitCommit) val=${commit} ;;
      gitTreeState) val=${state} ;;
      buildDate) val=${date} ;;
    esac
    [ -n "${val}" ] || continue
    flags+=("-X 'k8s.io/client-go/pkg/version.${key}=${val}'" "-X 'k8s.io/component-base/version.${key}=${val}'")
  done
  echo "${flags[*]}"
}
