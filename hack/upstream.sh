#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# The upstream-shaped KEP-5322 series (upstream/patches/, see upstream/README.md): patches against
# k8s.io/kubernetes SERIES_KUBE_VERSION (hack/lib.sh) in the shape kubernetes/kubernetes reviews, built and tested with
# nothing of this repository in their workspace.
#
# Usage: hack/upstream.sh COMMAND [--quick]
#   tree     makes _output/tree/<SERIES_KUBE_VERSION>/upstream = the pristine tree + upstream/patches, one commit each,
#            to edit (as hack/update-patches.sh describes for the fork's series)
#   codegen  regenerates, in _output/tree/<SERIES_KUBE_VERSION>/upstream, what upstream's hack/update-codegen.sh
#            protobindings and conversions generate for the kubelet's gRPC APIs; commit the result
#            with the change to the .proto
#   export   writes the tree's commits to upstream/patches/ (SERIES=upstream hack/update-patches.sh)
#   library  the driver library (pkg/failfastplugin) vetted and tested against the series'
#            kubeletplugin in _output/tree/<SERIES_KUBE_VERSION>/upstream, with the build tag that makes its Permanent
#            mark KEP-5322's ErrPermanent (verify runs it too)
#   verify   on a scratch copy of the pristine tree: the generators reproduce KUBE_VERSION's own
#            generated code byte for byte; the series applies; its generated code is what the
#            generators make of its sources; its error_type is declared as the fork's
#            (hack/tools/wirecheck); go vet and go test of every package it changes, the driver
#            library against its kubeletplugin (library, above), its integration tests
#            (UPSTREAM_INTEGRATION_TESTS, none today), go build
#            ./cmd/kubelet and upstream's own verify scripts in UPSTREAM_VERIFY_SCRIPTS; when
#            all passed, it writes upstream/verified.txt: the digest of upstream/patches/ it
#            verified. make verify (and so make test) runs --quick: everything up to the Go
#            packages, then it checks that upstream/verified.txt names the series as it is
#            (upstream/patches/ changes only with the series or with the sources it renders):
#            the series' own compile and tests cost a cold make test minutes (every package
#            above k8s.io/api/core/v1 recompiled for the series' tree) for checks that only
#            change with upstream/patches/. Run make verify-upstream after changing the series
#            and commit upstream/verified.txt with it.
#
# protoc 23.4, which upstream's protobindings require, is only on GitHub and in a container
# image: hack/tools/protoc stands in for it (verify proves that it does, on every kubelet API).
# shellcheck source-path=SCRIPTDIR
export SERIES=upstream
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"

KUBELET_APIS=staging/src/k8s.io/kubelet/pkg/apis
UPSTREAM_TOOLS="${OUTPUT_DIR}/tools/upstream"
# Upstream's verify scripts that apply to what the series changes and run here (offline, without
# hack/tools, which the module zip lacks); verify also runs the checks of verify-import-boss.sh and
# of verify-golangci-lint.sh's logcheck on the changed packages; upstream/README.md lists the
# others and why not.
UPSTREAM_VERIFY_SCRIPTS=(verify-gofmt.sh verify-featuregates.sh verify-test-featuregates.sh verify-pkg-names.sh
  verify-test-code.sh verify-import-aliases.sh)
# The series' integration tests, PACKAGE:TEST-REGEXP: run with etcd (hack/build-cluster-binaries.sh) on
# PATH, as upstream's hack/make-rules/test-integration.sh runs them. Only the tests the series
# extends: the whole package takes many minutes. None today: the KEP plans no integration test,
# and the series changes no controller (upstream/README.md).
UPSTREAM_INTEGRATION_TESTS=()
# golangci-lint for hack/verify-golangci-lint.sh's check: the version the Go module proxy serves
# that builds with this machine's Go (upstream pins its own in hack/tools/golangci-lint, which the
# module zip lacks).
GOLANGCI_LINT_VERSION=v2.15.0

