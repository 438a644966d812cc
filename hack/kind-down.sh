#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make kind-down: deletes the kind cluster and kind's network, stops the container engine, and
# fails unless the host is as it was: no container, no network, no mount, no bridge, no iptables
# chain of the engine left. The images stay in the engine's state (_output/kind/docker) for the
# next make kind-up; rm -rf _output/kind removes everything.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

if [ "$(hack/kind/engine.sh status)" != stopped ]; then
  kind_env
  if kind get clusters 2>/dev/null | grep -qx "${KIND_CLUSTER}"; then
    timed "kind delete cluster" kind delete cluster --name "${KIND_CLUSTER}" --kubeconfig "${KIND_KUBECONFIG}"
  fi
  left=$(docker ps -aq)
  [ -z "${left}" ] || die "containers left in the engine: $(docker ps -a --format '{{.Names}}' | tr '\n' ' ')"
  docker network rm kind > /dev/null 2>&1 || true
  [ -z "$(docker network ls -q --filter driver=bridge)" ] || die "bridge networks left: $(docker network ls --filter driver=bridge --format '{{.Name}}')"
fi
hack/kind/engine.sh stop
rm -f "${KIND_KUBECONFIG}" "${KIND_DIR}/cluster-config"
