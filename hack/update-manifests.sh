#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Renders the example driver's chart (deploy/helm/gpu-driver) into its plain manifests
# (deploy/gpu-driver/manifests.yaml): release gpu-driver in namespace gpu-driver, the namespace
# included, the webhook's certificate from cert-manager (no private key in the file). With --check
# (make verify): lints the chart, renders it both ways (cert-manager and the chart's own
# certificate) and fails when the committed manifests differ from a fresh render, or when the
# chart's version is not the library's.
#
# Usage: hack/update-manifests.sh [--check]
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

CHART=${GPU_DRIVER_CHART}
MANIFESTS=deploy/gpu-driver/manifests.yaml
# Any version the chart's kubeVersion admits: nothing in the chart depends on it.
RENDER_KUBE_VERSION=1.37.2

helm=$(helm_bin)

render() {
  printf '%s\n' "# Copyright 2026 The dra-failfast Authors." "# SPDX-License-Identifier: Apache-2.0" "" \
    "# GENERATED from ${CHART} by hack/update-manifests.sh: edit the chart, then run it." \
    "# The example driver (examples/gpu-driver) in namespace gpu-driver, its webhook's certificate from" \
    "# cert-manager (install cert-manager first). Without cert-manager, install the chart instead: it then" \
    "# makes the certificate itself (docs/driver-authors.md, \"Deploying the example driver\")."
  "${helm}" template gpu-driver "${CHART}" --namespace gpu-driver --kube-version "${RENDER_KUBE_VERSION}" \
    --api-versions cert-manager.io/v1 --set createNamespace=true --set webhook.certificates.source=cert-manager \
    --set image.tag=v1 # the tag hack/kind-deploy-driver.sh builds; the chart defaults to appVersion
}

if [ "${1:-}" = --check ]; then
  chart_version=$(sed -n 's/^version: //p' "${CHART}/Chart.yaml")
  [ "v${chart_version}" = "${LIBRARY_VERSION}" ] ||
    die "${CHART}/Chart.yaml: version ${chart_version}, the library's is ${LIBRARY_VERSION} (hack/lib.sh): they are released together"
  "${helm}" lint --strict "${CHART}" --kube-version "${RENDER_KUBE_VERSION}" > /dev/null || die "helm lint ${CHART} failed"
  "${helm}" template gpu-driver "${CHART}" --namespace gpu-driver --kube-version "${RENDER_KUBE_VERSION}" \
    --set webhook.certificates.source=chart > /dev/null || die "${CHART} does not render with its own certificate"
  # What the chart must do for any release name and replica count, and refuse.
  other=$("${helm}" template other-release "${CHART}" --namespace other --kube-version "${RENDER_KUBE_VERSION}" \
    --set webhook.certificates.source=chart --set webhook.replicas=1) || die "${CHART} does not render for release other-release"
  grep -A12 'podAntiAffinity:' <<<"${other}" | grep -q 'app.kubernetes.io/instance: other-release' ||
    die "${CHART}: the webhook's anti-affinity does not select the release's own pods (release other-release)"
  grep -A12 'kind: PodDisruptionBudget' <<<"${other}" | grep -q 'maxUnavailable: 1' ||
    die "${CHART}: the webhook's PodDisruptionBudget is not maxUnavailable 1 (with one replica, minAvailable 1 blocks drains)"
  ! grep -q '^  minAvailable:' <<<"${other}" || die "${CHART}: a PodDisruptionBudget with minAvailable"
  ! grep -q 'kind: NetworkPolicy' <<<"${other}" || die "${CHART}: a NetworkPolicy by default (it needs the operator's CIDRs)"
  if "${helm}" template x "${CHART}" --set webhook.networkPolicy.enabled=true > /dev/null 2>&1; then
    die "${CHART}: renders a NetworkPolicy without webhook.networkPolicy.apiServerCIDRs"
  fi
  policy=$("${helm}" template x "${CHART}" --set webhook.networkPolicy.enabled=true \
    --set 'webhook.networkPolicy.apiServerCIDRs={172.18.0.0/16,fc00:f853:ccd:e793::/64}') ||
    die "${CHART}: does not render a NetworkPolicy with CIDRs"
  grep -A30 'kind: NetworkPolicy' <<<"${policy}" | grep -q 'cidr: fc00:f853:ccd:e793::/64' ||
    die "${CHART}: the NetworkPolicy does not admit the CIDRs given"
  if "${helm}" template x "${CHART}" --set webhook.replica=3 > /dev/null 2>&1; then
    die "${CHART}: values.schema.json admits a misspelt value (webhook.replica)"
  fi
  diff -u "${MANIFESTS}" <(render) || die "${MANIFESTS} is not the chart's render: run hack/update-manifests.sh"
  log "update-manifests --check: ${CHART} lints, renders both ways and for another release with one replica, refuses a NetworkPolicy without CIDRs and misspelt values, and ${MANIFESTS} is its render"
  exit 0
fi
render > "${MANIFESTS}"
log "wrote ${MANIFESTS}"
