{{/* Full name: the release name, unless it already contains the chart name. */}}
{{- define "opm-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "opm-operator.serviceAccountName" -}}
{{- default (include "opm-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "opm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "opm-operator.labels" -}}
{{ include "opm-operator.selectorLabels" . }}
app.kubernetes.io/part-of: opm-operator
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* --allow-operator-identity: off, on or cluster. An unquoted YAML on/off/true/false
     arrives as a boolean: true means on, false off. Anything else fails the install. */}}
{{- define "opm-operator.allowOperatorIdentity" -}}
{{- $v := toString .Values.allowOperatorIdentity -}}
{{- if or (eq $v "on") (eq $v "true") -}}on
{{- else if eq $v "cluster" -}}cluster
{{- else if or (eq $v "off") (eq $v "false") (eq $v "") (eq $v "<nil>") -}}off
{{- else -}}{{ fail (printf "allowOperatorIdentity must be \"off\", \"on\" or \"cluster\", not %q" $v) }}
{{- end -}}
{{- end -}}
