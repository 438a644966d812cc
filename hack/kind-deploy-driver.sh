#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Deploys a DRA driver into the kind cluster the way drivers are deployed: builds its image (static
# binary, hack/imagepack) and loads it into every node, then
#   test-driver  cmd/dra-test-driver, the driver whose failures the tests choose (default): applies
#                deploy/test-driver (RBAC, kubelet plugin DaemonSet, webhook Deployment, Service and
#                ValidatingWebhookConfiguration) with a webhook certificate made here (a CA of its
#                own, _output/kind/test-driver-webhook), and the demo's DeviceClass;
#   gpu-driver   examples/gpu-driver, the example driver authors copy (built from its own module):
#                installs its Helm chart (deploy/helm/gpu-driver, release gpu-driver in namespace
#                gpu-driver; helm upgrade --install), whose webhook certificate comes from
#                cert-manager when the cluster serves it, else from the chart.
# Waits until the plugin runs on every node it is scheduled to and has published its devices
# there, and the webhook is ready. Run after make kind-up; idempotent.
#
# Usage: hack/kind-deploy-driver.sh [DRIVER...]
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1
kind_env

# webhook_certificate DIR SERVICE NAMESPACE: a CA and a serving certificate for SERVICE.NAMESPACE.svc.
webhook_certificate() {
  local dir=$1 service=$2 namespace=$3
  [ -f "${dir}/tls.crt" ] && return 0
  mkdir -p "${dir}"
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=${service} CA" \
    -keyout "${dir}/ca.key" -out "${dir}/ca.crt" 2> /dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=${service}.${namespace}.svc" \
    -keyout "${dir}/tls.key" -out "${dir}/tls.csr" 2> /dev/null
  printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc\n' "${service}" "${service}" "${namespace}" "${service}" "${namespace}" > "${dir}/san.ext"
  openssl x509 -req -in "${dir}/tls.csr" -CA "${dir}/ca.crt" -CAkey "${dir}/ca.key" -CAcreateserial \
    -days 365 -extfile "${dir}/san.ext" -out "${dir}/tls.crt" 2> /dev/null
  chmod 0644 "${dir}/tls.key" # the webhook runs as a non-root user and reads it from the Secret
}

deploy() {
  local name=$1 namespace service driver binary nodes manifests="deploy/$1" deviceclass=
  case "${name}" in
    test-driver)
      namespace=dra-test-driver driver=driver.dra-failfast.test deviceclass=demo/deviceclass.yaml
      CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "${KIND_BIN}/${name}" ./cmd/dra-test-driver
      ;;
    gpu-driver)
      namespace=gpu-driver driver=gpu.example.com
      (cd "${EXAMPLE_MODULE}" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "${KIND_BIN}/${name}" .)
      ;;
    *) die "unknown driver ${name} (test-driver or gpu-driver)" ;;
  esac
  service="${namespace}-webhook"
  binary="${KIND_BIN}/${name}"
  local image="dra-failfast.local/${namespace}:v1" certs="${KIND_DIR}/${name}-webhook"
  "${OUTPUT_DIR}/bin/imagepack" --binary "${binary}" --name "${image}" --output "${KIND_IMAGES}/driver/${name}.tar"
  kind load image-archive "${KIND_IMAGES}/driver/${name}.tar" --name "${KIND_CLUSTER}" > /dev/null
  if [ "${name}" = gpu-driver ]; then
    # The chart leaves the namespace to the installer (createNamespace: false): made here with the
    # privileged Pod Security level its kubelet plugin's host paths need, before any pod.
    kubectl create namespace "${namespace}" --dry-run=client -o yaml | kubectl apply -f - > /dev/null
    kubectl label namespace "${namespace}" --overwrite pod-security.kubernetes.io/enforce=privileged > /dev/null
    "$(helm_bin)" upgrade --install "${name}" "${GPU_DRIVER_CHART}" --namespace "${namespace}" \
      --set image.repository="${image%:*}" --set image.tag="${image##*:}" > /dev/null
  else
    webhook_certificate "${certs}" "${service}" "${namespace}"
    kubectl apply -f "${manifests}/rbac.yaml" > /dev/null
    kubectl -n "${namespace}" create secret tls "${service}-tls" --cert "${certs}/tls.crt" --key "${certs}/tls.key" \
      --dry-run=client -o yaml | kubectl apply -f - > /dev/null
    kubectl apply -f "${manifests}/kubelet-plugin.yaml" > /dev/null
    sed "s#caBundle: CA_BUNDLE#caBundle: $(base64 -w0 < "${certs}/ca.crt")#" "${manifests}/webhook.yaml" | kubectl apply -f - > /dev/null
    kubectl apply -f "${deviceclass}" > /dev/null
  fi
  kubectl -n "${namespace}" rollout status "daemonset/${namespace}-kubelet-plugin" --timeout=3m > /dev/null
  kubectl -n "${namespace}" rollout status "deployment/${service}" --timeout=3m > /dev/null
  # The webhook's failurePolicy is Fail: until its Service has a ready endpoint, objects with the
  # driver's config are denied. Rolled out is not yet routed: wait for the endpoint too.
  local i endpoints=""
  for i in $(seq 1 60); do
    endpoints=$(kubectl -n "${namespace}" get endpointslices -l "kubernetes.io/service-name=${service}" \
      -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' | grep -c . || true)
    [ "${endpoints}" -ge 1 ] && break
    [ "${i}" -lt 60 ] || die "${name}: the webhook Service ${service} has no ready endpoint after 60 s"
    sleep 1
  done
  nodes=$(kubectl -n "${namespace}" get daemonset "${namespace}-kubelet-plugin" -o jsonpath='{.status.desiredNumberScheduled}')
  local pools
  for i in $(seq 1 60); do
    pools=$(kubectl get resourceslices -o jsonpath="{range .items[?(@.spec.driver==\"${driver}\")]}{.spec.pool.name}{\"\\n\"}{end}" | sort -u | grep -c . || true)
    [ "${pools}" -ge "${nodes}" ] && break
    [ "${i}" -lt 60 ] || die "${name}: only ${pools} of ${nodes} nodes published their devices in 60 s"
    sleep 1
  done
  log "${name} deployed: kubelet plugin on ${nodes} nodes, devices published, webhook ready (${image})"
}

mkdir -p "${KIND_IMAGES}/driver"
drivers=("$@")
[ ${#drivers[@]} -gt 0 ] || drivers=(test-driver)
for name in "${drivers[@]}"; do
  deploy "${name}"
done
