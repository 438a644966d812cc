#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Checks that a driver outside this repository can adopt the driver library with standard Go
# commands. The example driver (EXAMPLE_MODULE) is copied to a scratch directory, as a driver
# author would copy it; its replace lines are pointed at this checkout's library modules (the only
# replaces it may have); then go mod tidy, go build, go vet and go test -race run there, and the
# module graphs of the example and of every library module must hold no k8s.io/kubernetes and
# none of the harness's heavy modules. Fails if the library imports the root module or a heavy
# package again.
#   ADOPTION_EMPTY_MODCACHE=1   start from an empty module cache (everything from the proxy)
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

# Modules that only the kubelet side or the harness may need.
heavy='^(k8s\.io/kubernetes|sigs\.k8s\.io/kind|go\.etcd\.io/etcd/server/v3|github\.com/dra-failfast/dra-failfast) '

scratch=$(mktemp -d)
trap 'chmod -R u+w "${scratch}" 2>/dev/null; rm -rf "${scratch}"' EXIT
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
if [ "${ADOPTION_EMPTY_MODCACHE:-}" = 1 ]; then
  export GOMODCACHE="${scratch}/modcache"
fi

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

for mod in "${LIBRARY_MODULES[@]}"; do
  (cd "${mod}" && no_heavy_modules "library module ${mod}")
done

example="${scratch}/$(basename "${EXAMPLE_MODULE}")"
cp -r "${EXAMPLE_MODULE}" "${example}"
cd "${example}" || exit 1
mapfile -t replaced < <(go mod edit -json | tr -d '\n\t ' | grep -o '"Old":{"Path":"[^"]*"' | sed 's/.*"Path":"//; s/"$//')
expected=(github.com/dra-failfast/dra-failfast/api github.com/dra-failfast/dra-failfast/pkg/failfastplugin)
if [ "$(printf '%s\n' "${replaced[@]}" | sort)" != "$(printf '%s\n' "${expected[@]}" | sort)" ]; then
  die "verify-adoption: ${EXAMPLE_MODULE}/go.mod must replace exactly the library modules (${expected[*]}) with local paths, it replaces: ${replaced[*]:-nothing}"
fi
go mod edit \
  -replace="github.com/dra-failfast/dra-failfast/api=${REPO_ROOT}/api" \
  -replace="github.com/dra-failfast/dra-failfast/pkg/failfastplugin=${REPO_ROOT}/pkg/failfastplugin"

timed "verify-adoption: go mod tidy" go mod tidy
timed "verify-adoption: go build ./..." go build ./...
timed "verify-adoption: go vet ./..." go vet ./...
timed "verify-adoption: go test ./..." go test -race -count=1 -v ./...
no_heavy_modules "the example driver (${EXAMPLE_MODULE})"
log "verify-adoption: an outside module builds, vets and tests a driver against the library"