# upstream_codegen TREE: regenerates the kubelet's gRPC API bindings (every api.proto under
# KUBELET_APIS) with hack/lib/protoc.sh's protoc flags, boilerplate and gofmt -s, and the
# conversions of the packages there tagged +k8s:conversion-gen with hack/update-codegen.sh's
# conversion-gen flags, conversion-gen built from TREE itself.
upstream_codegen() {
  local tree=$1 work proto dir file
  local -a conversion_dirs=()
  work="${tree}.codegen.work"
  mkdir -p "${UPSTREAM_TOOLS}"
  (cd "${REPO_ROOT}/hack/tools" && GOWORK=off go build -o "${UPSTREAM_TOOLS}/" ./protoc ./wirecheck \
    google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)
  write_workspace "${tree}" "${work}" --upstream >/dev/null
  (cd "${tree}" && GOWORK="${work}" go build -o "${UPSTREAM_TOOLS}/conversion-gen" ./staging/src/k8s.io/code-generator/cmd/conversion-gen)
  (
    cd "${tree}" || exit 1
    # shellcheck disable=SC2030 # meant for this subshell only
    export PATH="${UPSTREAM_TOOLS}:${PATH}"
    while IFS= read -r proto; do
      dir=$(dirname "${proto}")
      protoc --proto_path="$(pwd -P)" --proto_path="$(pwd -P)/vendor" --proto_path="$(pwd -P)/staging/src" \
        --proto_path="$(pwd -P)/third_party/protobuf" --go_out=. --go_opt=paths=source_relative \
        --go-grpc_out=. --go-grpc_opt=paths=source_relative "${dir}/api.proto"
      for file in "${dir}"/api*.pb.go; do
        cat hack/boilerplate/boilerplate.generatego.txt "${file}" > "${file}.tmp"
        mv "${file}.tmp" "${file}"
        gofmt -s -w "${file}"
      done
    done < <(find "${KUBELET_APIS}" -name api.proto | LC_ALL=C sort)
    # As hack/update-codegen.sh: every tagged package, every old output removed first.
    mapfile -t conversion_dirs < <(grep -rl --include='*.go' '^// *+k8s:conversion-gen=' "${KUBELET_APIS}" | xargs -r -n1 dirname | LC_ALL=C sort -u)
    find "${KUBELET_APIS}" -name zz_generated.conversion.go -delete
    GOWORK="${work}" conversion-gen -v 0 --go-header-file hack/boilerplate/boilerplate.generatego.txt \
      --output-file zz_generated.conversion.go --lint-rules=known-tags-only,require-explicit-disablement \
      --extra-peer-dirs k8s.io/kubernetes/pkg/apis/core --extra-peer-dirs k8s.io/kubernetes/pkg/apis/core/v1 \
      --extra-peer-dirs k8s.io/api/core/v1 "${conversion_dirs[@]/#/./}"
  ) || die "regenerating the kubelet's API code in ${tree} failed"
  rm -f "${work}" "${work}.sum"
}

# require_clean TREE MESSAGE: dies with MESSAGE and what changed when TREE has changes.
require_clean() {
  local tree=$1 message=$2
  if [ -n "$(tree_git "${tree}" status --porcelain)" ]; then
    tree_git "${tree}" status --short >&2
    tree_git "${tree}" diff --stat >&2
    tree_git "${tree}" diff | head -200 >&2
    die "${message}"
  fi
}

VERIFIED_STAMP="${REPO_ROOT}/upstream/verified.txt"

# series_digest: what upstream/verified.txt records: the base version and the sha256 of the
# series' patches, in order.
series_digest() {
  local digest
  digest=$(cd "${REPO_ROOT}/upstream/patches" && LC_ALL=C sha256sum -- *.patch | sha256sum | cut -d' ' -f1)
  echo "${KUBE_VERSION} sha256:${digest}"
}

# test_library TREE: this repository's driver library (LIBRARY_MODULES) built and tested against
# TREE's staging modules with the build tag failfastplugin_upstream_errpermanent: against the
# series' kubeletplugin, the library's Permanent mark and KEP-5322's ErrPermanent are one
# (pkg/failfastplugin/upstream_errpermanent*.go), and all its tests pass there.
test_library() {
  local tree=$1 work mod
  work="$(dirname "${tree}")/library.work"
  grep -E '^(go|godebug|toolchain) ' "${tree}/go.work" > "${work}"
  local -a uses=()
  for mod in $(staging_modules "${tree}/go.mod"); do uses+=("-use=${tree}/staging/src/${mod}"); done
  # The library modules require each other at their release version, which no proxy serves
  # before the release: each is also a replacement, as in this repository's go.work.
  for mod in "${LIBRARY_MODULES[@]}"; do
    uses+=("-use=${REPO_ROOT}/${mod}" "-replace=$(GOWORK=off go -C "${REPO_ROOT}/${mod}" list -m)@${LIBRARY_VERSION}=${REPO_ROOT}/${mod}")
  done
  GOWORK=off go work edit "${uses[@]}" "${work}"
  [ ! -f "${tree}/go.work.sum" ] || cp "${tree}/go.work.sum" "${work}.sum"
  log "the driver library against the series' kubeletplugin: go vet and go test -tags failfastplugin_upstream_errpermanent ./pkg/failfastplugin/..."
  (cd "${REPO_ROOT}/pkg/failfastplugin" && GOWORK="${work}" go vet -tags failfastplugin_upstream_errpermanent ./... &&
    GOWORK="${work}" go test -trimpath -count=1 -tags failfastplugin_upstream_errpermanent ./...) ||
    die "the driver library fails against the series' kubeletplugin (above)"
}

