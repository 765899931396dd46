{{/* Names, labels and the host configuration, shared by every template. */}}

{{- define "wasm-deployer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wasm-deployer.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Cluster-scoped objects (ClusterRoles, their bindings): the full name and the release
       namespace, so releases of one name in two namespaces never claim the same object. */}}
{{- define "wasm-deployer.clusterScopedName" -}}
{{- printf "%s-%s" (include "wasm-deployer.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" }}
{{- end }}

{{- define "wasm-deployer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wasm-deployer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "wasm-deployer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "wasm-deployer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "wasm-deployer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "wasm-deployer.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "wasm-deployer.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding the Landscaper cluster's kubeconfig, or "" for the host's own cluster. */}}
{{- define "wasm-deployer.landscaperKubeconfigSecret" -}}
{{- with .Values.deployer.landscaperClusterKubeconfig }}
{{- if .secretRef }}
{{- .secretRef }}
{{- else if .kubeconfig }}
{{- printf "%s-landscaper-kubeconfig" (include "wasm-deployer.fullname" $) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "wasm-deployer.pluginsNamespace" -}}
{{- default .Release.Namespace .Values.plugins.namespace }}
{{- end }}

{{- define "wasm-deployer.containerNamespace" -}}
{{- default .Release.Namespace .Values.container.namespace }}
{{- end }}

{{- define "wasm-deployer.maxReplicas" -}}
{{- max (int .Values.replicaCount) (int .Values.hpa.maxReplicas) }}
{{- end }}

{{/*
The host configuration file (README: "Configuration reference"), as YAML. Only keys with a value
are written: the host refuses unknown keys and nulls where it expects a section.
*/}}
{{- define "wasm-deployer.config" -}}
{{- $v := .Values }}
{{- $c := dict "name" "wasm-deployer" }}
{{- $_ := set $c "identity" (default (include "wasm-deployer.fullname" .) $v.deployer.identity) }}
{{- with $v.deployer.namespace }}{{ $_ := set $c "namespace" . }}{{ end }}
{{- with $v.deployer.targetSelector }}{{ $_ := set $c "targetSelectors" . }}{{ end }}
{{- $_ := set $c "workers" (int $v.deployer.controller.workers) }}
{{- $_ := set $c "events" $v.events }}
{{- $_ := set $c "itemCache" $v.itemCache }}
{{- $_ := set $c "requeueInterval" $v.requeueInterval }}
{{- $_ := set $c "hpa" (dict "maxReplicas" (int (include "wasm-deployer.maxReplicas" .))) }}
{{- $lock := dict }}
{{- range $k, $val := $v.locking }}
{{- if not (or (kindIs "invalid" $val) (eq (toString $val) "")) }}{{ $_ := set $lock $k $val }}{{ end }}
{{- end }}
{{- with $lock }}{{ $_ := set $c "locking" . }}{{ end }}
{{- $plugins := omit $v.plugins "builtin" "namespace" "configMapSelector" "verification" "sources" "perPlugin" }}
{{- /* without the built-in plugins: an empty directory (the writable cache volume holds no .wasm) */}}
{{- $_ := set $plugins "dir" (ternary "/plugins" "/var/cache/wasm-deployer" $v.plugins.builtin) }}
{{- $_ := set $plugins "cacheDir" "/var/cache/wasm-deployer/compiled" }}
{{- $_ := set $plugins "namespace" (include "wasm-deployer.pluginsNamespace" .) }}
{{- with $v.plugins.configMapSelector }}{{ $_ := set $plugins "configMapSelector" . }}{{ end }}
{{- with $v.plugins.verification }}{{ $_ := set $plugins "verification" . }}{{ end }}
{{- with $v.plugins.sources }}{{ $_ := set $plugins "sources" . }}{{ end }}
{{- with $v.plugins.perPlugin }}{{ $_ := set $plugins "perPlugin" . }}{{ end }}
{{- $_ := set $c "plugins" $plugins }}
{{- with $v.hooks }}{{ $_ := set $c "hooks" . }}{{ end }}
{{- $fetch := omit (deepCopy $v.fetch) "caBundle" }}
{{- $_ := set $fetch "cacheDir" "/var/cache/wasm-deployer/blobs" }}
{{- if $v.fetch.caBundle }}{{ $_ := set $fetch "caBundle" "/etc/wasm-deployer/config/ca-bundle.pem" }}{{ end }}
{{- $_ := set $c "fetch" $fetch }}
{{- with $v.http }}{{ $_ := set $c "http" . }}{{ end }}
{{- $container := omit $v.container "namespace" "hostImage" }}
{{- $_ := set $container "namespace" (include "wasm-deployer.containerNamespace" .) }}
{{- $_ := set $container "hostImage" (default (include "wasm-deployer.image" .) $v.container.hostImage) }}
{{- $_ := set $c "container" $container }}
{{- $_ := set $c "crdManagement" (dict "deployCrd" $v.crds.wasmPlugin) }}
{{- $c = mergeOverwrite $c (deepCopy $v.extraConfig) }}
{{- toYaml $c }}
{{- end }}
