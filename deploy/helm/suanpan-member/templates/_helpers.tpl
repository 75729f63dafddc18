{{- define "suanpan-member.fullname" -}}
{{- if contains "suanpan" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "suanpan-%s" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of one component: (list . "agent") */}}
{{- define "suanpan-member.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: suanpan-{{ index . 1 }}
app.kubernetes.io/instance: {{ $.Release.Name }}
{{- end -}}

{{- define "suanpan-member.labels" -}}
{{- $ := index . 0 -}}
{{ include "suanpan-member.selectorLabels" . }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
app.kubernetes.io/part-of: suanpan
helm.sh/chart: {{ printf "%s-%s" $.Chart.Name $.Chart.Version }}
suanpan.io/cluster: {{ $.Values.cluster.name | quote }}
{{- end -}}

{{- define "suanpan-member.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "suanpan-member.agentTokenSecret" -}}
{{- .Values.agent.token.existingSecret | default (printf "%s-agent-token" (include "suanpan-member.fullname" .)) -}}
{{- end -}}

{{/* Probe of an HTTP endpoint on loopback, from inside the container (the Python image has no curl). */}}
{{- define "suanpan-member.loopbackProbe" -}}
exec:
  command: [python3, -c, "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{{ index . 0 }}{{ index . 1 }}', timeout=3)"]
{{- end -}}
