{{/* Names, labels and cross-field value checks shared by every template. */}}

{{- define "resolver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "resolver.fullname" -}}
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

{{- define "resolver.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Shared by the worker and the migration Job, so one NetworkPolicy covers both. */}}
{{- define "resolver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "resolver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "resolver.labels" -}}
helm.sh/chart: {{ include "resolver.chart" . }}
{{ include "resolver.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: approved-action-resolver
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volumes and mounts every pod that connects to PostgreSQL gets (e.g. a database CA). */}}
{{- define "resolver.extraVolumes" -}}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "resolver.extraVolumeMounts" -}}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* HPA or KEDA owns the worker's replica count; the Deployment must then not set it. */}}
{{- define "resolver.autoscaled" -}}
{{- if or .Values.autoscaling.hpa.enabled .Values.autoscaling.keda.enabled }}true{{ end }}
{{- end }}

{{/* The due backlog of this release, as Prometheus sees it (KEDA and the adapter example). */}}
{{- define "resolver.dueBacklogQuery" -}}
{{- if .Values.autoscaling.query }}
{{- tpl .Values.autoscaling.query . }}
{{- else }}
{{- printf "max(%s{queue=\"due\", namespace=\"%s\", service=\"%s\"})" .Values.autoscaling.metricName .Release.Namespace (include "resolver.fullname" .) }}
{{- end }}
{{- end }}

{{- define "resolver.workerSelectorLabels" -}}
{{ include "resolver.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "resolver.apiSelectorLabels" -}}
{{ include "resolver.selectorLabels" . }}
app.kubernetes.io/component: api
{{- end }}

{{/* `resolver api` verifies tokens against these; without them it would not start. */}}
{{- define "resolver.validateApi" -}}
{{- $oidc := .Values.api.oidc }}
{{- range $name := list "issuer" "audience" }}
{{- if not (get $oidc $name) }}
{{- fail (printf "api.enabled needs api.oidc.%s: the manual-resolution API verifies every bearer token against the issuer (api.oidc.issuer), this API's audience (api.oidc.audience) and the issuer's keys (api.oidc.jwksUrl, or a JWKS in an existing ConfigMap, api.oidc.jwksConfigMap)" $name) }}
{{- end }}
{{- end }}
{{- if and $oidc.jwksUrl $oidc.jwksConfigMap }}
{{- fail "api.oidc.jwksUrl and api.oidc.jwksConfigMap are exclusive: set the issuer's keys one way" }}
{{- end }}
{{- if and $oidc.jwksUrl .Values.networkPolicy.enabled (not .Values.api.networkPolicy.jwksEgress) }}
{{- fail "networkPolicy.enabled with api.oidc.jwksUrl needs api.networkPolicy.jwksEgress (an egress rule to the identity provider, e.g. its ipBlock and port 443): the API fetches the keys at start-up and would not start" }}
{{- end }}
{{- if not (or $oidc.jwksUrl $oidc.jwksConfigMap) }}
{{- fail "api.enabled needs the issuer's keys: api.oidc.jwksUrl (its jwks_uri, refetched on rotation) or api.oidc.jwksConfigMap (a JWKS in an existing ConfigMap, re-read when it changes)" }}
{{- end }}
{{- if not .Values.api.auditSigning.kid }}
{{- fail "api.enabled needs api.auditSigning.kid: the API signs each authorization fact with its Ed25519 key (the Secret api.auditSigning.existingSecret) and records this key id with it" }}
{{- end }}
{{- end }}

{{- define "resolver.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "resolver.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "resolver.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "resolver.databaseSecret" -}}
{{- default (printf "%s-database" (include "resolver.fullname" .)) .Values.database.existingSecret }}
{{- end }}

{{/* The API pods' own database URL: the resolver_api role, never the replicas' runtime role. */}}
{{- define "resolver.apiDatabaseSecret" -}}
{{- default (printf "%s-api-database" (include "resolver.fullname" .)) .Values.api.database.existingSecret }}
{{- end }}

{{/* The API's fact-signing key (Ed25519, PEM): no database role ever sees it. */}}
{{- define "resolver.auditSigningSecret" -}}
{{- default (printf "%s-audit-signing" (include "resolver.fullname" .)) .Values.api.auditSigning.existingSecret }}
{{- end }}

{{- define "resolver.evidenceSecret" -}}
{{- default (printf "%s-evidence-database" (include "resolver.fullname" .)) .Values.evidenceDatabase.existingSecret }}
{{- end }}

{{- define "resolver.migrationSecret" -}}
{{- default (include "resolver.databaseSecret" .) .Values.migration.database.existingSecret }}
{{- end }}

{{- define "resolver.migrationSecretKey" -}}
{{- default .Values.database.secretKey .Values.migration.database.secretKey }}
{{- end }}

{{- define "resolver.receiptKeysSecret" -}}
{{- default (printf "%s-receipt-keys" (include "resolver.fullname" .)) .Values.receiptKeys.existingSecret }}
{{- end }}

{{/*
Rules the schema cannot express because they relate two values; they mirror the resolver's
own start-up checks (resolver/config.py) so a bad combination fails at `helm install`, not in
a crash loop.
*/}}
{{- define "resolver.validate" -}}
{{- $r := .Values.resolver }}
{{- if le (float64 .Values.terminationGracePeriodSeconds) (float64 $r.shutdownGraceSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be greater than resolver.shutdownGraceSeconds (%v): the kubelet would kill a replica while it still hands back its recovery leases" .Values.terminationGracePeriodSeconds $r.shutdownGraceSeconds) }}
{{- end }}
{{- $longest := float64 $r.defaultProviderTimeoutSeconds }}
{{- range $name, $entry := (.Values.providers.action_types | default dict) }}
{{- if and (kindIs "map" $entry) (hasKey $entry "timeout_seconds") }}
{{- $longest = maxf $longest $entry.timeout_seconds }}
{{- end }}
{{- end }}
{{- if le (float64 $r.recoveryLeaseSeconds) (addf $longest $r.commitMarginSeconds) }}
{{- fail (printf "resolver.recoveryLeaseSeconds (%v) must exceed the longest provider timeout (%v s, resolver.defaultProviderTimeoutSeconds or a provider's timeout_seconds) + resolver.commitMarginSeconds (%v): a lease must not lapse while its holder is inspecting" $r.recoveryLeaseSeconds $longest $r.commitMarginSeconds) }}
{{- end }}
{{- if lt (float64 $r.backoffMaxSeconds) (float64 $r.backoffBaseSeconds) }}
{{- fail (printf "resolver.backoffMaxSeconds (%v) must be >= resolver.backoffBaseSeconds (%v)" $r.backoffMaxSeconds $r.backoffBaseSeconds) }}
{{- end }}
{{- range $key, $_ := .Values.commonLabels }}
{{- if or (hasPrefix "app.kubernetes.io/" $key) (eq $key "helm.sh/chart") }}
{{- fail (printf "commonLabels must not set %s: the chart sets its app.kubernetes.io/* and helm.sh/chart labels itself (selectors and the alerts rely on them)" $key) }}
{{- end }}
{{- end }}
{{- $as := .Values.autoscaling }}
{{- if and $as.hpa.enabled $as.keda.enabled }}
{{- fail "autoscaling.hpa.enabled and autoscaling.keda.enabled are exclusive: KEDA creates its own HorizontalPodAutoscaler, and two would fight over the replica count" }}
{{- end }}
{{- if gt (int $as.minReplicas) (int $as.maxReplicas) }}
{{- fail (printf "autoscaling.minReplicas (%v) must be <= autoscaling.maxReplicas (%v)" $as.minReplicas $as.maxReplicas) }}
{{- end }}
{{- if and $as.keda.enabled (not $as.keda.prometheus.serverAddress) }}
{{- fail "autoscaling.keda.enabled needs autoscaling.keda.prometheus.serverAddress: the Prometheus that scrapes the resolver (e.g. http://prometheus-operated.monitoring.svc:9090)" }}
{{- end }}
{{- if .Values.api.enabled }}
{{- if ge (float64 .Values.api.preStopSleepSeconds) (float64 .Values.api.terminationGracePeriodSeconds) }}
{{- fail (printf "api.preStopSleepSeconds (%v) must be below api.terminationGracePeriodSeconds (%v): the API needs time after the pause to finish its requests" .Values.api.preStopSleepSeconds .Values.api.terminationGracePeriodSeconds) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Every RESOLVER_* setting that matters in a cluster. Integers go through int64 because Helm
holds numbers as float64 and would print 1000000 as 1e+06, which the resolver rejects.
*/}}
{{- define "resolver.settingsEnv" -}}
{{- $r := .Values.resolver -}}
- name: RESOLVER_DATABASE_POOLER
  value: {{ .Values.database.pooler | quote }}
- name: RESOLVER_PAGE_SIZE
  value: {{ $r.pageSize | int64 | quote }}
- name: RESOLVER_CADENCE_SECONDS
  value: {{ $r.cadenceSeconds | toString | quote }}
- name: RESOLVER_CADENCE_JITTER_RATIO
  value: {{ $r.cadenceJitterRatio | toString | quote }}
- name: RESOLVER_CADENCE_MIN_SECONDS
  value: {{ $r.cadenceMinSeconds | toString | quote }}
- name: RESOLVER_RECOVERY_LEASE_SECONDS
  value: {{ $r.recoveryLeaseSeconds | toString | quote }}
- name: RESOLVER_COMMIT_MARGIN_SECONDS
  value: {{ $r.commitMarginSeconds | toString | quote }}
- name: RESOLVER_BACKOFF_BASE_SECONDS
  value: {{ $r.backoffBaseSeconds | toString | quote }}
- name: RESOLVER_BACKOFF_MAX_SECONDS
  value: {{ $r.backoffMaxSeconds | toString | quote }}
- name: RESOLVER_DEFAULT_PROVIDER_TIMEOUT_SECONDS
  value: {{ $r.defaultProviderTimeoutSeconds | toString | quote }}
{{- if not (kindIs "invalid" $r.inspectConcurrency) }}
- name: RESOLVER_INSPECT_CONCURRENCY
  value: {{ $r.inspectConcurrency | int64 | quote }}
{{- end }}
- name: RESOLVER_LATE_EVIDENCE_WINDOW_SECONDS
  value: {{ $r.lateEvidenceWindowSeconds | toString | quote }}
- name: RESOLVER_LATE_EVIDENCE_CADENCE_SECONDS
  value: {{ $r.lateEvidenceCadenceSeconds | toString | quote }}
- name: RESOLVER_SHUTDOWN_GRACE_SECONDS
  value: {{ $r.shutdownGraceSeconds | toString | quote }}
- name: RESOLVER_STORAGE_RETRY_MAX_SECONDS
  value: {{ $r.storageRetryMaxSeconds | toString | quote }}
- name: RESOLVER_CONNECT_TIMEOUT_SECONDS
  value: {{ $r.connectTimeoutSeconds | toString | quote }}
- name: RESOLVER_STARTUP_TIMEOUT_SECONDS
  value: {{ $r.startupTimeoutSeconds | toString | quote }}
- name: RESOLVER_STATEMENT_TIMEOUT_MS
  value: {{ $r.statementTimeoutMs | int64 | quote }}
- name: RESOLVER_LOCK_TIMEOUT_MS
  value: {{ $r.lockTimeoutMs | int64 | quote }}
- name: RESOLVER_MAX_CONNECTIONS
  value: {{ $r.maxConnections | int64 | quote }}
- name: RESOLVER_LOG_LEVEL
  value: {{ $r.logLevel | quote }}
- name: RESOLVER_METRICS_CACHE_SECONDS
  value: {{ $r.metricsCacheSeconds | toString | quote }}
{{- end }}

{{- define "resolver.topologySpread" -}}
{{- if .Values.topologySpreadConstraints }}
{{- toYaml .Values.topologySpreadConstraints }}
{{- else -}}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "resolver.workerSelectorLabels" . | nindent 6 }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "resolver.workerSelectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}
