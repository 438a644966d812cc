#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Deploys the test DRA driver into the kind cluster the way drivers are deployed (deploy/test-driver):
# builds its image (static binary, hack/imagepack), loads it into every node, makes the webhook's
# serving certificate (a CA of its own, _output/kind/webhook), and applies the RBAC, the kubelet
# plugin DaemonSet, the webhook Deployment, Service and ValidatingWebhookConfiguration (caBundle
# filled in) and the DeviceClass. Waits until every node's plugin is ready and has published its
# devices, and the webhook answers. Run after make kind-up; idempotent.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1
kind_env

image=dra-failfast.local/dra-test-driver:v1
namespace=dra-test-driver
service=dra-test-driver-webhook
certs="${KIND_DIR}/webhook"

CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "${KIND_BIN}/dra-test-driver" ./cmd/dra-test-driver
"${OUTPUT_DIR}/bin/imagepack" --binary "${KIND_BIN}/dra-test-driver" --name "${image}" --output "${KIND_IMAGES}/driver/dra-test-driver.tar"
kind load image-archive "${KIND_IMAGES}/driver/dra-test-driver.tar" --name "${KIND_CLUSTER}" > /dev/null

if [ ! -f "${certs}/tls.crt" ]; then
  mkdir -p "${certs}"
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=dra-test-driver webhook CA" \
    -keyout "${certs}/ca.key" -out "${certs}/ca.crt" 2> /dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=${service}.${namespace}.svc" \
    -keyout "${certs}/tls.key" -out "${certs}/tls.csr" 2> /dev/null
  printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc\n' "${service}" "${service}" "${namespace}" "${service}" "${namespace}" > "${certs}/san.ext"
  openssl x509 -req -in "${certs}/tls.csr" -CA "${certs}/ca.crt" -CAkey "${certs}/ca.key" -CAcreateserial \
    -days 365 -extfile "${certs}/san.ext" -out "${certs}/tls.crt" 2> /dev/null
  chmod 0644 "${certs}/tls.key" # the webhook runs as a non-root user and reads it from the Secret
fi

kubectl apply -f deploy/test-driver/rbac.yaml > /dev/null
kubectl -n "${namespace}" create secret tls "${service}-tls" --cert "${certs}/tls.crt" --key "${certs}/tls.key" \
  --dry-run=client -o yaml | kubectl apply -f - > /dev/null
kubectl apply -f deploy/test-driver/kubelet-plugin.yaml > /dev/null
sed "s#caBundle: CA_BUNDLE#caBundle: $(base64 -w0 < "${certs}/ca.crt")#" deploy/test-driver/webhook.yaml | kubectl apply -f - > /dev/null
kubectl apply -f demo/deviceclass.yaml > /dev/null
kubectl -n "${namespace}" rollout status daemonset/dra-test-driver-kubelet-plugin --timeout=3m > /dev/null
kubectl -n "${namespace}" rollout status deployment/"${service}" --timeout=3m > /dev/null
nodes=$(kubectl get nodes -o name | wc -l)
for i in $(seq 1 60); do
  pools=$(kubectl get resourceslices -o jsonpath='{range .items[?(@.spec.driver=="driver.dra-failfast.test")]}{.spec.pool.name}{"\n"}{end}' | sort -u | wc -l)
  [ "${pools}" -ge "${nodes}" ] && break
  [ "${i}" -lt 60 ] || die "only ${pools} of ${nodes} nodes published their devices in 60 s"
  sleep 1
done
log "test driver deployed: kubelet plugin on ${nodes} nodes, devices published, webhook ready (${image})"
