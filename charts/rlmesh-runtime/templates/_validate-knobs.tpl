{{/*
knobErrors() in lib/chart-knobs.ts: label and annotation keys of commonLabels, podLabels and
podAnnotations (well-formed, not the chart's own), each component's extraEnv (not a name
the chart sets) and the annotation keys of its serviceAccount (well-formed); and
volumeErrors(): each extraVolumes entry of a VOLUME_BLOCKS component (a source Pod Security
restricted allows, never hostPath; not a chart volume's name; once) and each extraVolumeMounts
entry (of one of them); and nameserverErrors(): each IPv4 dnsConfig nameserver inside an
ipBlock of network.dnsPeers (not its except) when every peer is an ipBlock. Returns the
refusals as a JSON list; rlmesh.validate adds them to its own.
The lists of keys, prefixes and names are CHART_LABEL_KEYS, CHART_KEY_PREFIXES,
CHART_ANNOTATION_PREFIXES, CHART_ENV_NAMES, VOLUME_BLOCKS, CHART_VOLUME_NAMES and
RESTRICTED_VOLUME_SOURCES (a test keeps them equal).
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
{{- $volumeNames := list "config" "tmp" "ca-bundle" "spool" "cluster-ranges" "output-hosts" "proxy-credentials" }}
{{- $sources := list "configMap" "secret" "projected" "downwardAPI" "emptyDir" "csi" "ephemeral" "persistentVolumeClaim" }}
{{- range $block := list "egress" "agent" "controller" "gpuFeatureDiscovery" }}
{{- $c := index $v $block }}
{{- $seen := list }}
{{- range $i, $vol := $c.extraVolumes }}
{{- $other := list }}
{{- range $k, $_ := $vol }}{{ if not (or (eq $k "name") (eq $k "hostPath") (has $k $sources)) }}{{ $other = append $other $k }}{{ end }}{{ end }}
{{- if hasKey $vol "hostPath" }}
{{- $errors = append $errors (include "rlmesh.refusal.extraVolumeHostPath" (dict "block" $block "index" $i "name" $vol.name "hostPath" (dig "path" "" ($vol.hostPath | default dict)))) }}
{{- else if $other }}
{{- $errors = append $errors (include "rlmesh.refusal.extraVolumeType" (dict "block" $block "index" $i "name" $vol.name "type" (first $other))) }}
{{- end }}
{{- if has $vol.name $volumeNames }}
{{- $errors = append $errors (include "rlmesh.refusal.extraVolumeReserved" (dict "block" $block "index" $i "name" $vol.name)) }}
{{- else if has $vol.name $seen }}
{{- $errors = append $errors (include "rlmesh.refusal.extraVolumeTwice" (dict "block" $block "index" $i "name" $vol.name)) }}
{{- end }}
{{- $seen = append $seen $vol.name }}
{{- end }}
{{- range $i, $m := $c.extraVolumeMounts }}
{{- if not (has $m.name $seen) }}
{{- $errors = append $errors (include "rlmesh.refusal.extraVolumeMountUnknown" (dict "block" $block "index" $i "name" $m.name)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $allIpBlocks := true }}
{{- range $v.network.dnsPeers }}{{ if not .ipBlock }}{{ $allIpBlocks = false }}{{ end }}{{ end }}
{{- if $allIpBlocks }}
{{- range $block := list "egress" "agent" "controller" "gpuFeatureDiscovery" }}
{{- range $i, $ns := (index $v $block).dnsConfig.nameservers }}
{{- if regexMatch `^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$` $ns }}
{{- $covered := false }}
{{- range $v.network.dnsPeers }}
{{- if eq (include "rlmesh.ipv4InCidr" (dict "ip" $ns "cidr" .ipBlock.cidr)) "true" }}
{{- $excepted := false }}
{{- range .ipBlock.except }}{{ if eq (include "rlmesh.ipv4InCidr" (dict "ip" $ns "cidr" .)) "true" }}{{ $excepted = true }}{{ end }}{{ end }}
{{- if not $excepted }}{{ $covered = true }}{{ end }}
{{- end }}
{{- end }}
{{- if not $covered }}
{{- $errors = append $errors (include "rlmesh.refusal.nameserverNotDnsPeer" (dict "block" $block "index" $i "ip" $ns)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $errors }}
{{- end }}


{{/* "true" when IPv4 address .ip lies in .cidr (an IPv6 range: "false") */}}
{{- define "rlmesh.ipv4InCidr" -}}
{{- $parts := splitList "/" .cidr }}
{{- if contains ":" (first $parts) }}false{{ else }}
{{- $size := 1 }}
{{- range until (sub 32 (atoi (last $parts)) | int) }}{{ $size = mul $size 2 }}{{ end }}
{{- eq (div (include "rlmesh.ipv4Int" .ip | atoi) $size) (div (include "rlmesh.ipv4Int" (first $parts) | atoi) $size) }}
{{- end }}
{{- end }}

{{/* a dotted IPv4 address as an integer */}}
{{- define "rlmesh.ipv4Int" -}}
{{- $p := splitList "." . }}
{{- add (mul (atoi (index $p 0)) 16777216) (mul (atoi (index $p 1)) 65536) (mul (atoi (index $p 2)) 256) (atoi (index $p 3)) }}
{{- end }}
