{{/*
The images a release of this chart pushed, by name (the repository's last path
segment): {"<name>": {"tag": "…", "digest": "sha256:…"}}. The release writes
them here (scripts/release/stamp-digests.ts); in the repository the chart was
never released and this is {}. A template, not values: `helm upgrade
--reuse-values` keeps the old values but always takes the new templates.
*/}}
{{- define "obs.releasedImages" -}}{}{{- end }}
