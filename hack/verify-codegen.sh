#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when the generated Go code of api/ differs from what hack/update-codegen.sh produces.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
"${REPO_ROOT}/hack/update-codegen.sh" "${tmp}" 2>/dev/null
want=$(cd "${tmp}" && find api -name '*.pb.go' | sort)
have=$(find api -name '*.pb.go' | sort)
[ -n "${want}" ] || die "hack/update-codegen.sh generated no Go code from api/"
status=0
# Same set of files: no generated file missing, none left over from a removed .proto.
diff -u <(echo "${have}") <(echo "${want}") || status=1
for generated in ${want}; do
  if [ -f "${generated}" ]; then
    diff -u "${generated}" "${tmp}/${generated}" || status=1
  fi
done
[ "${status}" -eq 0 ] || die "generated code in api/ is out of date: run hack/update-codegen.sh"
log "generated code in api/ is up to date"
