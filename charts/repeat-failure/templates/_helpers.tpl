{{/*
Names, labels and the few values several templates derive the same way.
*/}}

{{- define "repeat-failure.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "repeat-failure.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "repeat-failure.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The recommended labels. Call with (dict "ctx" $ "component" "injector").
*/}}
{{- define "repeat-failure.labels" -}}
helm.sh/chart: {{ include "repeat-failure.chart" .ctx }}
{{ include "repeat-failure.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: repeat-failure
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{- define "repeat-failure.selectorLabels" -}}
app.kubernetes.io/name: {{ include "repeat-failure.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "repeat-failure.injectorName" -}}
{{- printf "%s-injector" (include "repeat-failure.fullname" .) -}}
{{- end -}}

{{- define "repeat-failure.tlsSecretName" -}}
{{- printf "%s-injector-tls" (include "repeat-failure.fullname" .) -}}
{{- end -}}

{{/* The webhook configuration is cluster-scoped: the release namespace keeps two releases apart. */}}
{{- define "repeat-failure.webhookName" -}}
{{- printf "%s-injector-%s" (include "repeat-failure.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* The sidecar config ConfigMap has a fixed name: the injector mounts it from the pod's namespace. */}}
{{- define "repeat-failure.configMapName" -}}
repeat-failure-config
{{- end -}}

{{/* JSON list of the agent namespaces (empty agentNamespaces: the release namespace).
kube-system is never one (issue 29): a sidecar there would watch cluster components, and the
webhook would see the control plane's own pods. */}}
{{- define "repeat-failure.agentNamespaces" -}}
{{- $namespaces := .Values.agentNamespaces | default (list .Release.Namespace) -}}
{{- if has "kube-system" $namespaces -}}
{{- fail "kube-system cannot be an agent namespace: list the namespaces of the agent pods in agentNamespaces (an empty list means the release namespace)" -}}
{{- end -}}
{{- toJson (uniq $namespaces) -}}
{{- end -}}

{{/* The image reference, one value (README "The image"). */}}
{{- define "repeat-failure.image" -}}
{{- .Values.image.reference -}}
{{- end -}}

{{/*
"true" or "false": inject a native sidecar? auto = Kubernetes >= 1.29 (SidecarContainers on by
default). An explicit true below 1.28 would make the sidecar an ordinary init container that never
exits, holding every injected pod in Init: refuse it.
*/}}
{{- define "repeat-failure.nativeSidecar" -}}
{{- $v := .Values.injector.nativeSidecar -}}
{{- $kube := .Capabilities.KubeVersion.Version -}}
{{- if eq (toString $v) "auto" -}}
{{- semverCompare ">=1.29.0-0" $kube | toString -}}
{{- else if and $v (not (semverCompare ">=1.28.0-0" $kube)) -}}
{{- fail (printf "injector.nativeSidecar: true needs Kubernetes 1.28 or newer (this is %s); use auto or false" $kube) -}}
{{- else -}}
{{- toString $v -}}
{{- end -}}
{{- end -}}

{{/*
The injector's serving certificate when Helm issues it (no cert-manager), as JSON
{"ca","cert","key"} (PEM). Computed once per render and kept in .Values, because genCA gives a new
CA on every call and the Secret, the webhook's caBundle and the Deployment's checksum must agree.
An existing Secret from an earlier release is reused (lookup; empty under `helm template`) when it
was issued for the same Service hosts, so an upgrade does not rotate the certificate.
*/}}
{{- define "repeat-failure.tls" -}}
{{- if not (hasKey .Values "__repeatFailureTLS") -}}
{{- $svc := include "repeat-failure.injectorName" . -}}
{{- $hosts := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) -}}
{{- $tls := dict "hosts" (join "," $hosts) -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "repeat-failure.tlsSecretName" .) -}}
{{- $data := dig "data" (dict) $existing -}}
{{- $sameHosts := eq (dig "metadata" "annotations" "repeat-failure.hive.dev/tls-hosts" "" $existing) (get $tls "hosts") -}}
{{- if and $sameHosts (get $data "ca.crt") (get $data "tls.crt") (get $data "tls.key") -}}
{{- $_ := set $tls "ca" (get $data "ca.crt" | b64dec) -}}
{{- $_ := set $tls "cert" (get $data "tls.crt" | b64dec) -}}
{{- $_ := set $tls "key" (get $data "tls.key" | b64dec) -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" $svc) 3650 -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc .Release.Namespace) nil $hosts 3650 $ca -}}
{{- $_ := set $tls "ca" $ca.Cert -}}
{{- $_ := set $tls "cert" $cert.Cert -}}
{{- $_ := set $tls "key" $cert.Key -}}
{{- end -}}
{{- $_ := set .Values "__repeatFailureTLS" $tls -}}
{{- end -}}
{{- toJson (get .Values "__repeatFailureTLS") -}}
{{- end -}}

{{/* The fix-loop escalation component's objects (Deployment, Service, ConfigMap, Secret, PVC, ...). */}}
{{- define "repeat-failure.fixloopName" -}}
{{- printf "%s-fixloop" (include "repeat-failure.fullname" .) -}}
{{- end -}}

{{/* The Secret holding the fixloop's GitHub token: the chart's, or fixloop.github.existingSecret. */}}
{{- define "repeat-failure.fixloopSecretName" -}}
{{- .Values.fixloop.github.existingSecret | default (include "repeat-failure.fixloopName" .) -}}
{{- end -}}

{{/*
The fixloop's config file, fixloop.yaml: the `fixloop.config` values with the two paths the chart
owns (where the token Secret and the ledger volume are mounted), or, with fixloop.github.app.id,
`github_app` (the App, and where its private key is mounted) instead of `token_file`. Fails,
naming the value, on what the values schema cannot say: no repository while enabled, a
repository listed twice in another case (the fixloop refuses it), and not exactly one
credential (a token, or an App with one private key source).
*/}}
{{- define "repeat-failure.fixloopConfig" -}}
{{- $f := .Values.fixloop -}}
{{- if not $f.config.repositories -}}
{{- fail "fixloop.enabled: true needs fixloop.config.repositories: at least one GitHub repository (owner/name) whose pull requests the fixloop sweeps" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $f.config.repositories -}}
{{- if hasKey $seen (lower .) -}}
{{- fail (printf "fixloop.config.repositories: %s and %s are the same repository (GitHub names are case-insensitive): list it once" (get $seen (lower .)) .) -}}
{{- end -}}
{{- $_ := set $seen (lower .) . -}}
{{- end -}}
{{- $app := $f.github.app | default dict -}}
{{- if $app.id -}}
{{- if $f.github.token -}}
{{- fail "fixloop.github: give either a token (fixloop.github.token) or a GitHub App (fixloop.github.app.id), not both" -}}
{{- end -}}
{{- if and $app.privateKey $f.github.existingSecret -}}
{{- fail "fixloop.github.app: give the private key either as fixloop.github.app.privateKey (the chart makes a Secret) or in fixloop.github.existingSecret (key fixloop.github.app.existingSecretKey), not both" -}}
{{- end -}}
{{- if not (or $app.privateKey $f.github.existingSecret) -}}
{{- fail "fixloop.github.app.id needs the App's private key: set fixloop.github.app.privateKey (the chart makes a Secret) or fixloop.github.existingSecret (a Secret in the release namespace, key fixloop.github.app.existingSecretKey, default private-key.pem)" -}}
{{- end -}}
{{- else -}}
{{- if $app.privateKey -}}
{{- fail "fixloop.github.app.privateKey is set without fixloop.github.app.id (the App ID or client ID)" -}}
{{- end -}}
{{- if $app.installationId -}}
{{- fail "fixloop.github.app.installationId is set without fixloop.github.app.id (the App ID or client ID)" -}}
{{- end -}}
{{- if and $f.github.token $f.github.existingSecret -}}
{{- fail "fixloop.github: give the token either as fixloop.github.token (the chart makes a Secret) or as fixloop.github.existingSecret (your Secret), not both" -}}
{{- end -}}
{{- if not (or $f.github.token $f.github.existingSecret) -}}
{{- fail "fixloop.enabled: true needs a GitHub token: set fixloop.github.token (the chart makes a Secret) or fixloop.github.existingSecret (a Secret in the release namespace, key fixloop.github.existingSecretKey, default token), or a GitHub App (fixloop.github.app.id)" -}}
{{- end -}}
{{- end -}}
{{- $section := merge (dict "ledger" "/data/fixloop.sqlite") (deepCopy $f.config) -}}
{{- if $app.id -}}
{{- $appId := $app.id -}}
{{- if kindIs "float64" $appId -}}{{- $appId = int64 $appId -}}{{- end -}}
{{- $github := dict "app_id" (toString $appId) "private_key_file" "/var/run/secrets/repeat-failure-fixloop/private-key.pem" -}}
{{- if $app.installationId -}}
{{- $_ := set $github "installation_id" (int64 $app.installationId) -}}
{{- end -}}
{{- $_ := set $section "github_app" $github -}}
{{- else -}}
{{- $_ := set $section "token_file" "/var/run/secrets/repeat-failure-fixloop/token" -}}
{{- end -}}
{{- dict "fixloop" $section | toYaml -}}
{{- end -}}
