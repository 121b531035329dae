{{/*
Rules values.schema.json cannot express, checked before anything is applied.
lib/observability-values-schema.ts (observabilityCrossFieldErrors) holds the
same rules with the same messages; a test keeps the two in step.
*/}}
{{- define "obs.validate" -}}
{{- $g := .Values.grafana }}
{{- $p := .Values.prometheus }}
{{- $errors := list }}
{{- if and $g.enabled (eq $g.adminPassword "") (eq $g.adminPasswordSecretName "") }}
{{- $errors = append $errors "grafana.enabled: grafana.enabled is true but no admin password is given: set grafana.adminPassword or grafana.adminPasswordSecretName (a Secret in the release namespace), or leave grafana.enabled=false" }}
{{- end }}
{{- if and (ne $g.adminPassword "") (ne $g.adminPasswordSecretName "") }}
{{- $errors = append $errors "grafana.adminPassword: grafana.adminPassword and grafana.adminPasswordSecretName are both set: give one password source" }}
{{- end }}
{{- range $i, $rw := $p.remoteWrite }}
{{- $m := regexFind "/v1/cells/[^/]+/metrics$" $rw.url }}
{{- if and $m (ne $p.clusterLabel "") }}
{{- $cell := $m | trimPrefix "/v1/cells/" | trimSuffix "/metrics" }}
{{- if ne $cell $p.clusterLabel }}
{{- $errors = append $errors (printf "prometheus.remoteWrite.%d.url: prometheus.remoteWrite[%d].url writes to cluster %s but prometheus.clusterLabel is %s: use the same cluster id in both" $i $i $cell $p.clusterLabel) }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq $p.clusterLabel "" }}
{{- $errors = append $errors "prometheus.clusterLabel: prometheus.clusterLabel is empty: set it to the cluster's public id (Clusters shows it) so every series is labelled cluster=<id>" }}
{{- end }}
{{- if $errors }}
{{- fail (printf "\n\nrlmesh-observability: invalid values:\n  - %s\n" (join "\n  - " $errors)) }}
{{- end }}
{{- end }}
