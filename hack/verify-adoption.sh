#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make verify-adoption: a driver outside this repository adopts the driver library by its release
# tag, with standard Go commands and no replace, as it would from the public repository:
#   1. the published repository: this checkout (committed or not, less what git ignores) as one
#      commit of a scratch repository, tagged by hack/release-library.sh --tag as a release is;
#   2. git and Go pointed at it: the repository's public URL rewritten to the scratch repository
#      (a throwaway git config), its module path private (fetched from git, no proxy, no checksum
#      database); whatever the module cache held of this repository's modules is removed before
#      and after, so that the tags under test are fetched anew (other modules come from the module
#      cache or the Go module proxy as usual, and builds reuse the build cache);
#   3. an outside module (test/adoption/outside-driver in an empty module) runs `go get` of the
#      library at LIBRARY_VERSION, then go mod tidy, go build, go vet, go test, and the
#      library's own unit tests from the tag; the same driver with kubeletplugin.Start builds too
#      and differs from it in that one line (the drop-in);
#   4. the supported k8s.io/* range: the outside module of 3 resolved the oldest, the floor the
#      library's go.mod requires; a copy of it on the newest patch of each supported minor
#      (LIBRARY_KUBE_TESTED, or ADOPTION_RELEASES) builds and runs the library's unit tests again,
#      and a copy of the example driver builds and passes its tests there;
#   5. the example driver copied from the release, as a driver author copies it: its go.mod must
#      require the library at LIBRARY_VERSION with no replace; tidy, build, vet, test;
#   6. the check tool installed as a node operator installs it, `go install <tool>@LIBRARY_VERSION`
#      outside any module: it builds from its tag with no replace and no heavy module, and runs
#      (it checks a policy file as the kubelet does).
# No -race here: the unit stage runs the library's tests with it, and each k8s.io release tested
# here is one more compile of client-go.
# Both module graphs must hold no k8s.io/kubernetes, none of the harness's heavy modules and no
# module of this repository but the library's. Fails if the library needs anything a tag cannot
# carry (a replace, an untagged version, the root module).
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

# Modules that only the kubelet side or the harness may need.
heavy="^(k8s\.io/kubernetes|sigs\.k8s\.io/kind|go\.etcd\.io/etcd/server/v3|${MODULE_PREFIX//./\\.}) "

scratch=$(mktemp -d)
modcache=$(go env GOMODCACHE)

# forget_own_modules: removes this repository's modules from the module cache: the extracted
# modules, the downloads and git's clone of the repository.
forget_own_modules() {
  local info dir
  for dir in "${modcache}/${MODULE_PREFIX}" "${modcache}/${MODULE_PREFIX}"@* "${modcache}/cache/download/${MODULE_PREFIX}"; do
    [ -e "${dir}" ] && chmod -R u+w "${dir}" && rm -rf "${dir}"
  done
  for info in "${modcache}"/cache/vcs/*.info; do
    [ -e "${info}" ] || continue
    [ "$(cat "${info}")" = "git3:https://${MODULE_PREFIX}" ] || continue
    rm -rf "${info%.info}" "${info}" "${info%.info}.lock"
  done
  return 0
}
trap 'forget_own_modules; rm -rf "${scratch}"' EXIT
forget_own_modules

# 1. The published repository.
origin="${scratch}/origin"
mkdir -p "${origin}"
while IFS= read -r -d '' file; do
  [ -e "${file}" ] && cp --parents -P "${file}" "${origin}/"
done < <(git ls-files -z --cached --others --exclude-standard)
export GIT_AUTHOR_NAME=verify-adoption GIT_AUTHOR_EMAIL=verify-adoption@localhost
export GIT_COMMITTER_NAME=verify-adoption GIT_COMMITTER_EMAIL=verify-adoption@localhost
git -C "${origin}" init -q
git -C "${origin}" add -A
git -C "${origin}" commit -q -m "the release under test"
(cd "${origin}" && hack/release-library.sh --tag)
log "verify-adoption: release tags $(git -C "${origin}" tag | tr '\n' ' ')"

# 2. git and Go see the scratch repository as the public one.
export GIT_CONFIG_GLOBAL="${scratch}/gitconfig" GIT_CONFIG_NOSYSTEM=1
git config --file "${GIT_CONFIG_GLOBAL}" url."file://${origin}".insteadOf "https://${MODULE_PREFIX}"
export GOWORK=off GOPRIVATE="${MODULE_PREFIX}" GOFLAGS=-buildvcs=false
# Go indexes a module version's files once, in the build cache, as if the version could never change;
# here the same tag holds the code under test each run: no index.
export GODEBUG=goindex=0

# no_heavy_modules NAME: fails when the module graph of the module in the current directory
# holds a heavy module.
no_heavy_modules() {
  local -a found
  mapfile -t found < <(go mod graph | tr ' ' '\n' | sed 's/@.*//' | sort -u | sed 's/$/ /' | grep -E "${heavy}" || true)
  if [ "${#found[@]}" -gt 0 ]; then
    echo "verify-adoption: the module graph of $1 holds modules a driver must not need:" >&2
    printf '  %s\n' "${found[@]}" >&2
    return 1
  fi
  log "verify-adoption: $1: $(go mod graph | wc -l) module graph edges, no heavy module"
}

