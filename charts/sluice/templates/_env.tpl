{{/*
sluice.operatorEnv: the operator's configuration (operator/sluice_operator/config.py
reads SLUICE_OPERATOR_*). JSON-valued variables carry structured values as-is.
*/}}
{{- define "sluice.operatorEnv" -}}
{{- $pullSecrets := list -}}
{{- range .Values.imagePullSecrets }}{{ $pullSecrets = append $pullSecrets .name }}{{ end -}}
- name: SLUICE_OPERATOR_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: SLUICE_OPERATOR_LOG_LEVEL
  value: {{ .Values.operator.logLevel | quote }}
- name: SLUICE_OPERATOR_WATCH_NAMESPACES
  value: {{ join "," .Values.operator.watchNamespaces | quote }}
- name: SLUICE_OPERATOR_METRICS_PORT
  value: {{ .Values.operator.metricsPort | quote }}
- name: SLUICE_OPERATOR_LIVENESS_PORT
  value: {{ .Values.operator.livenessPort | quote }}
- name: SLUICE_OPERATOR_METAL_LABEL_KEY
  value: {{ .Values.metalLabelKey | quote }}
- name: SLUICE_OPERATOR_DEFAULT_PROVISIONER
  value: {{ .Values.defaultProvisioner | quote }}
- name: SLUICE_OPERATOR_SERVER_IMAGE
  value: {{ include "sluice.image" .Values.server.image | quote }}
- name: SLUICE_OPERATOR_SERVER_REPLICAS
  value: {{ .Values.server.replicas | quote }}
- name: SLUICE_OPERATOR_SERVER_RESOURCES
  value: {{ toJson .Values.server.resources | quote }}
- name: SLUICE_OPERATOR_SERVER_PLACEMENT
  value: {{ toJson .Values.server.placement | quote }}
- name: SLUICE_OPERATOR_BENCH_IMAGE
  value: {{ include "sluice.image" .Values.bench.image | quote }}
- name: SLUICE_OPERATOR_REDIS_IMAGE
  value: {{ include "sluice.image" .Values.redis.image | quote }}
- name: SLUICE_OPERATOR_REDIS_OPERATOR_IMAGE
  value: {{ .Values.redisOperator.image | quote }}
- name: SLUICE_OPERATOR_REDIS_SENTINEL_IMAGE
  value: {{ .Values.redisOperator.sentinelImage | quote }}
- name: SLUICE_OPERATOR_IMAGE_PULL_POLICY
  value: {{ .Values.operator.image.pullPolicy | quote }}
- name: SLUICE_OPERATOR_IMAGE_PULL_SECRETS
  value: {{ join "," $pullSecrets | quote }}
- name: SLUICE_OPERATOR_CATALOG_URI
  value: {{ .Values.catalog.uri | quote }}
- name: SLUICE_OPERATOR_CATALOG_STORAGE_SIZE
  value: {{ .Values.catalog.storageSize | quote }}
- name: SLUICE_OPERATOR_NETWORK_POLICIES
  value: {{ .Values.networkPolicies.enabled | quote }}
- name: SLUICE_OPERATOR_NETWORK_POLICY_CIDRS
  value: {{ join "," .Values.networkPolicies.extraCIDRs | quote }}
- name: SLUICE_OPERATOR_METRICS_NAMESPACE_SELECTOR
  value: {{ toJson .Values.networkPolicies.metricsNamespaceSelector | quote }}
- name: SLUICE_OPERATOR_SERVER_TLS
  value: {{ .Values.tls.enabled | quote }}
- name: SLUICE_OPERATOR_TLS_ISSUER
  value: {{ .Values.tls.issuer | quote }}
- name: SLUICE_OPERATOR_TLS_CERT_DAYS
  value: {{ .Values.tls.certDays | quote }}
- name: SLUICE_OPERATOR_TLS_RENEW_DAYS
  value: {{ .Values.tls.renewDays | quote }}
- name: SLUICE_OPERATOR_COMMON_LABELS
  value: {{ toJson .Values.commonLabels | quote }}
