#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# The driver library's release: its modules (LIBRARY_MODULES) and the check tool's (TOOL_MODULE)
# are tagged together, at LIBRARY_VERSION (hack/lib.sh: v0.FORK_REVISION.0), with Go's tag form
# for a module in a subdirectory: api/v0.N.0, pkg/failfastplugin/v0.N.0, cmd/dra-failfast-check/v0.N.0.
#   hack/release-library.sh --check        (make verify) every library module, the check tool and the example driver
#                                          require this repository's modules at LIBRARY_VERSION
#                                          and carry no replace: what a tag of HEAD would publish
#                                          resolves with `go get` alone
#   hack/release-library.sh --set-version  rewrites those requirements to LIBRARY_VERSION (after a
#                                          FORK_REVISION bump; commit the result, then tag)
#   hack/release-library.sh --tidy         go mod tidy of each of those modules alone (GOWORK=off),
#                                          this repository's modules taken from their directories
#                                          for the run only: `go mod tidy` ignores go.work and
#                                          cannot fetch a version that is not tagged yet
#   hack/release-library.sh --tag          (make release-library) --check, a clean work tree, then
#                                          tags HEAD for every library module; a tag that exists
#                                          must already point at HEAD. Push the tags with the commit.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

# release_modules: the modules whose go.mod a release publishes as is: the library, the check tool
# and the example driver (driver authors copy it).
release_modules() {
  printf '%s\n' "${LIBRARY_MODULES[@]}" "${TOOL_MODULE}" "${EXAMPLE_MODULE}"
}

# own_requirements MODULE_DIR prints "path version" for each requirement on this repository's
# modules in MODULE_DIR/go.mod.
own_requirements() {
  (cd "$1" && GOWORK=off go mod edit -json) |
    tr -d '\n\t ' | grep -o '{"Path":"[^"]*","Version":"[^"]*"' |
    sed 's/{"Path":"\([^"]*\)","Version":"\([^"]*\)"/\1 \2/' | grep "^${MODULE_PREFIX}/" || true
}

check() {
  local mod path version bad=0 replaces
  for mod in $(release_modules); do
    replaces=$( (cd "${mod}" && GOWORK=off go mod edit -json) | tr -d '\n\t ' | grep -o '"Replace":\[' || true)
    if [ -n "${replaces}" ]; then
      echo "release-library: ${mod}/go.mod has a replace: a module that requires it would not get it (go.work joins the modules here)" >&2
      bad=1
    fi
    while read -r path version; do
      [ -n "${path}" ] || continue
      if [ "${version}" != "${LIBRARY_VERSION}" ]; then
        echo "release-library: ${mod}/go.mod requires ${path} ${version}, the release is ${LIBRARY_VERSION} (hack/release-library.sh --set-version)" >&2
        bad=1
      fi
    done < <(own_requirements "${mod}")
  done
  [ "${bad}" -eq 0 ] || return 1
  log "release-library: the library modules and the example require each other at ${LIBRARY_VERSION}, no replace"
}

set_version() {
  local mod path version
  for mod in $(release_modules) .; do
    while read -r path version; do
      [ -n "${path}" ] || continue
      (cd "${mod}" && GOWORK=off go mod edit -require="${path}@${LIBRARY_VERSION}")
    done < <(own_requirements "${mod}")
  done
  log "release-library: requirements set to ${LIBRARY_VERSION}; commit, then hack/release-library.sh --tag"
}

tidy() {
  local mod path version
  local -a replaces drops
  for mod in $(release_modules); do
    replaces=() drops=()
    while read -r path version; do
      [ -n "${path}" ] || continue
      replaces+=("-replace=${path}=$(realpath --relative-to="${mod}" "${path#"${MODULE_PREFIX}/"}")")
      drops+=("-dropreplace=${path}")
    done < <(own_requirements "${mod}")
    (
      cd "${mod}"
      export GOWORK=off
      [ "${#replaces[@]}" -eq 0 ] || go mod edit "${replaces[@]}"
      go mod tidy
      [ "${#drops[@]}" -eq 0 ] || go mod edit "${drops[@]}"
    )
    # The replaces' paths were the versions' only stand-in: no checksum for them belongs in go.sum.
    sed -i "\#^${MODULE_PREFIX}/#d" "${mod}/go.sum"
    log "release-library: ${mod}: tidy"
  done
}

tag() {
  local mod name head existing
  check
  [ -z "$(git status --porcelain)" ] || die "release-library: the work tree has changes: tag a commit"
  head=$(git rev-parse HEAD)
  for mod in "${LIBRARY_MODULES[@]}" "${TOOL_MODULE}"; do
    name="${mod}/${LIBRARY_VERSION}"
    existing=$(git rev-parse -q --verify "refs/tags/${name}^{commit}" || true)
    if [ -n "${existing}" ]; then
      [ "${existing}" = "${head}" ] || die "release-library: tag ${name} exists at ${existing}, not at HEAD ${head}: bump FORK_REVISION for a new release"
      log "release-library: ${name} already at HEAD"
      continue
    fi
    git tag -a -m "${MODULE_PREFIX}/${mod} ${LIBRARY_VERSION} (dra-failfast ${FORK_VERSION})" "${name}" "${head}"
    log "release-library: tagged ${name} at ${head:0:12}"
  done
}

case "${1:-}" in
  --check) check ;;
  --set-version) set_version ;;
  --tidy) tidy ;;
  --tag) tag ;;
  *) die "usage: hack/release-library.sh --check | --set-version | --tidy | --tag" ;;
esac