# golangci_lint TREE TMP WORK PACKAGE...: hack/verify-golangci-lint.sh's check of a pull request
# on the series' changes (--new-from-rev: what the series adds, as upstream's CI reports it for a
# PR), with the tree's hack/golangci.yaml minus its three plugin linters, which need golangci-lint's
# plugin build from hack/tools: logcheck (run above as its own command), kubeapilinter (API types
# under staging/src/k8s.io/api only) and sorted (the order of the feature gates, which
# verify-featuregates.sh checks).
golangci_lint() {
  local tree=$1 tmp=$2 work=$3
  shift 3
  GOBIN="${UPSTREAM_TOOLS}" GOWORK=off go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
  python3 - "${tree}/hack/golangci.yaml" "${tmp}/golangci.yaml" <<'PY' || die "cannot derive the golangci-lint configuration"
import sys, yaml
plugins = {"logcheck", "kubeapilinter", "sorted"}
config = yaml.safe_load(open(sys.argv[1]))
linters = config["linters"]
linters["enable"] = [l for l in linters["enable"] if l not in plugins]
linters["settings"].pop("custom", None)
kept = []
for rule in linters.get("exclusions", {}).get("rules", []):
    if "linters" in rule:
        rule["linters"] = [l for l in rule["linters"] if l not in plugins]
        if not rule["linters"]:
            continue
    kept.append(rule)
linters["exclusions"]["rules"] = kept
yaml.safe_dump(config, open(sys.argv[2], "w"))
PY
  log "golangci-lint ${GOLANGCI_LINT_VERSION} (hack/golangci.yaml without its plugin linters) on the series' changes"
  (cd "${tree}" && GOWORK="${work}" "${UPSTREAM_TOOLS}/golangci-lint" run --config "${tmp}/golangci.yaml" \
    --new-from-rev "${UPSTREAM_TAG}" --build-tags "${KUBE_BUILD_TAGS}" "$@") ||
    die "golangci-lint: the series' changes break upstream's linters (above)"
}

