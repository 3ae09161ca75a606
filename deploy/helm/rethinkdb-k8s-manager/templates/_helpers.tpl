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

{{/* The servers' pod DNS names through the headless Service, comma-separated, each with a port when one is given:
rethinkdb-0.rethinkdb:29015,... for { replicas, port }. */}}
{{- define "rkm.serverAddresses" -}}
{{- $port := .port -}}
{{- $names := list -}}
{{- range $i := until (int .replicas) -}}
{{- $names = append $names (printf "rethinkdb-%d.rethinkdb%s" $i (ternary (printf ":%v" $port) "" (not (empty $port)))) -}}
{{- end -}}
{{- join "," $names -}}
{{- end }}

{{/* Holds on the query gates around a primary handover (docs/query-gate.md): with the proxies, their gates and
gate.hold.enabled. */}}
{{- define "rkm.gateHolds" -}}
{{- if and (include "rkm.proxies" .) .Values.gate.enabled .Values.gate.hold.enabled -}}true{{- end -}}
{{- end }}

{{/* Attached to a RethinkDB StatefulSet the chart did not install (rethinkdb.existing, docs/existing-statefulset.md):
then it renders no StatefulSet, RethinkDB Services, RethinkDB PodDisruptionBudget, proxies or gates. */}}
{{- define "rkm.existing" -}}
{{- if .Values.rethinkdb.existing.statefulSetName -}}true{{- end -}}
{{- end }}

{{/* The proxies (and their gates): proxy.enabled, unless attached to an existing StatefulSet. */}}
{{- define "rkm.proxies" -}}
{{- if and .Values.proxy.enabled (not (include "rkm.existing" .)) -}}true{{- end -}}
{{- end }}

{{/* The RethinkDB pods' labels: the existing StatefulSet's (rethinkdb.existing.podLabels), else app: rethinkdb. */}}
{{- define "rkm.podLabels" -}}
{{- if include "rkm.existing" . -}}
{{- toYaml .Values.rethinkdb.existing.podLabels -}}
{{- else -}}
app: rethinkdb
{{- end -}}
{{- end }}

{{/* The same as RETHINKDB_POD_SELECTOR: k=v pairs, comma-separated, sorted by key. */}}
{{- define "rkm.podSelector" -}}
{{- if include "rkm.existing" . -}}
{{- $terms := list -}}
{{- range $k, $v := .Values.rethinkdb.existing.podLabels -}}
{{- $terms = append $terms (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $terms -}}
{{- else -}}
app=rethinkdb
{{- end -}}
{{- end }}