# no_replace NAME: fails when the go.mod in the current directory has a replace.
no_replace() {
  if go mod edit -json | tr -d '\n\t ' | grep -q '"Replace":\['; then
    die "verify-adoption: $1's go.mod has a replace; a driver fetching the library by tag needs none"
  fi
}

# library_at_release NAME: fails unless the module in the current directory resolved every library
# module it uses to LIBRARY_VERSION, fetched from the release (not from a directory).
library_at_release() {
  local mod got
  for mod in "${LIBRARY_MODULES[@]}"; do
    got=$(go list -m -f '{{.Version}}{{if .Replace}} replaced{{end}}' "${MODULE_PREFIX}/${mod}")
    [ "${got}" = "${LIBRARY_VERSION}" ] ||
      die "verify-adoption: $1 resolved ${MODULE_PREFIX}/${mod} to '${got}', want ${LIBRARY_VERSION} from the tag"
  done
  log "verify-adoption: $1 uses the library at ${LIBRARY_VERSION}, fetched by tag"
}

# fit_health DIR: a driver on a k8s.io release whose kubeletplugin has no DeviceHealthReport
# (before v0.37) has no WatchHealthStatus method either (kubeletplugin v0.37 added it to DRAPlugin):
# removes DIR/health.go there, as such a driver is written. Run after the module's go mod tidy.
fit_health() {
  local dir=$1 module_dir version
  module_dir=$(cd "${dir}" && go list -m -f '{{.Dir}}' k8s.io/dynamic-resource-allocation)
  version=$(cd "${dir}" && go list -m -f '{{.Version}}' k8s.io/dynamic-resource-allocation)
  if ! grep -q '^type DeviceHealthReport ' "${module_dir}"/kubeletplugin/*.go; then
    rm -f "${dir}/health.go"
    log "verify-adoption: ${dir##*/}: kubeletplugin ${version} has no WatchHealthStatus: built without health.go"
  fi
}

