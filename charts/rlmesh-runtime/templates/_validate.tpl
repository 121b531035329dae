{{/*
Rules values.schema.json cannot express, checked before anything is applied.
Each message names the value path and what is allowed; lib/values-schema.ts
(crossFieldErrors) holds the same rules, a test keeps the two in step.
*/}}
{{- define "rlmesh.validate" -}}
{{- $v := .Values }}
{{- $errors := list }}
{{- $cs := $v.credentials.controlSecret }}
{{- $ps := $v.credentials.pullSecret }}
{{- if and (eq $v.joinToken "") (eq $cs "") }}
{{- $errors = append $errors "joinToken: neither joinToken nor credentials.controlSecret is set: pass --set joinToken=rlm_jt_… from Clusters → Connect your cluster, or name your own Secrets in credentials.controlSecret and credentials.pullSecret" }}
{{- end }}
{{- if and (ne $v.joinToken "") (ne $cs "") }}
{{- $errors = append $errors "credentials.controlSecret: joinToken and credentials.controlSecret are both set: use joinToken (the agent writes its own Secrets) or credentials.* (Secrets you deliver), not both" }}
{{- end }}
{{- if and (ne $cs "") (eq $ps "") }}
{{- $errors = append $errors "credentials.pullSecret: credentials.controlSecret is set but credentials.pullSecret is empty: name the dockerconfigjson Secret you deliver in rlmesh-system and rlmesh-runs" }}
{{- end }}
{{- if and (eq $cs "") (ne $ps "") }}
{{- $errors = append $errors "credentials.controlSecret: credentials.pullSecret is set but credentials.controlSecret is empty: bring both Secrets, or neither and use joinToken" }}
{{- end }}
{{- $modes := $v.artifactCache.storage.sharedPvc.accessModes }}
{{- range $modes }}
{{- if or (eq . "ReadOnlyMany") (eq . "ReadWriteOncePod") }}
{{- $errors = append $errors (printf "artifactCache.storage.sharedPvc.accessModes: %s cannot hold the artifact cache (the controller writes it while evaluation pods read it): use [ReadWriteOnce] or [ReadWriteMany]" .) }}
{{- end }}
{{- end }}
{{- if and (has "ReadWriteMany" $modes) (eq $v.storage.className "") }}
{{- $errors = append $errors "storage.className: artifactCache.storage.sharedPvc.accessModes has ReadWriteMany but storage.className is empty: set storage.className to a StorageClass that provides ReadWriteMany (e.g. NFS, CephFS, Filestore)" }}
{{- end }}
{{- range $k, $_ := $v.evaluations.resourceQuota.hard }}
{{- if not (regexMatch `^(pods|services|secrets|configmaps|persistentvolumeclaims|cpu|memory|ephemeral-storage|(count/[a-z0-9.-]+)|((requests|limits)\.[a-z0-9./-]+))$` $k) }}
{{- $errors = append $errors (printf "evaluations.resourceQuota.hard.%s: %s is not a ResourceQuota resource name: use pods, requests.cpu, limits.memory, requests.nvidia.com/gpu, count/<resource> and the like" $k $k) }}
{{- end }}
{{- end }}
{{- range $i, $p := $v.network.dnsPeers }}
{{- if not (or (hasKey $p "ipBlock") (hasKey $p "namespaceSelector") (hasKey $p "podSelector")) }}
{{- $errors = append $errors (printf "network.dnsPeers.%d: this NetworkPolicy peer is empty: give it an ipBlock, or a namespaceSelector and/or podSelector, that selects your DNS resolver" $i) }}
{{- else if and (hasKey $p "ipBlock") (or (hasKey $p "namespaceSelector") (hasKey $p "podSelector")) }}
{{- $errors = append $errors (printf "network.dnsPeers.%d: this NetworkPolicy peer has both an ipBlock and selectors: a peer is one or the other; list them as two peers" $i) }}
{{- end }}
{{- end }}
{{- if and $v.metrics.serviceMonitor.enabled $v.metrics.podMonitor.enabled }}
{{- $errors = append $errors "metrics.podMonitor.enabled: metrics.serviceMonitor and metrics.podMonitor are both enabled: every target would be scraped twice; enable one" }}
{{- end }}
{{- $errors = concat $errors (include "rlmesh.imageErrors" (dict "images" (dict
  "agent.image" $v.agent.image
  "artifactCache.filler.image" $v.artifactCache.filler.image
  "controller.image" $v.controller.image
  "crdUpgradeHook.image" $v.crdUpgradeHook.image
  "egress.image" $v.egress.image
  "gpuFeatureDiscovery.image" $v.gpuFeatureDiscovery.image) "ownTag" (list "crdUpgradeHook.image")) | fromJsonArray) }}
{{- /* ephemeralStorageErrors() in lib/values-schema.ts */}}
{{- $tmp := include "rlmesh.tmpSizeLimit" . }}
{{- range $block, $c := dict "egress" $v.egress "artifactCache.filler" $v.artifactCache.filler "agent" $v.agent "controller" $v.controller "gpuFeatureDiscovery" $v.gpuFeatureDiscovery "crdUpgradeHook" $v.crdUpgradeHook }}
{{- $req := index $c.resources.requests "ephemeral-storage" }}
{{- $lim := index $c.resources.limits "ephemeral-storage" }}
{{- $path := printf "%s.resources.limits.ephemeral-storage" $block }}
{{- if lt (include "rlmesh.quantityBytes" $lim | float64) (include "rlmesh.quantityBytes" $req | float64) }}
{{- $errors = append $errors (printf "%s: %s %s is below %s.resources.requests.ephemeral-storage %s: set the limit to at least the request" $path $path $lim $block $req) }}
{{- end }}
{{- if lt (include "rlmesh.quantityBytes" $lim | float64) (include "rlmesh.quantityBytes" $tmp | float64) }}
{{- $errors = append $errors (printf "%s: %s %s is below %s, the size of the pod's /tmp emptyDir, which counts against it: set at least %s" $path $path $lim $tmp $tmp) }}
{{- end }}
{{- end }}
{{- if $errors }}
{{- fail (printf "\n\nrlmesh-runtime: invalid values:\n  - %s\n" (join "\n  - " $errors)) }}
{{- end }}
{{- end }}

{{/*
The image rules (imageErrors() in lib/chart-values.ts): a digest, when set, is
sha256:<64 hex> (values.schema.json checks it too, but --skip-schema-validation
skips that); a block in .ownTag (no appVersion stands in for its tag) needs a tag
or a digest. .images maps each block's value path to the block; renders a JSON list.
*/}}
{{- define "rlmesh.imageErrors" -}}
{{- $errors := list }}
{{- range $path, $img := .images }}
{{- if and $img.digest (not (regexMatch "^sha256:[a-f0-9]{64}$" $img.digest)) }}
{{- $errors = append $errors (printf "%s.digest: %s.digest %q is not an image digest: set sha256: followed by the 64 lowercase hex digits your registry reports for the image, or leave it empty to pull %s.repository:%s.tag" $path $path $img.digest $path $path) }}
{{- end }}
{{- if and (has $path $.ownTag) (not $img.tag) (not $img.digest) }}
{{- $errors = append $errors (printf "%s.tag: %s.tag and %s.digest are both empty: set the tag (or the digest) of the image to pull" $path $path $path) }}
{{- end }}
{{- end }}
{{- toJson $errors }}
{{- end }}
