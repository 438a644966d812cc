#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when a file we own lacks the license header (Apache-2.0, SPDX form) in its first lines:
# Go, proto, shell, YAML, Makefile and Dockerfile sources. Generated Go code gets it from its
# .proto; the patch series is upstream's code and keeps upstream's headers.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

missing=()
while IFS= read -r file; do
  case "${file}" in
    staging-patches/*) continue ;;
    *.go | *.proto | *.sh | *.yaml | .ci/run | Makefile | */Dockerfile) ;;
    *) continue ;;
  esac
  [ -f "${file}" ] || continue
  head -n 5 "${file}" | grep -q 'SPDX-License-Identifier: Apache-2.0' || missing+=("${file}")
done < <(git ls-files --cached --others --exclude-standard)
if [ "${#missing[@]}" -gt 0 ]; then
  printf '  %s\n' "${missing[@]}"
  die "${#missing[@]} files lack the license header (see hack/verify-license.sh for its form)"
fi
log "every source file has the license header"
