{{/*
Rules values.schema.json cannot express, checked before anything is applied.
crossFieldErrors() in lib/values-schema.ts holds the same rules (a test keeps the
two in step); their messages come from the generated _refusals.tpl.
*/}}
{{- define "rlmesh.validate" -}}
{{- $v := .Values }}
{{- $errors := list }}
{{- $cs := $v.credentials.controlSecret }}
{{- $ps := $v.credentials.pullSecret }}
{{- if and (eq $v.joinToken "") (eq $cs "") }}
{{- $errors = append $errors (include "rlmesh.refusal.noCredentials" (dict)) }}
{{- end }}
{{- if and (ne $v.joinToken "") (ne $cs "") }}
{{- $errors = append $errors (include "rlmesh.refusal.tokenAndSecrets" (dict)) }}
{{- end }}
{{- if and (ne $cs "") (eq $ps "") }}
{{- $errors = append $errors (include "rlmesh.refusal.pullSecretMissing" (dict)) }}
{{- end }}
{{- if and (eq $cs "") (ne $ps "") }}
{{- $errors = append $errors (include "rlmesh.refusal.controlSecretMissing" (dict)) }}
{{- end }}
{{- $modes := $v.artifactCache.storage.sharedPvc.accessModes }}
{{- range $modes }}
{{- if or (eq . "ReadOnlyMany") (eq . "ReadWriteOncePod") }}
{{- $errors = append $errors (include "rlmesh.refusal.cacheAccessMode" (dict "mode" .)) }}
{{- end }}
{{- end }}
{{- if and (has "ReadWriteMany" $modes) (eq $v.storage.className "") }}
{{- $errors = append $errors (include "rlmesh.refusal.readWriteManyClass" (dict)) }}
{{- end }}
{{- range $k, $_ := $v.evaluations.resourceQuota.hard }}
{{- if not (regexMatch `^(pods|services|secrets|configmaps|persistentvolumeclaims|cpu|memory|ephemeral-storage|(count/[a-z0-9.-]+)|((requests|limits)\.[a-z0-9./-]+))$` $k) }}
{{- $errors = append $errors (include "rlmesh.refusal.quotaResourceName" (dict "key" $k)) }}
{{- end }}
{{- end }}
{{- range $i, $p := $v.network.dnsPeers }}
{{- if not (or (hasKey $p "ipBlock") (hasKey $p "namespaceSelector") (hasKey $p "podSelector")) }}
{{- $errors = append $errors (include "rlmesh.refusal.dnsPeerEmpty" (dict "index" $i)) }}
{{- else if and (hasKey $p "ipBlock") (or (hasKey $p "namespaceSelector") (hasKey $p "podSelector")) }}
{{- $errors = append $errors (include "rlmesh.refusal.dnsPeerMixed" (dict "index" $i)) }}
{{- end }}
{{- end }}
{{- range $i, $p := $v.network.metricsPeers }}
{{- if not (or (hasKey $p "ipBlock") (hasKey $p "namespaceSelector") (hasKey $p "podSelector")) }}
{{- $errors = append $errors (include "rlmesh.refusal.metricsPeerEmpty" (dict "index" $i)) }}
{{- else if and (hasKey $p "ipBlock") (or (hasKey $p "namespaceSelector") (hasKey $p "podSelector")) }}
{{- $errors = append $errors (include "rlmesh.refusal.metricsPeerMixed" (dict "index" $i)) }}
{{- end }}
{{- end }}
{{- if and $v.metrics.serviceMonitor.enabled $v.metrics.podMonitor.enabled }}
{{- $errors = append $errors (include "rlmesh.refusal.bothMonitors" (dict)) }}
{{- end }}
{{- /* monitoringErrors() in lib/values-schema.ts: the PrometheusRule's and the dashboard's labels */}}
{{- $keyPattern := `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$` }}
{{- $chartKeys := list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/part-of" "app.kubernetes.io/component" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart" }}
{{- $rule := $v.metrics.prometheusRule }}
{{- $dash := $v.metrics.grafanaDashboard }}
{{- range $field, $labels := dict "metrics.prometheusRule.labels" $rule.labels "metrics.grafanaDashboard.labels" $dash.labels }}
{{- range $k, $_ := $labels }}
{{- if or (not (regexMatch $keyPattern $k)) (gt (len $k) 317) }}
{{- $errors = append $errors (include "rlmesh.refusal.knobKey" (dict "field" $field "key" $k)) }}
{{- else if or (has $k $chartKeys) (hasPrefix "rlmesh.dev/" $k) }}
{{- $errors = append $errors (include "rlmesh.refusal.knobReservedKey" (dict "field" $field "key" $k)) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $k, $_ := $dash.annotations }}
{{- if or (not (regexMatch $keyPattern $k)) (gt (len $k) 317) }}
{{- $errors = append $errors (include "rlmesh.refusal.knobKey" (dict "field" "metrics.grafanaDashboard.annotations" "key" $k)) }}
{{- end }}
{{- end }}
{{- range $k, $_ := $rule.alertLabels }}
{{- if not (regexMatch `^[a-zA-Z_][a-zA-Z0-9_]*$` $k) }}
{{- $errors = append $errors (include "rlmesh.refusal.alertLabelName" (dict "key" $k)) }}
{{- else if or (eq $k "severity") (eq $k "alertname") }}
{{- $errors = append $errors (include "rlmesh.refusal.alertLabelReserved" (dict "key" $k)) }}
{{- end }}
{{- end }}
{{- if and $dash.enabled (eq (len $dash.labels) 0) }}
{{- $errors = append $errors (include "rlmesh.refusal.dashboardNoLabel" (dict)) }}
{{- end }}
{{- /* placementErrors() in lib/values-schema.ts: the operator's policy for evaluation pods */}}
{{- $e := $v.evaluations }}
{{- range $field := list "nodeSelector" "podLabels" "podAnnotations" }}
{{- range $k, $_ := index $e $field }}
{{- if or (not (regexMatch `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$` $k)) (gt (len $k) 317) }}
{{- $errors = append $errors (include "rlmesh.refusal.placementKey" (dict "field" $field "key" $k)) }}
{{- else if and (ne $field "nodeSelector") (or (hasPrefix "rlmesh.dev/" $k) (has $k (list "app.kubernetes.io/managed-by" "app.kubernetes.io/name" "app.kubernetes.io/part-of" "app.kubernetes.io/instance" "app.kubernetes.io/component"))) }}
{{- $errors = append $errors (include "rlmesh.refusal.placementReservedKey" (dict "field" $field "key" $k)) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $r := include "rlmesh.platformNodeRequirements" . | fromJsonArray }}
{{- if and (hasKey $e.nodeSelector $r.key) (not (has (index $e.nodeSelector $r.key) $r.values)) }}
{{- $errors = append $errors (include "rlmesh.refusal.placementPlatform" (dict "key" $r.key "value" (index $e.nodeSelector $r.key) "allowed" (join ", " $r.values))) }}
{{- end }}
{{- end }}
{{- if hasPrefix "system-" $e.priorityClassName }}
{{- $errors = append $errors (include "rlmesh.refusal.priorityClassSystem" (dict "name" $e.priorityClassName)) }}
{{- end }}
{{- range $i, $t := dig "nodeAffinity" "requiredDuringSchedulingIgnoredDuringExecution" "nodeSelectorTerms" (list) $e.affinity }}
{{- if not (or (dig "matchExpressions" (list) $t) (dig "matchFields" (list) $t)) }}
{{- $errors = append $errors (include "rlmesh.refusal.nodeTermEmpty" (dict "index" $i)) }}
{{- end }}
{{- end }}
{{- /* controlPlane.proxy: proxyErrors() in lib/outbound-proxy-values.ts; rlmesh.proxy (the generated _proxy.tpl) reads the url */}}
{{- $proxy := $v.controlPlane.proxy }}
{{- $pu := include "rlmesh.proxy" . | fromJson }}
{{- if eq $proxy.url "" }}
{{- range $key := list "existingSecret" "noProxy" "addresses" "passUnresolvedNames" }}
{{- if get $proxy $key }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyUrlMissing" (dict "key" $key)) }}
{{- end }}
{{- end }}
{{- else }}
{{- $http := or (eq $pu.scheme "http") (eq $pu.scheme "https") }}
{{- if not $http }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyUrlScheme" (dict)) }}
{{- end }}
{{- if $pu.userinfo }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyUrlCredentials" (dict)) }}
{{- end }}
{{- if not (or (eq $pu.rest "") (eq $pu.rest "/")) }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyUrlPath" (dict)) }}
{{- end }}
{{- if and $http (or (eq $pu.hostKind "invalid") (eq (int $pu.port) 0)) }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyUrlHost" (dict)) }}
{{- end }}
{{- if and $http (eq $pu.hostKind "name") (not $proxy.addresses) }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyAddressesMissing" (dict)) }}
{{- end }}
{{- end }}
{{- range $i, $a := $proxy.addresses }}
{{- if not (regexMatch $pu.cidrPattern (toString $a)) }}
{{- $errors = append $errors (include "rlmesh.refusal.proxyAddressNotCidr" (dict "index" $i "address" $a)) }}
{{- end }}
{{- end }}
{{- /* caBundleFromErrors() in lib/values-schema.ts */}}
{{- if and $v.controlPlane.pinCaBundle (not $v.controlPlane.caBundle) (not $v.controlPlane.caBundleFrom) }}
{{- $errors = append $errors (include "rlmesh.refusal.pinWithoutBundle" (dict)) }}
{{- end }}
{{- if hasKey $v.controlPlane "caBundleFrom" }}
{{- $from := $v.controlPlane.caBundleFrom | default dict }}
{{- if $v.controlPlane.caBundle }}
{{- $errors = append $errors (include "rlmesh.refusal.caBundleTwice" (dict)) }}
{{- end }}
{{- if and $from.configMap $from.secret }}
{{- $errors = append $errors (include "rlmesh.refusal.caBundleFromBoth" (dict)) }}
{{- else if not (or $from.configMap $from.secret) }}
{{- $errors = append $errors (include "rlmesh.refusal.caBundleFromNone" (dict)) }}
{{- end }}
{{- end }}
{{- /* evaluationPullSecretErrors() in lib/values-schema.ts */}}
{{- $seen := list }}
{{- range $i, $s := $v.evaluations.imagePullSecrets }}
{{- if eq $s.name (include "rlmesh.pullSecret" $) }}
{{- $errors = append $errors (include "rlmesh.refusal.evaluationPullSecretPlatform" (dict "index" $i "name" $s.name)) }}
{{- else if has $s.name $seen }}
{{- $errors = append $errors (include "rlmesh.refusal.evaluationPullSecretTwice" (dict "index" $i "name" $s.name)) }}
{{- end }}
{{- if not $s.registries }}
{{- $errors = append $errors (include "rlmesh.refusal.evaluationPullSecretUnmapped" (dict "index" $i "name" $s.name)) }}
{{- end }}
{{- range $j, $host := ($s.registries | default list) }}
{{- if not (contains "/" $host) }}
{{- $errors = append $errors (include "rlmesh.refusal.evaluationPullSecretBareHost" (dict "index" $i "i" $j "host" $host)) }}
{{- end }}
{{- end }}
{{- $seen = append $seen $s.name }}
{{- end }}
{{- /* evaluationRegistryErrors() in lib/values-schema.ts: the schema takes a prefix or a bare host, and no slash means a bare host */}}
{{- range $i, $host := $v.evaluations.extraRegistries }}
{{- if not (contains "/" $host) }}
{{- $errors = append $errors (include "rlmesh.refusal.extraRegistryBareHost" (dict "index" $i "host" $host)) }}
{{- end }}
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
{{- if lt (include "rlmesh.quantityBytes" $lim | float64) (include "rlmesh.quantityBytes" $req | float64) }}
{{- $errors = append $errors (include "rlmesh.refusal.ephemeralBelowRequest" (dict "block" $block "limit" $lim "request" $req)) }}
{{- end }}
{{- if lt (include "rlmesh.quantityBytes" $lim | float64) (include "rlmesh.quantityBytes" $tmp | float64) }}
{{- $errors = append $errors (include "rlmesh.refusal.ephemeralBelowTmp" (dict "block" $block "limit" $lim "tmp" $tmp)) }}
{{- end }}
{{- end }}
{{- /* limitRangeErrors() in lib/values-schema.ts */}}
{{- $max := $v.evaluations.limitRange.max }}
{{- range $field, $resources := dict "evaluations.limitRange.default" $v.evaluations.limitRange.default "evaluations.limitRange.defaultRequest" $v.evaluations.limitRange.defaultRequest "artifactCache.filler.resources.limits" $v.artifactCache.filler.resources.limits }}
{{- range $resource := list "cpu" "memory" "ephemeral-storage" }}
{{- $value := index $resources $resource }}
{{- if and $value (gt (include "rlmesh.quantityBytes" $value | float64) (include "rlmesh.quantityBytes" (index $max $resource) | float64)) }}
{{- $errors = append $errors (include "rlmesh.refusal.limitRangeAboveMax" (dict "field" $field "resource" $resource "value" $value "max" (index $max $resource))) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* knobErrors() in lib/chart-knobs.ts (_validate-knobs.tpl) */}}
{{- $errors = concat $errors (include "rlmesh.knobErrors" . | fromJsonArray) }}
{{- /* not a rule of the values alone: the API's addresses may come from the cluster (_helpers.tpl) */}}
{{- if not (include "rlmesh.apiServerAddresses" . | fromJsonArray) }}
{{- $errors = append $errors (include "rlmesh.refusal.apiServerAddressesUnknown" (dict)) }}
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
{{- $errors = append $errors (include "rlmesh.refusal.imageDigest" (dict "path" $path "digest" $img.digest)) }}
{{- end }}
{{- if and (has $path $.ownTag) (not $img.tag) (not $img.digest) }}
{{- $errors = append $errors (include "rlmesh.refusal.imageTagMissing" (dict "path" $path)) }}
{{- end }}
{{- end }}
{{- toJson $errors }}
{{- end }}
