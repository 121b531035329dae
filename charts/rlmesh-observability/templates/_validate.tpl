{{/*
Rules values.schema.json cannot express, checked before anything is applied.
lib/observability-values-schema.ts (observabilityCrossFieldErrors) holds the
same rules (a test keeps the two in step); their messages come from the generated _refusals.tpl.
*/}}
{{- define "obs.validate" -}}
{{- $g := .Values.grafana }}
{{- $p := .Values.prometheus }}
{{- $errors := list }}
{{- if and $g.enabled (eq $g.adminPassword "") (eq $g.adminPasswordSecretName "") }}
{{- $errors = append $errors (include "obs.refusal.grafanaNoPassword" (dict)) }}
{{- end }}
{{- if and (ne $g.adminPassword "") (ne $g.adminPasswordSecretName "") }}
{{- $errors = append $errors (include "obs.refusal.grafanaTwoPasswords" (dict)) }}
{{- end }}
{{- range $i, $rw := $p.remoteWrite }}
{{- $m := regexFind "/v1/cells/[^/]+/metrics$" $rw.url }}
{{- if and $m (ne $p.clusterLabel "") }}
{{- $cell := $m | trimPrefix "/v1/cells/" | trimSuffix "/metrics" }}
{{- if ne $cell $p.clusterLabel }}
{{- $errors = append $errors (include "obs.refusal.remoteWriteCell" (dict "index" $i "cell" $cell "clusterLabel" $p.clusterLabel)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $g.enabled (not $g.image.repository) }}
{{- $errors = append $errors (include "obs.refusal.grafanaNoImage" (dict)) }}
{{- end }}
{{- $ownTag := list "prometheus.image" }}
{{- if and $g.enabled $g.image.repository }}{{ $ownTag = append $ownTag "grafana.image" }}{{ end }}
{{- $errors = concat $errors (include "obs.imageErrors" (dict "images" (dict "prometheus.image" $p.image "grafana.image" $g.image) "ownTag" $ownTag) | fromJsonArray) }}
{{- if eq $p.clusterLabel "" }}
{{- $errors = append $errors (include "obs.refusal.noClusterLabel" (dict)) }}
{{- end }}
{{- /* not a rule of the values alone: the API's addresses may come from the cluster (_helpers.tpl) */}}
{{- if not (include "obs.apiServerAddresses" . | fromJsonArray) }}
{{- $errors = append $errors (include "obs.refusal.apiServerAddressesUnknown" (dict)) }}
{{- end }}
{{- if $errors }}
{{- fail (printf "\n\nrlmesh-observability: invalid values:\n  - %s\n" (join "\n  - " $errors)) }}
{{- end }}
{{- end }}

{{/*
The image rules (imageErrors() in lib/chart-values.ts): a digest, when set, is
sha256:<64 hex> (values.schema.json checks it too, but --skip-schema-validation
skips that); a block in .ownTag needs a tag or a digest. .images maps each
block's value path to the block; renders a JSON list.
*/}}
{{- define "obs.imageErrors" -}}
{{- $errors := list }}
{{- range $path, $img := .images }}
{{- if and $img.digest (not (regexMatch "^sha256:[a-f0-9]{64}$" $img.digest)) }}
{{- $errors = append $errors (include "obs.refusal.imageDigest" (dict "path" $path "digest" $img.digest)) }}
{{- end }}
{{- if and (has $path $.ownTag) (not $img.tag) (not $img.digest) }}
{{- $errors = append $errors (include "obs.refusal.imageTagMissing" (dict "path" $path)) }}
{{- end }}
{{- end }}
{{- toJson $errors }}
{{- end }}
