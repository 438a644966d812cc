#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Runs the whole e2e_node suite (test/e2e_node) against the fork's kubelet built with the Go race
# detector (_output/bin/kubelet-race). Fails on a failing test and on any "WARNING: DATA RACE" in the
# kubelet's log. Not in CI (the race build of the kubelet adds about 4.5 minutes on 2 cores after
# make build, and the instrumented kubelet slows every scenario); run it before a release or after
# changing the kubelet side. Needs root and the binaries of hack/build.sh, which it builds.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

[ "$(id -u)" -eq 0 ] || die "run as root: the e2e tests run a real kubelet and containerd"
hack/build.sh
timed "race-enabled kubelet" hack/build-kubelet.sh --race
e2e_suite_with _output/bin/kubelet-race "${OUTPUT_DIR}/test/e2e-race.log"
