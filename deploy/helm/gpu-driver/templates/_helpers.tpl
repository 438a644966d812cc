{{/*
Copyright 2026 The dra-failfast Authors.
SPDX-License-Identifier: Apache-2.0
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "gpu-driver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object's name: fullnameOverride, else "<release>-<name>", or just the release's
name when it contains the name. At most 40 bytes: the longest suffix added is 23.
*/}}
{{- define "gpu-driver.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "gpu-driver.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The service accounts of the kubelet plugin and of the webhook. */}}
{{- define "gpu-driver.pluginServiceAccount" -}}
{{- default (include "gpu-driver.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
{{- define "gpu-driver.webhookServiceAccount" -}}
{{- default (printf "%s-webhook" (include "gpu-driver.fullname" .)) .Values.serviceAccount.webhookName -}}
{{- end -}}

{{/* The driver's name: examples/gpu-driver's driverName constant. */}}
{{- define "gpu-driver.driverName" -}}
gpu.example.com
{{- end -}}

{{/* The kubelet plugin's service account, as the API server names its user. */}}
{{- define "gpu-driver.pluginUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "gpu-driver.pluginServiceAccount" . }}
{{- end -}}

{{- define "gpu-driver.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "gpu-driver.labels" -}}
app.kubernetes.io/name: {{ include "gpu-driver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The selector of one component's pods: include with (list . "webhook"). */}}
{{- define "gpu-driver.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "gpu-driver.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
Whether cert-manager's controller runs: a Deployment labelled as cert-manager's chart labels its
controller, with a ready replica. Definitions alone do not issue certificates. helm template
(no cluster) finds none.
*/}}
{{- define "gpu-driver.certManagerRunning" -}}
{{- $running := false -}}
{{- range ((lookup "apps/v1" "Deployment" "" "").items | default list) -}}
{{- $labels := .metadata.labels | default dict -}}
{{- if and (eq (get $labels "app.kubernetes.io/name") "cert-manager") (eq (get $labels "app.kubernetes.io/component") "controller") (gt (int ((.status | default dict).readyReplicas | default 0)) 0) -}}
{{- $running = true -}}
{{- end -}}
{{- end -}}
{{- $running -}}
{{- end -}}

{{/*
Where the webhook's certificate comes from: "cert-manager" or "chart" (values.yaml,
webhook.certificates.source). auto: cert-manager when the cluster serves cert-manager.io/v1 and its
controller runs (gpu-driver.certManagerRunning), else chart.
*/}}
{{- define "gpu-driver.certificateSource" -}}
{{- $source := .Values.webhook.certificates.source -}}
{{- if eq $source "auto" -}}
{{- if and (.Capabilities.APIVersions.Has "cert-manager.io/v1") (eq (include "gpu-driver.certManagerRunning" .) "true") -}}cert-manager{{- else -}}chart{{- end -}}
{{- else if or (eq $source "cert-manager") (eq $source "chart") -}}
{{- $source -}}
{{- else -}}
{{- fail (printf "webhook.certificates.source is %q: it must be auto, cert-manager or chart" $source) -}}
{{- end -}}
{{- end -}}

{{/* The Secret the webhook serves from: cert-manager's and the chart's differ, so that switching the source never has two owners write one Secret. */}}
{{- define "gpu-driver.certificateSecret" -}}
{{- if eq (include "gpu-driver.certificateSource" .) "cert-manager" -}}
{{ include "gpu-driver.fullname" . }}-webhook-cert
{{- else -}}
{{ include "gpu-driver.fullname" . }}-webhook-tls
{{- end -}}
{{- end -}}

{{/* The webhook Service's DNS names, as its serving certificate must carry them. */}}
{{- define "gpu-driver.webhookDNSNames" -}}
{{- $service := printf "%s-webhook" (include "gpu-driver.fullname" .) -}}
{{- list $service (printf "%s.%s" $service .Release.Namespace) (printf "%s.%s.svc" $service .Release.Namespace) | toJson -}}
{{- end -}}

{{/*
The chart's own CA and serving certificate, as JSON of base64 PEM (ca, crt, key, caBundle). Made
once: an upgrade keeps the pair of the Secret it finds (lookup; helm template finds none and makes a
new one each time). webhook.certificates.renew=true makes a new pair; the caBundle then carries the
old CA too, so that replicas still serving the old certificate (the kubelet updates a Secret's
files within a minute or two, and the webhook reloads them) are trusted until the next upgrade.
*/}}
{{- define "gpu-driver.chartTLS" -}}
{{- $name := printf "%s-webhook-tls" (include "gpu-driver.fullname" .) -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $name -}}
{{- $old := (($existing | default dict).data | default dict) -}}
{{- if and (hasKey $old "ca.crt") (hasKey $old "tls.crt") (hasKey $old "tls.key") (not .Values.webhook.certificates.renew) -}}
{{- dict "ca" (index $old "ca.crt") "crt" (index $old "tls.crt") "key" (index $old "tls.key") "caBundle" (index $old "ca.crt") | toJson -}}
{{- else -}}
{{- $days := int .Values.webhook.certificates.validityDays -}}
{{- $dnsNames := include "gpu-driver.webhookDNSNames" . | fromJsonArray -}}
{{- $ca := genCA (printf "%s webhook CA" (include "gpu-driver.fullname" .)) $days -}}
{{- $cert := genSignedCert (index $dnsNames 2) nil $dnsNames $days $ca -}}
{{- $bundle := $ca.Cert -}}
{{- if hasKey $old "ca.crt" -}}
{{- $bundle = printf "%s%s" $ca.Cert (index $old "ca.crt" | b64dec) -}}
{{- end -}}
{{- dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "caBundle" ($bundle | b64enc) | toJson -}}
{{- end -}}
{{- end -}}
