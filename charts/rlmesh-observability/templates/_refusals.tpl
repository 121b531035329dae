{{/* Generated from lib/chart-values.ts by `npm run generate`; do not edit. The refusals _validate.tpl reports, as "path: message". */}}
{{/* imageDigest; include with (dict "path" … "digest" …) */}}
{{- define "obs.refusal.imageDigest" -}}
{{- printf "%v.digest: %v.digest %q is not an image digest: set sha256: followed by the 64 lowercase hex digits your registry reports for the image, or leave it empty to pull %v.repository:%v.tag" (index . "path") (index . "path") (index . "digest") (index . "path") (index . "path") -}}
{{- end }}
{{/* imageTagMissing; include with (dict "path" …) */}}
{{- define "obs.refusal.imageTagMissing" -}}
{{- printf "%v.tag: %v.tag and %v.digest are both empty: set the tag (or the digest) of the image to pull" (index . "path") (index . "path") (index . "path") -}}
{{- end }}
