{{- define "gitfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gitfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "gitfleet.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "gitfleet.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gitfleet.selector" -}}
app.kubernetes.io/name: {{ include "gitfleet.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gitfleet.labels" -}}
{{ include "gitfleet.selector" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gitfleet
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "gitfleet.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The workers' ServiceAccount: syncs to `in-cluster` act as it (rbac.yaml binds it). */}}
{{- define "gitfleet.serviceAccount" -}}
{{- .Values.serviceAccount.name | default (printf "%s-worker" (include "gitfleet.fullname" .)) -}}
{{- end -}}

{{- define "gitfleet.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "gitfleet.fullname" .)) -}}
{{- end -}}

{{- define "gitfleet.ownRedis" -}}
{{- if and (not .Values.redis.external.url) (not .Values.redis.external.existingSecret) -}}true{{- end -}}
{{- end -}}

{{- define "gitfleet.redisHost" -}}
{{ include "gitfleet.fullname" . }}-redis
{{- end -}}

{{/* The environment both the API and the workers need: Redis and the credential key. */}}
{{- define "gitfleet.commonEnv" -}}
{{- if include "gitfleet.ownRedis" . }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "gitfleet.secretName" . }}
      key: redis-password
- name: GITFLEET_REDIS_URL
  value: redis://:$(REDIS_PASSWORD)@{{ include "gitfleet.redisHost" . }}:6379/0
{{- else if .Values.redis.external.existingSecret }}
- name: GITFLEET_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.external.existingSecret }}
      key: {{ .Values.redis.external.existingSecretKey }}
{{- else }}
- name: GITFLEET_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "gitfleet.fullname" . }}-redis-url
      key: redis-url
{{- end }}
- name: GITFLEET_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "gitfleet.secretName" . }}
      key: secret-key
- name: HOME
  value: /tmp
{{- end -}}

{{- define "gitfleet.spread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "gitfleet.selector" . | nindent 8 }}
{{- end -}}
