{{/*
knobErrors() in lib/chart-knobs.ts: label and annotation keys of commonLabels, podLabels and
podAnnotations (well-formed, not the chart's own), each component's extraEnv (not a name
the chart sets) and the annotation keys of its serviceAccount (well-formed). Returns the
refusals as a JSON list; rlmesh.validate adds them to its own.
The lists of keys, prefixes and names are CHART_LABEL_KEYS, CHART_KEY_PREFIXES,
CHART_ANNOTATION_PREFIXES and CHART_ENV_NAMES (a test keeps them equal).
*/}}
{{- define "rlmesh.knobErrors" -}}
{{- $v := .Values }}
{{- $errors := list }}
{{- /* LABEL_KEY of lib/chart-knobs.ts; a key also has at most 317 characters (isKey()) */}}
{{- $keyPattern := `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$` }}
{{- $labelKeys := list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/part-of" "app.kubernetes.io/component" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart" }}
{{- range $field := list "commonLabels" "podLabels" "podAnnotations" }}
{{- range $k, $_ := index $v $field }}
{{- if or (not (regexMatch $keyPattern $k)) (gt (len $k) 317) }}
{{- $errors = append $errors (include "rlmesh.refusal.knobKey" (dict "field" $field "key" $k)) }}
{{- else if eq $field "podAnnotations" }}
{{- if or (hasPrefix "rlmesh.dev/" $k) (hasPrefix "checksum/" $k) }}
{{- $errors = append $errors (include "rlmesh.refusal.knobReservedKey" (dict "field" $field "key" $k)) }}
{{- end }}
{{- else if or (has $k $labelKeys) (hasPrefix "rlmesh.dev/" $k) }}
{{- $errors = append $errors (include "rlmesh.refusal.knobReservedKey" (dict "field" $field "key" $k)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $envNames := list "RLMESH_CONFIG" "POD_NAME" "POD_NAMESPACE" "NODE_NAME" "NODE_EXTRA_CA_CERTS" "NODE_OPTIONS" "LOG_LEVEL" "LOG_FORMAT" "MALLOC_ARENA_MAX" "MALLOC_MMAP_THRESHOLD_" "MALLOC_TRIM_THRESHOLD_" "RLMESH_JOIN_TOKEN" "RLMESH_MEMORY_LIMIT_MIB" "HTTP_PROXY" "HTTPS_PROXY" "NO_PROXY" "HOME" }}
{{- range $block := list "egress" "artifactCache.filler" "agent" "controller" "gpuFeatureDiscovery" "crdUpgradeHook" }}
{{- $c := $v }}
{{- range splitList "." $block }}{{ $c = index $c . }}{{ end }}
{{- range $i, $e := $c.extraEnv }}
{{- if has $e.name $envNames }}
{{- $errors = append $errors (include "rlmesh.refusal.extraEnvReserved" (dict "block" $block "index" $i "name" $e.name)) }}
{{- end }}
{{- if and (hasKey $e "value") (hasKey $e "valueFrom") }}
{{- $errors = append $errors (include "rlmesh.refusal.extraEnvValue" (dict "block" $block "index" $i "name" $e.name)) }}
{{- end }}
{{- end }}
{{- range $k, $_ := $c.serviceAccount.annotations }}
{{- if or (not (regexMatch $keyPattern $k)) (gt (len $k) 317) }}
{{- $errors = append $errors (include "rlmesh.refusal.serviceAccountAnnotationKey" (dict "block" $block "key" $k)) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $errors }}
{{- end }}