# 3. An outside module.
outside="${scratch}/outside-driver"
mkdir -p "${outside}"
cp "${origin}"/test/adoption/outside-driver/*.go "${outside}/"
cd "${outside}" || exit 1
go mod init example.com/outside-driver 2> /dev/null
timed "verify-adoption: go get ${MODULE_PREFIX}/pkg/failfastplugin@${LIBRARY_VERSION}" \
  go get "${MODULE_PREFIX}/pkg/failfastplugin@${LIBRARY_VERSION}"
timed "verify-adoption: outside module: go mod tidy" go mod tidy
fit_health "${outside}"
no_replace "the outside module"
library_at_release "the outside module"
timed "verify-adoption: outside module: go build ./..." go build ./...
# Drop-in: the same driver before adoption (kubeletplugin.Start) builds, and the adoption changes the
# call alone (failfastplugin.Start has kubeletplugin.Start's signature and result).
before="${scratch}/outside-driver-before"
cp -r "${outside}" "${before}"
sed -i 's/failfastplugin\.Start(/kubeletplugin.Start(/' "${before}/main.go"
(cd "${before}" && go build ./...)
adoption_diff=$(diff -u --label before/main.go --label after/main.go "${before}/main.go" "${outside}/main.go" || true)
[ "$(grep -c '^[-+][^-+]' <<<"${adoption_diff}")" -eq 2 ] ||
  die "verify-adoption: adopting the library changes more than the Start call:"$'\n'"${adoption_diff}"
log "verify-adoption: drop-in: from kubeletplugin.Start to failfastplugin.Start is one line:"$'\n'"$(grep '^[-+][^-+]' <<<"${adoption_diff}")"
timed "verify-adoption: outside module: go vet ./..." go vet ./...
timed "verify-adoption: outside module: go test ./..." go test -count=1 -v ./...
# The library's own tests, from the tagged module zip, in the outside module's build list. -mod=mod
# lets go record the test-only dependencies it needs (go mod tidy keeps only the module's own).
timed "verify-adoption: the library's unit tests at ${LIBRARY_VERSION}" \
  go test -mod=mod -count=1 -v "${MODULE_PREFIX}/api/..." "${MODULE_PREFIX}/pkg/failfastplugin/..."
no_heavy_modules "the outside module"

# 4. The supported k8s.io/* range: the k8s.io modules of a Kubernetes release (v0.MINOR.PATCH) that
# the library requires, all at its floor.
mapfile -t kube_floor < <(cd "${origin}/pkg/failfastplugin" && go mod edit -json | tr -d '\n\t ' |
  grep -oE '\{"Path":"k8s\.io/[^"]*","Version":"v0\.[1-9][0-9]*\.[0-9]+"\}' | sed 's/{"Path":"\([^"]*\)","Version":"\([^"]*\)"}/\1 \2/')
kube_oldest=${kube_floor[0]#* }
kube_modules=()
for line in "${kube_floor[@]}"; do
  [ "${line#* }" = "${kube_oldest}" ] || die "verify-adoption: pkg/failfastplugin/go.mod requires ${line}, the other k8s.io modules at ${kube_oldest}: one floor for all"
  kube_modules+=("${line% *}")
done
for mod in "${kube_modules[@]}"; do
  got=$(go list -m -f '{{.Version}}' "${mod}")
  [ "${got}" = "${kube_oldest}" ] || die "verify-adoption: the outside module resolved ${mod} to ${got}, not to the library's floor ${kube_oldest}"
done
log "verify-adoption: oldest supported k8s.io release ${kube_oldest}: tested above (${kube_modules[*]})"
# toolchain_for RELEASE: prints the GOTOOLCHAIN for modules of the k8s.io release RELEASE: the
# machine's Go, or KUBE_PRERELEASE_TOOLCHAIN where they need a newer one.
toolchain_for() {
  local need
  need=$(go mod download -json "k8s.io/api@$1" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p' | xargs sed -n 's/^go //p')
  if [ -n "${need}" ] && [ "$(printf '%s\n%s\n' "${need}" "$(go env GOVERSION | sed 's/^go//')" | sort -V | head -1)" != "${need}" ]; then
    echo "${KUBE_PRERELEASE_TOOLCHAIN}"
  else
    echo "${GOTOOLCHAIN}"
  fi
}

# on_release DIR RELEASE: moves the module in DIR (a copy) to the k8s.io release RELEASE for the
# library's k8s.io modules, as a driver on that release has them, and checks that go resolved them.
on_release() {
  local dir=$1 release=$2 mod got
  cd "${dir}" || exit 1
  timed "verify-adoption: ${dir##*/}: go get k8s.io ${release}" go get "${kube_modules[@]/%/@${release}}"
  timed "verify-adoption: ${dir##*/}: go mod tidy" go mod tidy
  fit_health "${dir}"
  for mod in "${kube_modules[@]}"; do
    got=$(go list -m -f '{{.Version}}' "${mod}")
    [ "${got}" = "${release}" ] || die "verify-adoption: ${dir##*/}: ${mod} resolved to ${got}, want ${release}"
  done
  library_at_release "${dir##*/} on k8s.io ${release}"
}

# The newest patch of each supported minor: the outside module builds and the library's unit tests
# pass there; the example driver builds, vets and tests there too.
example_release=$(cd "${origin}/${EXAMPLE_MODULE}" && go mod edit -json | tr -d '\n\t ' |
  grep -oE '\{"Path":"k8s\.io/api","Version":"[^"]*"\}' | sed 's/.*"Version":"\([^"]*\)".*/\1/')
