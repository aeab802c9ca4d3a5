{{/* The release's full name: the release name, with the chart's unless it has it already. */}}
{{- define "switchyard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Names of the parts, from the full name. */}}
{{- define "switchyard.routerName" -}}
{{- printf "%s-router" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "switchyard.redisName" -}}
{{- printf "%s-redis" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "switchyard.poolName" -}}
{{- default (include "switchyard.fullname" .) .Values.inferencePool.name -}}
{{- end -}}

{{/* Labels every object has; selectorLabels (with a component) select a part's pods. */}}
{{- define "switchyard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "switchyard.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