verify() {
  local start tmp tree work generated script wire
  local -a patches=() packages=() test_packages=()
  local integration
  start=$(date +%s)
  with_tree_lock ensure_pristine
  # A fixed place, not mktemp: Go's build cache keys compiled packages by their directory, so a
  # new path each run would compile the series' packages and upstream's tools from scratch.
  tmp="${TREE_DIR}/upstream-verify"
  rm -rf "${tmp}"
  mkdir -p "${tmp}"
  # shellcheck disable=SC2064 # expand now: tmp is local
  trap "rm -rf '${tmp}'" EXIT
  tree="${tmp}/tree"
  cp -a "${PRISTINE_TREE}" "${tree}"
  upstream_codegen "${tree}"
  require_clean "${tree}" "the generators do not reproduce ${KUBE_VERSION}'s own generated code (above)"
  generated=$(cd "${tree}" && find "${KUBELET_APIS}" -name 'api*.pb.go' -o -name zz_generated.conversion.go | wc -l)
  log "the generators reproduce ${KUBE_VERSION}'s ${generated} generated files of ${KUBELET_APIS} byte for byte"
  mapfile -t patches < <(patch_files)
  [ "${#patches[@]}" -gt 0 ] || die "no patches in ${PATCHES_DIR#"${REPO_ROOT}/"}/"
  apply_series "${tree}" "${patches[@]}"
  upstream_codegen "${tree}"
  require_clean "${tree}" "the series' generated code is not what its sources generate (above): run hack/upstream.sh codegen in the series' tree and commit"
  log "the series' generated code is current"
  # One wire format: the fork's error_type declaration (its drivers and kubelet) and the series'.
  wire=$("${UPSTREAM_TOOLS}/wirecheck" \
    "${REPO_ROOT}/api:draplugin/v1alpha/api.proto:dra_failfast.draplugin.v1alpha.NodePrepareResourceResponseExtension.error_type" \
    "${tree}:${KUBELET_APIS}/dra/v1/api.proto:k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourceResponse.error_type") ||
    die "the fork's error_type and the series' are declared differently (above)"
  log "error_type as the fork declares it (api/draplugin/v1alpha) and as the series does (dra/v1): ${wire}"
  work="${tmp}/tree.work"
  write_workspace "${tree}" "${work}" --upstream >/dev/null
  # Unit test packages; test/ holds the e2e suites (vetted below, run by make test-upstream-e2e)
  # and the integration tests (UPSTREAM_INTEGRATION_TESTS).
  mapfile -t packages < <(tree_git "${tree}" diff --name-only --diff-filter=d "${UPSTREAM_TAG}" HEAD -- '*.go' ':!test/' | xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|./|')
  mapfile -t test_packages < <(tree_git "${tree}" diff --name-only --diff-filter=d "${UPSTREAM_TAG}" HEAD -- 'test/*.go' | xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|./|')
  [ "${#packages[@]}" -gt 0 ] || die "the series changes no Go package"
  if [ "${1:-}" = --quick ]; then
    local stamped
    stamped=$(sed -n 's/^series: //p' "${VERIFIED_STAMP}" 2>/dev/null || true)
    [ "${stamped}" = "$(series_digest)" ] ||
      die "upstream/patches/ is not the series make verify-upstream last passed on (upstream/verified.txt: '${stamped:-none}', now '$(series_digest)'): run make verify-upstream and commit upstream/verified.txt"
    log "go vet and go test of the ${#packages[@]} changed package(s), the integration tests, the kubelet build and upstream's verify scripts skipped (--quick): make verify-upstream passed on this series ($(sed -n 's/^verified: //p' "${VERIFIED_STAMP}"))"
    log "OK: ${#patches[@]} upstream-shaped patch(es) verified, quick ($(($(date +%s) - start))s)"
    return 0
  fi
  log "go vet and go test of the ${#packages[@]} changed package(s): ${packages[*]}"
  # Without build tags, as upstream's CI runs them (the fork's hack/test-upstream.sh uses the release
  # build's, to share its kubelet build's packages); -trimpath keys compiled packages by their
  # sources, not by the tree's place.
  (cd "${tree}" && GOWORK="${work}" go vet -trimpath "${packages[@]}" && GOWORK="${work}" go test -trimpath -count=1 "${packages[@]}") ||
    die "go vet or go test failed in the series' tree"
  test_library "${tree}"
  # The integration tests' API server finds its own sources through runtime.Caller, which
  # -trimpath makes relative; upstream's testserver then builds the path from TEST_SRCDIR and
  # TEST_WORKSPACE (its bazel support): point them at the tree.
  mkdir -p "${tmp}/srcdir/tree/k8s.io"
  ln -s "${tree}" "${tmp}/srcdir/tree/k8s.io/kubernetes"
  for integration in "${UPSTREAM_INTEGRATION_TESTS[@]}"; do
    "${REPO_ROOT}/hack/build-cluster-binaries.sh" --no-apt etcd
    log "integration test ${integration#*:} of ${integration%%:*}"
    # shellcheck disable=SC2031 # the PATH upstream_codegen's subshell changes is not this one
    (cd "${tree}" && PATH="${OUTPUT_DIR}/bin:${PATH}" TEST_SRCDIR="${tmp}/srcdir" TEST_WORKSPACE=tree GOWORK="${work}" \
      go test -trimpath -count=1 -run "${integration#*:}" "${integration%%:*}") ||
      die "integration test ${integration#*:} of ${integration%%:*} failed in the series' tree"
  done
  if [ "${#test_packages[@]}" -gt 0 ]; then
    # The e2e suites need a cluster or a node: compiled and vetted here, with the e2e_node
    # suite's build tags, and run by make test-upstream-e2e.
    log "go vet of the ${#test_packages[@]} changed test package(s): ${test_packages[*]}"
    (cd "${tree}" && GOWORK="${work}" go vet -trimpath -tags "${KUBE_BUILD_TAGS}" "${test_packages[@]}") ||
      die "go vet failed on the series' test packages"
  fi
  log "building ./cmd/kubelet in the series' tree"
  (cd "${tree}" && GOWORK="${work}" go build -o /dev/null ./cmd/kubelet) || die "./cmd/kubelet does not build with the series"
  for script in "${UPSTREAM_VERIFY_SCRIPTS[@]}"; do
    (cd "${tree}" && GOWORK="${work}" GOTOOLCHAIN=$(kube_toolchain "${KUBE_VERSION}") bash "hack/${script}") || die "upstream's hack/${script} failed on the series"
    log "upstream's hack/${script}: ok"
  done
  # The checks of two more of upstream's verify scripts, on the changed packages (test/ included):
  # hack/verify-import-boss.sh runs ./cmd/import-boss of the tree on every package of the workspace
  # (the .import-restrictions files); hack/verify-golangci-lint.sh runs logcheck as a golangci-lint
  # plugin with hack/logcheck.conf, golangci-lint and the plugin built from hack/tools, which the
  # module zip lacks: logcheck runs here as its own command (hack/tools/go.mod pins it).
  # hack/verify-boilerplate.sh cannot run its boilerplate.py: module zips keep no file modes.
  log "hack/boilerplate/boilerplate.py on the changed files"
  local -a changed_files=()
  mapfile -t changed_files < <(tree_git "${tree}" diff --name-only --diff-filter=d "${UPSTREAM_TAG}" HEAD)
  local wrong
  wrong=$(cd "${tree}" && python3 hack/boilerplate/boilerplate.py "${changed_files[@]}") || die "boilerplate.py failed"
  [ -z "${wrong}" ] || die "boilerplate header wrong in: ${wrong}"
  log "import-boss (./cmd/import-boss) on the changed packages"
  (cd "${tree}" && GOWORK="${work}" GOPROXY=off go run ./cmd/import-boss "${packages[@]}" "${test_packages[@]}") ||
    die "import-boss: the series breaks an import restriction (above)"
  (cd "${REPO_ROOT}/hack/tools" && GOWORK=off go build -o "${UPSTREAM_TOOLS}/" sigs.k8s.io/logtools/logcheck)
  log "logcheck -config hack/logcheck.conf on the changed packages"
  (cd "${tree}" && GOWORK="${work}" GOFLAGS="${GOFLAGS} -tags=${KUBE_BUILD_TAGS}" "${UPSTREAM_TOOLS}/logcheck" -config hack/logcheck.conf "${packages[@]}" "${test_packages[@]}") ||
    die "logcheck: the series' logging breaks upstream's rules (above)"
  golangci_lint "${tree}" "${tmp}" "${work}" "${packages[@]}" "${test_packages[@]}"
  {
    echo "# Written by make verify-upstream (hack/upstream.sh verify) when every check of it passed;"
    echo "# make test's quick verify requires the series to be the one named here."
    echo "series: $(series_digest)"
    echo "verified: $(date -u +%Y-%m-%d), in $(($(date +%s) - start)) s"
  } > "${VERIFIED_STAMP}"
  log "OK: ${#patches[@]} upstream-shaped patch(es) verified ($(($(date +%s) - start))s); wrote ${VERIFIED_STAMP#"${REPO_ROOT}/"}"
}

case "${1:-}" in
  tree) with_tree_lock ensure_pristine && with_tree_lock ensure_patched ;;
  codegen)
    [ -d "${PATCHED_TREE}/.git" ] || die "no tree at ${PATCHED_TREE#"${REPO_ROOT}/"}: run hack/upstream.sh tree first"
    upstream_codegen "${PATCHED_TREE}"
    tree_git "${PATCHED_TREE}" status --short
    ;;
  export) exec "${REPO_ROOT}/hack/update-patches.sh" ;;
  verify) verify "${2:-}" ;;
  library)
    [ -d "${PATCHED_TREE}/.git" ] || die "no tree at ${PATCHED_TREE#"${REPO_ROOT}/"}: run hack/upstream.sh tree first"
    test_library "${PATCHED_TREE}"
    ;;
  *) die "usage: hack/upstream.sh tree|codegen|export|verify [--quick]|library" ;;
esac
