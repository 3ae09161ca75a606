{{/* Helpers of the rethinkdb-k8s-manager chart. Names and labels are the kustomize base's, fixed, so that the
default render equals deploy/k8s object for object. */}}

{{/* An image reference from { repository, tag }; the tag defaults to the chart's appVersion. */}}
{{- define "rkm.image" -}}
{{ .image.repository }}:{{ .image.tag | default .appVersion }}
{{- end }}

{{/* A ConfigMap value as a string. Helm reads numbers in values as float64, which print as 3.6e+06 from a
million on; a whole number prints as an integer. */}}
{{- define "rkm.configValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}
{{ int64 . }}
{{- else -}}
{{ . }}
{{- end -}}
{{- end }}

{{/* imagePullPolicy and imagePullSecrets, only when set. */}}
{{- define "rkm.pullPolicy" -}}
{{- with .image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{- define "rkm.pullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The token file the manager reads in auth mode static, and the file the hooks send. */}}
{{- define "rkm.staticTokenDir" -}}
/etc/rethinkdb-manager/auth
{{- end }}
