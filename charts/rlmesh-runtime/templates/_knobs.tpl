{{/*
The chart's ordinary knobs (lib/chart-knobs.ts): podLabels and podAnnotations on every
pod, a component's extraEnv, its ServiceAccount's annotations. commonLabels are in
rlmesh.labels; podSecurity.arbitraryUid in rlmesh.podSecurityContext; logging in
rlmesh.commonEnv. Keys and names that collide with the chart's own are refused by
templates/_validate-knobs.tpl before anything renders.
*/}}

{{/* podLabels of a pod template (after rlmesh.labels); .root is the root context */}}
{{- define "rlmesh.podLabels" -}}
{{- with .root.Values.podLabels }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* podAnnotations, then the component's own (.c.podAnnotations), which win on the same key */}}
{{- define "rlmesh.podAnnotations" -}}
{{- with merge (deepCopy (.c.podAnnotations | default dict)) (deepCopy (.root.Values.podAnnotations | default dict)) }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* .c.extraEnv, after the chart's own variables */}}
{{- define "rlmesh.extraEnv" -}}
{{- with .c.extraEnv }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* metadata.annotations of a component's ServiceAccount (.c.serviceAccount.annotations), when any */}}
{{- define "rlmesh.serviceAccountAnnotations" -}}
{{- with .c.serviceAccount.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* .c.extraVolumes of a pod, after the chart's own (refused when restricted would refuse them: _validate-knobs.tpl) */}}
{{- define "rlmesh.extraVolumes" -}}
{{- with .c.extraVolumes }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* .c.extraVolumeMounts of its container, after the chart's own */}}
{{- define "rlmesh.extraVolumeMounts" -}}
{{- with .c.extraVolumeMounts }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* .c.hostAliases and .c.dnsConfig of a pod spec, when set */}}
{{- define "rlmesh.podDns" -}}
{{- with .c.hostAliases }}
hostAliases:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.dnsConfig }}
dnsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