# ADOPTION_RELEASES (space-separated) narrows LIBRARY_KUBE_TESTED, for make test's time budget.
read -r -a releases <<<"${ADOPTION_RELEASES:-${LIBRARY_KUBE_TESTED[*]}}"
for release in "${releases[@]}"; do
  (
    GOTOOLCHAIN=$(toolchain_for "${release}")
    export GOTOOLCHAIN
    log "verify-adoption: k8s.io ${release} (GOTOOLCHAIN=${GOTOOLCHAIN})"
    cp -r "${outside}" "${scratch}/outside-${release}"
    cp "${origin}/test/adoption/outside-driver/health.go" "${scratch}/outside-${release}/"
    on_release "${scratch}/outside-${release}" "${release}"
    # go test builds the outside driver's package too.
    timed "verify-adoption: the outside module and the library's unit tests on k8s.io ${release}" \
      go test -mod=mod -count=1 -v ./... "${MODULE_PREFIX}/api/..." "${MODULE_PREFIX}/pkg/failfastplugin/..."
    # The release the example's own go.mod requires is step 5's.
    if [ "${release}" != "${example_release}" ]; then
      cp -r "${origin}/${EXAMPLE_MODULE}" "${scratch}/example-${release}"
      on_release "${scratch}/example-${release}" "${release}"
      timed "verify-adoption: example driver on ${release}: go test (step 5 vets it)" go test -count=1 -v ./...
    fi
  )
done

# 5. The example driver, copied from the release, on the k8s.io release its go.mod requires.
example="${scratch}/$(basename "${EXAMPLE_MODULE}")"
cp -r "${origin}/${EXAMPLE_MODULE}" "${example}"
cd "${example}" || exit 1
no_replace "${EXAMPLE_MODULE}"
timed "verify-adoption: example driver: go mod tidy" go mod tidy
library_at_release "the example driver (${EXAMPLE_MODULE})"
timed "verify-adoption: example driver: go build ./..." go build ./...
timed "verify-adoption: example driver: go vet ./..." go vet ./...
timed "verify-adoption: example driver: go test ./..." go test -count=1 -v ./...
no_heavy_modules "the example driver (${EXAMPLE_MODULE})"
# 6. The check tool, by go install.
cd "${scratch}" || exit 1
timed "verify-adoption: go install ${MODULE_PREFIX}/${TOOL_MODULE}@${LIBRARY_VERSION}" \
  env GOBIN="${scratch}/bin" go install "${MODULE_PREFIX}/${TOOL_MODULE}@${LIBRARY_VERSION}"
tool="${scratch}/bin/$(basename "${TOOL_MODULE}")"
heavy_in_tool=$(go version -m "${tool}" | awk '$1 == "dep" {print $2 " "}' | grep -E "${heavy}" || true)
[ -z "${heavy_in_tool}" ] || die "verify-adoption: the installed check tool holds modules a node tool must not need: ${heavy_in_tool}"
go version -m "${tool}" | grep -q "^[[:space:]]*mod[[:space:]]*${MODULE_PREFIX}/${TOOL_MODULE}[[:space:]]*${LIBRARY_VERSION}" ||
  die "verify-adoption: the installed check tool is not ${MODULE_PREFIX}/${TOOL_MODULE} ${LIBRARY_VERSION}"
printf 'apiVersion: dra-failfast.io/v1alpha1\nkind: DriverFailurePolicy\ndrivers:\n- driver: gpu.example.com\n  permanent: Ignore\n' > "${scratch}/policy.yaml"
policy_out=$("${tool}" -validate-policy -policy "${scratch}/policy.yaml" 2>&1) ||
  die "verify-adoption: the installed check tool refused a valid policy: ${policy_out}"
grep -q "gpu.example.com: Ignore" <<<"${policy_out}" || die "verify-adoption: the installed check tool printed: ${policy_out}"
printf 'apiVersion: dra-failfast.io/v1alpha1\nkind: DriverFailurePolicy\ndrivers:\n- driver: gpu.example.com\n  permanent: Honour\n' > "${scratch}/policy.yaml"
if policy_out=$("${tool}" -validate-policy -policy "${scratch}/policy.yaml" 2>&1); then
  die "verify-adoption: the installed check tool took an invalid policy: ${policy_out}"
fi
grep -q 'drivers\[0\].permanent' <<<"${policy_out}" || die "verify-adoption: the installed check tool's error does not name the entry: ${policy_out}"
log "verify-adoption: go install of the check tool at ${LIBRARY_VERSION}: no replace, no heavy module; it validates a policy file"

log "verify-adoption: outside modules fetch the library by its tag ${LIBRARY_VERSION} with no replace, and build, vet and test against it"
