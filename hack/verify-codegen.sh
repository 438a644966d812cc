#!/usr/bin/env bash
# Fails when the generated Go code of api/ differs from what hack/update-codegen.sh produces.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
"${REPO_ROOT}/hack/update-codegen.sh" "${tmp}" 2>/dev/null
status=0
for generated in $(cd "${tmp}" && find api -name '*.pb.go' | sort); do
  diff -u "${generated}" "${tmp}/${generated}" || status=1
done
[ "${status}" -eq 0 ] || die "generated code in api/ is out of date: run hack/update-codegen.sh"
log "generated code in api/ is up to date"
