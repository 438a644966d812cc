#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when go.mod's replace block drifts from what hack/update-gomod.sh generates.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
cp go.mod go.sum "${tmp}/"
"${REPO_ROOT}/hack/update-gomod.sh"
if ! diff -u "${tmp}/go.mod" go.mod; then
  cp "${tmp}/go.mod" "${tmp}/go.sum" .
  die "go.mod replace block is out of date: run hack/update-gomod.sh"
fi
log "go.mod replace block matches k8s.io/kubernetes@${KUBE_VERSION}"
