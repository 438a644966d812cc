#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# The main job: builds the dra-failfast kubelet and a local single-node cluster, then runs the demo
# (cmd/dra-failfast-demo) on it. Extra arguments go to the demo, e.g. --keep.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"${REPO_ROOT}/hack/build.sh"
cd "${REPO_ROOT}" || exit 1
exec "${OUTPUT_DIR}/bin/dra-failfast-demo" "$@"
