{{/* Generated from lib/observability-refusals.ts and lib/chart-values.ts by `npm run generate`; do not edit. The refusals _validate.tpl reports, as "path: message". */}}
{{/* grafanaNoPassword */}}
{{- define "obs.refusal.grafanaNoPassword" -}}
{{- printf "grafana.enabled: grafana.enabled is true but no admin password is given: set grafana.adminPassword or grafana.adminPasswordSecretName (a Secret in the release namespace), or leave grafana.enabled=false" -}}
{{- end }}
{{/* grafanaTwoPasswords */}}
{{- define "obs.refusal.grafanaTwoPasswords" -}}
{{- printf "grafana.adminPassword: grafana.adminPassword and grafana.adminPasswordSecretName are both set: give one password source" -}}
{{- end }}
{{/* remoteWriteCell; include with (dict "index" … "cell" … "clusterLabel" …) */}}
{{- define "obs.refusal.remoteWriteCell" -}}
{{- printf "prometheus.remoteWrite.%v.url: prometheus.remoteWrite[%v].url writes to cluster %v but prometheus.clusterLabel is %v: use the same cluster id in both" (index . "index") (index . "index") (index . "cell") (index . "clusterLabel") -}}
{{- end }}
{{/* grafanaNoImage */}}
{{- define "obs.refusal.grafanaNoImage" -}}
{{- printf "grafana.image.repository: grafana.enabled is true but grafana.image.repository is empty: this chart names no Grafana image (RLMesh builds and publishes none, so there is none it could vouch for); mirror the Grafana version you trust into your registry and set grafana.image.repository, grafana.image.tag and grafana.image.digest, or leave grafana.enabled=false" -}}
{{- end }}
{{/* apiServerAddressesUnknown */}}
{{- define "obs.refusal.apiServerAddressesUnknown" -}}
{{- printf "network.apiServerAddresses: is empty and the Kubernetes API's addresses could not be read from the cluster (helm template, helm lint and --dry-run=client do not read it; an install reads EndpointSlice and Service default/kubernetes): without them the chart would have to open the API's ports to every address. Run rlmesh preflight against the cluster, which prints the --set network.apiServerAddresses={…} line to add (the same for both charts)" -}}
{{- end }}
{{/* noClusterLabel */}}
{{- define "obs.refusal.noClusterLabel" -}}
{{- printf "prometheus.clusterLabel: prometheus.clusterLabel is empty: set it to the cluster's public id (Clusters shows it) so every series is labelled cluster=<id>" -}}
{{- end }}
{{/* imageDigest; include with (dict "path" … "digest" …) */}}
{{- define "obs.refusal.imageDigest" -}}
{{- printf "%v.digest: %v.digest %q is not an image digest: set sha256: followed by the 64 lowercase hex digits your registry reports for the image, or leave it empty to pull %v.repository:%v.tag" (index . "path") (index . "path") (index . "digest") (index . "path") (index . "path") -}}
{{- end }}
{{/* imageTagMissing; include with (dict "path" …) */}}
{{- define "obs.refusal.imageTagMissing" -}}
{{- printf "%v.tag: %v.tag and %v.digest are both empty: set the tag (or the digest) of the image to pull" (index . "path") (index . "path") (index . "path") -}}
{{- end }}
