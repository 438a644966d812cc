#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make kind-up: a three-node kind cluster (KIND_CONFIG, default deploy/kind/cluster.yaml) on this machine, nothing
# pulled from a registry: starts the container engine (hack/kind/engine.sh), builds the node images
# (hack/kind-image.sh, cached), creates the cluster with kind built from its Go module, and checks
# it: every node Ready, CoreDNS Running, and a pod on one worker reaches, through a Service's DNS
# name, a pod on the other. An existing cluster is checked, not recreated.
# kubectl: KUBECONFIG=_output/kind/kubeconfig (or eval "$(hack/kind-up.sh --print-env)").
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

if [ "${1:-}" = --print-env ]; then
  "${REPO_ROOT}/hack/kind/engine.sh" env
  echo "export KUBECONFIG=${KIND_KUBECONFIG}"
  echo "export PATH=${KIND_BIN}:${KIND_TOOLS_BIN}:\${PATH}"
  exit 0
fi

start=$(date +%s)
hack/kind/engine.sh start
kind_env
hack/kind-image.sh
# The config the cluster was created from, with its Kubernetes version, so that a cluster of
# another config or version is not reused.
created_from="${KIND_DIR}/cluster-config"
config=$(kind_cluster_config)
if kind get clusters 2>/dev/null | grep -qx "${KIND_CLUSTER}"; then
  [ "$(cat "${created_from}" 2>/dev/null)" = "${KIND_CONFIG} ${KUBE_VERSION}" ] ||
    die "cluster ${KIND_CLUSTER} exists, created from $(cat "${created_from}" 2>/dev/null || echo "an unknown config"), not ${KIND_CONFIG} ${KUBE_VERSION}: make kind-down first"
  log "cluster ${KIND_CLUSTER} (${KIND_CONFIG}, ${KUBE_VERSION}) exists: checking it"
else
  timed "kind create cluster (${KIND_CONFIG}, ${KUBE_VERSION})" kind create cluster --config "${config}" --kubeconfig "${KIND_KUBECONFIG}" --wait 5m
  echo "${KIND_CONFIG} ${KUBE_VERSION}" > "${created_from}"
fi
check_cluster() {
  kubectl wait --for=condition=Ready nodes --all --timeout=3m > /dev/null
  kubectl -n kube-system wait --for=condition=Ready pods -l k8s-app=kube-dns --timeout=3m > /dev/null
  log "nodes Ready: $(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name} ({.status.nodeInfo.kubeletVersion}) {end}'); CoreDNS Running"
  # Pod to Service to pod, across the two workers (on the one worker of a one-worker cluster).
  local server="${KIND_CLUSTER}-worker" client="${KIND_CLUSTER}-worker2"
  kubectl get node "${client}" > /dev/null 2>&1 || client=${server}
  kind load image-archive "${OUTPUT_DIR}/images/workload.tar" --name "${KIND_CLUSTER}" > /dev/null
  kubectl delete pod,service -l app=kind-net-check --ignore-not-found --wait > /dev/null
  kubectl apply -f - > /dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: kind-net-server, labels: {app: kind-net-check, role: server}}
spec:
  nodeName: ${server}
  containers: [{name: server, image: dra-failfast.local/workload:v1, args: [--mode=serve, --listen=:8080]}]
---
apiVersion: v1
kind: Service
metadata: {name: kind-net-check, labels: {app: kind-net-check}}
spec:
  selector: {app: kind-net-check, role: server}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: kind-net-client, labels: {app: kind-net-check}}
spec:
  nodeName: ${client}
  restartPolicy: Never
  containers:
  - {name: client, image: dra-failfast.local/workload:v1, args: [--mode=fetch, "--url=http://kind-net-check.default.svc.cluster.local", --exit-after=2m]}
YAML
  kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/kind-net-client --timeout=3m > /dev/null ||
    die "pod on ${client} did not reach the Service backed by ${server}: $(kubectl logs kind-net-client 2>&1 | tail -1)"
  log "network: $(kubectl logs kind-net-client | tail -1) (${client} -> Service -> ${server})"
  kubectl delete pod,service -l app=kind-net-check --wait=false > /dev/null
}
timed "cluster check" check_cluster
log "kind cluster ${KIND_CLUSTER} up in $(($(date +%s) - start))s; kubectl: eval \"\$(hack/kind-up.sh --print-env)\""
