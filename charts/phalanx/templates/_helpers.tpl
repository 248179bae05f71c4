{{/* Names, labels and the image, shared by every template. */}}

{{- define "phalanx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "phalanx.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "phalanx.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "phalanx.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: phalanx
{{- end }}

{{/* Selector labels of one component: call with (dict "root" $ "component" "webhook"). */}}
{{- define "phalanx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "phalanx.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "phalanx.componentLabels" -}}
{{ include "phalanx.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- /* No Phalanx image is published: the user builds one from the Dockerfile and names it. */}}
{{- define "phalanx.image" -}}
{{- if or (not .Values.image.repository) (eq .Values.image.repository "ghcr.io/phalanx-dev/phalanx") }}
{{- fail (printf "image.repository is required (got %q): no Phalanx image is published. Build one from the repository's Dockerfile, push it where the cluster pulls from, and install with --set image.repository=REGISTRY/phalanx --set image.tag=TAG (README.md, Install on a cluster, step 1)" .Values.image.repository) }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "phalanx.webhook.name" -}}{{ include "phalanx.fullname" . }}-webhook{{- end }}
{{- define "phalanx.scheduler.name" -}}{{ include "phalanx.fullname" . }}-scheduler{{- end }}
{{- define "phalanx.webhook.serviceName" -}}{{ include "phalanx.fullname" . }}-webhook{{- end }}
{{- define "phalanx.webhook.tlsSecretName" -}}{{ include "phalanx.fullname" . }}-webhook-tls{{- end }}
{{- define "phalanx.webhook.mutatingName" -}}{{ include "phalanx.fullname" . }}-mutating{{- end }}
{{- define "phalanx.webhook.validatingName" -}}{{ include "phalanx.fullname" . }}-validating{{- end }}
{{- define "phalanx.webhook.certificateName" -}}{{ include "phalanx.fullname" . }}-webhook{{- end }}
{{- define "phalanx.scheduler.leaseName" -}}{{ include "phalanx.fullname" . }}-scheduler{{- end }}
{{- define "phalanx.scheduler.serviceName" -}}{{ include "phalanx.fullname" . }}-scheduler{{- end }}
{{- define "phalanx.scheduler.frontProxyRoleName" -}}{{ include "phalanx.fullname" . }}-scheduler-front-proxy{{- end }}
{{- /* One group and version for every release: a cluster serves it from one scheduler. */}}
{{- define "phalanx.explainAPI.serviceName" -}}v1alpha1.explain.phalanx.dev{{- end }}

{{/* The DNS names of a Service, as a list: call with (dict "service" <name> "namespace" <ns>). */}}
{{- define "phalanx.serviceDNSNames" -}}
{{- $names := list .service (printf "%s.%s" .service .namespace) (printf "%s.%s.svc" .service .namespace) (printf "%s.%s.svc.cluster.local" .service .namespace) }}
{{- toYaml $names }}
{{- end }}

{{/*
The names the serving certificate carries besides the webhook Service's: the scheduler's Service, which
kube-apiserver verifies when it calls the explain API (as `<service>.<namespace>.svc`). YAML list, maybe empty.
*/}}
{{- define "phalanx.explainAPI.dnsNames" -}}
{{- if .Values.scheduler.explainAPI.enabled }}
{{- include "phalanx.serviceDNSNames" (dict "service" (include "phalanx.scheduler.serviceName" .) "namespace" .Release.Namespace) }}
{{- else }}
{{- toYaml list }}
{{- end }}
{{- end }}

{{- define "phalanx.webhook.serviceAccountName" -}}
{{- if .Values.webhook.serviceAccount.create }}
{{- default (include "phalanx.webhook.name" .) .Values.webhook.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.webhook.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "phalanx.scheduler.serviceAccountName" -}}
{{- if .Values.scheduler.serviceAccount.create }}
{{- default (include "phalanx.scheduler.name" .) .Values.scheduler.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.scheduler.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The webhook's CA bundle, base64, for caBundle. helm mode: the generated CA. self-managed: whatever the
running webhook last stored in its Secret, so that `helm upgrade` does not blank caBundle until the next
resync. cert-manager: empty (cainjector fills it).
*/}}
{{- define "phalanx.webhook.caBundle" -}}
{{- if eq .Values.certificates.mode "helm" }}
{{- (include "phalanx.helmCertificates" . | fromYaml).ca }}
{{- else if eq .Values.certificates.mode "self-managed" }}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "phalanx.webhook.tlsSecretName" .) }}
{{- if $secret }}{{ index ($secret.data | default dict) "ca.crt" | default "" }}{{ end }}
{{- end }}
{{- end }}

{{/*
helm mode: the CA and serving pair, base64. Reuses the Secret of a previous install so that upgrades keep
the certificate; otherwise generates once per render (memoised in .Values, shared by every template).
*/}}
{{- define "phalanx.helmCertificates" -}}
{{- if not (hasKey .Values "_phalanxGeneratedCertificates") }}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "phalanx.webhook.tlsSecretName" .) }}
{{- $certs := dict }}
{{- if and $secret (hasKey ($secret.data | default dict) "tls.crt") }}
{{- $certs = dict "ca" (index $secret.data "ca.crt") "crt" (index $secret.data "tls.crt") "key" (index $secret.data "tls.key") }}
{{- else }}
{{- $svc := include "phalanx.webhook.serviceName" . }}
{{- $ns := .Release.Namespace }}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) }}
{{- $names = concat $names (include "phalanx.explainAPI.dnsNames" . | fromYamlArray) }}
{{- $ca := genCA "phalanx-ca" (int .Values.certificates.caDays) }}
{{- $leaf := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $names (int .Values.certificates.days) $ca }}
{{- $certs = dict "ca" ($ca.Cert | b64enc) "crt" ($leaf.Cert | b64enc) "key" ($leaf.Key | b64enc) }}
{{- end }}
{{- $_ := set .Values "_phalanxGeneratedCertificates" $certs }}
{{- end }}
{{- toYaml (get .Values "_phalanxGeneratedCertificates") }}
{{- end }}

{{/* Security context of every Phalanx container and pod. */}}
{{- define "phalanx.containerSecurityContext" -}}
{{- toYaml .Values.securityContext }}
{{- end }}