- name: SLUICE_OPERATOR_POD_SECURITY_CONTEXT
  value: {{ toJson .Values.podSecurityContext | quote }}
- name: SLUICE_OPERATOR_CONTAINER_SECURITY_CONTEXT
  value: {{ toJson .Values.containerSecurityContext | quote }}
- name: SLUICE_OPERATOR_SERVICE_MONITOR
  {{- /* The chart's cluster-wide ServiceMonitor covers the servers; the operator then adds none. */}}
  value: {{ not (and .Values.serviceMonitor.enabled .Values.serviceMonitor.servers) | quote }}
- name: SLUICE_OPERATOR_SERVICE_MONITOR_LABELS
  value: {{ toJson .Values.serviceMonitor.labels | quote }}
- name: SLUICE_OPERATOR_SMTP_URL
  value: {{ .Values.notifications.smtpUrl | quote }}
- name: SLUICE_OPERATOR_SMTP_URL_SECRET
  value: {{ with .Values.notifications.smtpUrlSecret }}{{ if .name }}{{ printf "%s/%s" .name .key | quote }}{{ else }}""{{ end }}{{ end }}
- name: SLUICE_OPERATOR_REQUIRE_CONFIRMATION
  value: {{ .Values.notifications.requireConfirmation | quote }}
{{- /* null is the server's default; 0 is a rate (no cap), so no "default" here. */}}
- name: SLUICE_OPERATOR_MIGRATE_BATCH
  value: {{ if kindIs "invalid" .Values.server.migration.batch }}""{{ else }}{{ .Values.server.migration.batch | int | toString | quote }}{{ end }}
- name: SLUICE_OPERATOR_MIGRATE_RATE
  value: {{ if kindIs "invalid" .Values.server.migration.rate }}""{{ else }}{{ .Values.server.migration.rate | int | toString | quote }}{{ end }}
- name: SLUICE_OPERATOR_SERVER_GOMAXPROCS
  value: {{ if kindIs "invalid" .Values.server.gomaxprocs }}""{{ else }}{{ .Values.server.gomaxprocs | int | toString | quote }}{{ end }}
- name: SLUICE_OPERATOR_SIGNED_URL_SECRET
  value: {{ with .Values.notifications.signedUrlSecret }}{{ if .name }}{{ printf "%s/%s" .name .key | quote }}{{ else }}""{{ end }}{{ end }}
- name: SLUICE_OPERATOR_AUTH_MODE
  value: {{ .Values.auth.mode | quote }}
- name: SLUICE_OPERATOR_AUTH_AUDIENCE
  value: {{ .Values.auth.kubernetes.audience | quote }}
{{- with .Values.auth.keystone }}
- name: SLUICE_OPERATOR_KEYSTONE_URL
  value: {{ .url | quote }}
- name: SLUICE_OPERATOR_KEYSTONE_USERNAME
  value: {{ .username | quote }}
- name: SLUICE_OPERATOR_KEYSTONE_PROJECT
  value: {{ .project | quote }}
- name: SLUICE_OPERATOR_KEYSTONE_USER_DOMAIN
  value: {{ .userDomain | quote }}
- name: SLUICE_OPERATOR_KEYSTONE_PROJECT_DOMAIN
  value: {{ .projectDomain | quote }}
- name: SLUICE_OPERATOR_KEYSTONE_PASSWORD_SECRET
  value: {{ with .passwordSecret }}{{ if .name }}{{ printf "%s/%s" .name .key | quote }}{{ else }}""{{ end }}{{ end }}
{{- end }}
- name: SLUICE_OPERATOR_AUTH_TOKENS_SECRET
  value: {{ with .Values.auth.tokensSecret }}{{ if .name }}{{ printf "%s/%s" .name .key | quote }}{{ else }}""{{ end }}{{ end }}
- name: SLUICE_OPERATOR_ENCRYPTION_KEY_SECRET
  value: {{ with .Values.encryption.keySecret }}{{ if .name }}{{ printf "%s/%s" .name .key | quote }}{{ else }}""{{ end }}{{ end }}
{{- end -}}
