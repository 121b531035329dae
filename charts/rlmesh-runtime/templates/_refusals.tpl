{{/* Generated from lib/values-refusals.ts and lib/chart-values.ts by `npm run generate`; do not edit. The refusals _validate.tpl reports, as "path: message". */}}
{{/* knobKey; include with (dict "field" … "key" …) */}}
{{- define "rlmesh.refusal.knobKey" -}}
{{- printf "%v.%v: %q is not a label or annotation key: an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit (example.com/team)" (index . "field") (index . "key") (index . "key") -}}
{{- end }}
{{/* knobReservedKey; include with (dict "field" … "key" …) */}}
{{- define "rlmesh.refusal.knobReservedKey" -}}
{{- printf "%v.%v: %v is a key the chart sets itself (app.kubernetes.io/*, helm.sh/chart, rlmesh.dev/*, and checksum/* on pods), which the Deployments, Services and NetworkPolicies select by: overriding it would detach them from their pods; choose a key of your own, such as example.com/team" (index . "field") (index . "key") (index . "key") -}}
{{- end }}
{{/* serviceAccountAnnotationKey; include with (dict "block" … "key" …) */}}
{{- define "rlmesh.refusal.serviceAccountAnnotationKey" -}}
{{- printf "%v.serviceAccount.annotations.%v: %q is not an annotation key, and the API server would refuse the ServiceAccount partway through the install: write an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit, such as eks.amazonaws.com/role-arn or iam.gke.io/gcp-service-account" (index . "block") (index . "key") (index . "key") -}}
{{- end }}
{{/* extraEnvReserved; include with (dict "block" … "index" … "name" …) */}}
{{- define "rlmesh.refusal.extraEnvReserved" -}}
{{- printf "%v.extraEnv.%v: %v is an environment variable the chart sets itself on this container: a second entry would override the runtime's own setting; set it through the chart's values (logging.level, controlPlane.proxy, agent.nodeOptions, ...) or choose another name" (index . "block") (index . "index") (index . "name") -}}
{{- end }}
{{/* extraEnvValue; include with (dict "block" … "index" … "name" …) */}}
{{- define "rlmesh.refusal.extraEnvValue" -}}
{{- printf "%v.extraEnv.%v: %v has both value and valueFrom, and the apiserver refuses a variable with both: keep value for a literal, or valueFrom (e.g. secretKeyRef) for a secret" (index . "block") (index . "index") (index . "name") -}}
{{- end }}
{{/* extraVolumeHostPath; include with (dict "block" … "index" … "name" … "hostPath" …) */}}
{{- define "rlmesh.refusal.extraVolumeHostPath" -}}
{{- printf "%v.extraVolumes.%v: %v is a hostPath volume (%v): the chart's pods meet Pod Security restricted, which refuses host paths, and a runtime pod with the node's files would reach past its fence; deliver the files as a configMap, secret, projected or csi volume instead" (index . "block") (index . "index") (index . "name") (index . "hostPath") -}}
{{- end }}
{{/* extraVolumeType; include with (dict "block" … "index" … "name" … "type" …) */}}
{{- define "rlmesh.refusal.extraVolumeType" -}}
{{- printf "%v.extraVolumes.%v: %v is a volume of type %v, which Pod Security restricted refuses (the chart's pods meet it): use configMap, secret, projected, downwardAPI, emptyDir, csi, ephemeral or persistentVolumeClaim" (index . "block") (index . "index") (index . "name") (index . "type") -}}
{{- end }}
{{/* extraVolumeReserved; include with (dict "block" … "index" … "name" …) */}}
{{- define "rlmesh.refusal.extraVolumeReserved" -}}
{{- printf "%v.extraVolumes.%v: %v is the name of a volume the chart gives this pod itself (config, tmp, ca-bundle, spool, cluster-ranges, proxy-credentials), and the API server refuses two of one name: choose another name" (index . "block") (index . "index") (index . "name") -}}
{{- end }}
{{/* extraVolumeTwice; include with (dict "block" … "index" … "name" …) */}}
{{- define "rlmesh.refusal.extraVolumeTwice" -}}
{{- printf "%v.extraVolumes.%v: %v is listed more than once, and the API server refuses two volumes of one name: list each volume once" (index . "block") (index . "index") (index . "name") -}}
{{- end }}
{{/* extraVolumeMountUnknown; include with (dict "block" … "index" … "name" …) */}}
{{- define "rlmesh.refusal.extraVolumeMountUnknown" -}}
{{- printf "%v.extraVolumeMounts.%v: %v names no volume of %v.extraVolumes: add that volume to %v.extraVolumes, or mount one it has" (index . "block") (index . "index") (index . "name") (index . "block") (index . "block") -}}
{{- end }}
{{/* nameserverNotDnsPeer; include with (dict "block" … "index" … "ip" …) */}}
{{- define "rlmesh.refusal.nameserverNotDnsPeer" -}}
{{- printf "%v.dnsConfig.nameservers.%v: %v lies in no ipBlock of network.dnsPeers, and the NetworkPolicies let this pod reach DNS only at those peers (on network.dnsPorts): its lookups there would time out; add an ipBlock peer holding it to network.dnsPeers, or leave nameservers to the cluster DNS" (index . "block") (index . "index") (index . "ip") -}}
{{- end }}
{{/* noCredentials */}}
{{- define "rlmesh.refusal.noCredentials" -}}
{{- printf "joinToken: neither joinToken nor credentials.controlSecret is set: pass --set joinToken=rlm_jt_… from Clusters → Connect your cluster, or name your own Secrets in credentials.controlSecret and credentials.pullSecret" -}}
{{- end }}
{{/* tokenAndSecrets */}}
{{- define "rlmesh.refusal.tokenAndSecrets" -}}
{{- printf "credentials.controlSecret: joinToken and credentials.controlSecret are both set: use joinToken (the agent writes its own Secrets) or credentials.* (Secrets you deliver), not both" -}}
{{- end }}
{{/* pullSecretMissing */}}
{{- define "rlmesh.refusal.pullSecretMissing" -}}
{{- printf "credentials.pullSecret: credentials.controlSecret is set but credentials.pullSecret is empty: name the dockerconfigjson Secret you deliver in rlmesh-system and rlmesh-runs" -}}
{{- end }}
{{/* controlSecretMissing */}}
{{- define "rlmesh.refusal.controlSecretMissing" -}}
{{- printf "credentials.controlSecret: credentials.pullSecret is set but credentials.controlSecret is empty: bring both Secrets, or neither and use joinToken" -}}
{{- end }}
{{/* cacheAccessMode; include with (dict "mode" …) */}}
{{- define "rlmesh.refusal.cacheAccessMode" -}}
{{- printf "artifactCache.storage.sharedPvc.accessModes: %v cannot hold the artifact cache (the controller writes it while evaluation pods read it): use [ReadWriteOnce] or [ReadWriteMany]" (index . "mode") -}}
{{- end }}
{{/* readWriteManyClass */}}
{{- define "rlmesh.refusal.readWriteManyClass" -}}
{{- printf "storage.className: artifactCache.storage.sharedPvc.accessModes has ReadWriteMany but storage.className is empty: set storage.className to a StorageClass that provides ReadWriteMany (e.g. NFS, CephFS, Filestore)" -}}
{{- end }}
{{/* quotaResourceName; include with (dict "key" …) */}}
{{- define "rlmesh.refusal.quotaResourceName" -}}
{{- printf "evaluations.resourceQuota.hard.%v: %v is not a ResourceQuota resource name: use pods, requests.cpu, limits.memory, requests.nvidia.com/gpu, count/<resource> and the like" (index . "key") (index . "key") -}}
{{- end }}
{{/* dnsPeerEmpty; include with (dict "index" …) */}}
{{- define "rlmesh.refusal.dnsPeerEmpty" -}}
{{- printf "network.dnsPeers.%v: this NetworkPolicy peer is empty: give it an ipBlock, or a namespaceSelector and/or podSelector, that selects your DNS resolver" (index . "index") -}}
{{- end }}
{{/* dnsPeerMixed; include with (dict "index" …) */}}
{{- define "rlmesh.refusal.dnsPeerMixed" -}}
{{- printf "network.dnsPeers.%v: this NetworkPolicy peer has both an ipBlock and selectors: a peer is one or the other; list them as two peers" (index . "index") -}}
{{- end }}
{{/* metricsPeerEmpty; include with (dict "index" …) */}}
{{- define "rlmesh.refusal.metricsPeerEmpty" -}}
{{- printf "network.metricsPeers.%v: this NetworkPolicy peer is empty, and an empty peer would admit every source: give it an ipBlock, or a namespaceSelector and/or podSelector, that selects your Prometheus" (index . "index") -}}
{{- end }}
{{/* metricsPeerMixed; include with (dict "index" …) */}}
{{- define "rlmesh.refusal.metricsPeerMixed" -}}
{{- printf "network.metricsPeers.%v: this NetworkPolicy peer has both an ipBlock and selectors: a peer is one or the other; list them as two peers" (index . "index") -}}
{{- end }}
{{/* caBundleTwice */}}
{{- define "rlmesh.refusal.caBundleTwice" -}}
{{- printf "controlPlane.caBundleFrom: controlPlane.caBundle and controlPlane.caBundleFrom are both set: the CA bundle comes from one place; keep the inline PEM in caBundle or the ConfigMap or Secret in caBundleFrom, and remove the other" -}}
{{- end }}
{{/* caBundleFromBoth */}}
{{- define "rlmesh.refusal.caBundleFromBoth" -}}
{{- printf "controlPlane.caBundleFrom: names both a configMap and a secret: the CA bundle comes from one of them; keep controlPlane.caBundleFrom.configMap or controlPlane.caBundleFrom.secret" -}}
{{- end }}
{{/* pinWithoutBundle */}}
{{- define "rlmesh.refusal.pinWithoutBundle" -}}
{{- printf "controlPlane.pinCaBundle: is true but there is no CA bundle to pin: set controlPlane.caBundle (or caBundleFrom) to the CA of the control plane, or set pinCaBundle to false to trust the system roots" -}}
{{- end }}
{{/* caBundleFromNone */}}
{{- define "rlmesh.refusal.caBundleFromNone" -}}
{{- printf "controlPlane.caBundleFrom: is set but names neither a configMap nor a secret: set controlPlane.caBundleFrom.configMap (or .secret) to {name: <name>, key: <key>}, or remove caBundleFrom to trust the system roots" -}}
{{- end }}
{{/* apiServerAddressesUnknown */}}
{{- define "rlmesh.refusal.apiServerAddressesUnknown" -}}
{{- printf "network.apiServerAddresses: is empty and the Kubernetes API's addresses could not be read from the cluster (helm template, helm lint and --dry-run=client do not read it; an install reads EndpointSlice and Service default/kubernetes): without them the chart would have to open the API's ports to every address. Run rlmesh preflight against the cluster, which prints the --set network.apiServerAddresses={…} line to add, or list the endpoints of kubectl get endpointslice -n default -l kubernetes.io/service-name=kubernetes and the ClusterIP of kubectl get service -n default kubernetes as /32 or /128 CIDRs" -}}
{{- end }}
{{/* evaluationPullSecretPlatform; include with (dict "index" … "name" …) */}}
{{- define "rlmesh.refusal.evaluationPullSecretPlatform" -}}
{{- printf "evaluations.imagePullSecrets.%v.name: %v is the platform's pull Secret, which every evaluation pod already carries (the agent writes and rotates it): list only Secrets you create in rlmesh-runs for the registries in evaluations.extraRegistries" (index . "index") (index . "name") -}}
{{- end }}
{{/* evaluationPullSecretTwice; include with (dict "index" … "name" …) */}}
{{- define "rlmesh.refusal.evaluationPullSecretTwice" -}}
{{- printf "evaluations.imagePullSecrets.%v.name: %v is listed more than once: list each pull Secret once" (index . "index") (index . "name") -}}
{{- end }}
{{/* evaluationPullSecretUnmapped; include with (dict "index" … "name" …) */}}
{{- define "rlmesh.refusal.evaluationPullSecretUnmapped" -}}
{{- printf "evaluations.imagePullSecrets.%v.registries: %v names no repository prefixes: a pull Secret is attached only to evaluation pods whose image lies under one of its registries, so that the platform cannot have the kubelet use your credential for other images (a confused deputy); list the prefixes it is for, e.g. registries: [registry.corp.example/evals/]" (index . "index") (index . "name") -}}
{{- end }}
{{/* evaluationPullSecretBareHost; include with (dict "index" … "i" … "host" …) */}}
{{- define "rlmesh.refusal.evaluationPullSecretBareHost" -}}
{{- printf "evaluations.imagePullSecrets.%v.registries.%v: %v is a registry host, and registries takes repository prefixes: write %v/evals/ (the repositories under evals/) or %v/ (every repository of that registry)" (index . "index") (index . "i") (index . "host") (index . "host") (index . "host") -}}
{{- end }}
{{/* extraRegistryBareHost; include with (dict "index" … "host" …) */}}
{{- define "rlmesh.refusal.extraRegistryBareHost" -}}
{{- printf "evaluations.extraRegistries.%v: %v is a registry host, and evaluations.extraRegistries takes repository prefixes (it took hosts before): write %v/evals/ to allow the repositories under evals/, or %v/ to allow every repository of that registry (the platform may then run any image in it, with the pull Secrets mapped to it)" (index . "index") (index . "host") (index . "host") (index . "host") -}}
{{- end }}
{{/* dashboardNoLabel */}}
{{- define "rlmesh.refusal.dashboardNoLabel" -}}
{{- printf "metrics.grafanaDashboard.labels: metrics.grafanaDashboard.enabled is true but the ConfigMap would have no label, and Grafana's dashboard sidecar finds dashboards only by label: set your sidecar's label, e.g. --set-json 'metrics.grafanaDashboard.labels={\"grafana_dashboard\":\"1\"}'" -}}
{{- end }}
{{/* alertLabelName; include with (dict "key" …) */}}
{{- define "rlmesh.refusal.alertLabelName" -}}
{{- printf "metrics.prometheusRule.alertLabels.%v: %q is not a Prometheus label name (a letter or _, then letters, digits and _): rename it, e.g. team" (index . "key") (index . "key") -}}
{{- end }}
{{/* alertLabelReserved; include with (dict "key" …) */}}
{{- define "rlmesh.refusal.alertLabelReserved" -}}
{{- printf "metrics.prometheusRule.alertLabels.%v: %v is set by the chart on every alert (alertname and severity: critical or warning, which your Alertmanager routes may match): choose another label name" (index . "key") (index . "key") -}}
{{- end }}
{{/* bothMonitors */}}
{{- define "rlmesh.refusal.bothMonitors" -}}
{{- printf "metrics.podMonitor.enabled: metrics.serviceMonitor and metrics.podMonitor are both enabled: every target would be scraped twice; enable one" -}}
{{- end }}
{{/* ephemeralBelowRequest; include with (dict "block" … "limit" … "request" …) */}}
{{- define "rlmesh.refusal.ephemeralBelowRequest" -}}
{{- printf "%v.resources.limits.ephemeral-storage: %v.resources.limits.ephemeral-storage %v is below %v.resources.requests.ephemeral-storage %v: set the limit to at least the request" (index . "block") (index . "block") (index . "limit") (index . "block") (index . "request") -}}
{{- end }}
{{/* ephemeralBelowTmp; include with (dict "block" … "limit" … "tmp" …) */}}
{{- define "rlmesh.refusal.ephemeralBelowTmp" -}}
{{- printf "%v.resources.limits.ephemeral-storage: %v.resources.limits.ephemeral-storage %v is below %v, the size of the pod's /tmp emptyDir, which counts against it: set at least %v" (index . "block") (index . "block") (index . "limit") (index . "tmp") (index . "tmp") -}}
{{- end }}
{{/* limitRangeAboveMax; include with (dict "field" … "resource" … "value" … "max" …) */}}
{{- define "rlmesh.refusal.limitRangeAboveMax" -}}
{{- printf "%v.%v: %v.%v %v is above evaluations.limitRange.max.%v %v: the API server would refuse every pod in rlmesh-runs that gets it; lower it, or raise the max" (index . "field") (index . "resource") (index . "field") (index . "resource") (index . "value") (index . "resource") (index . "max") -}}
{{- end }}
{{/* proxyUrlMissing; include with (dict "key" …) */}}
{{- define "rlmesh.refusal.proxyUrlMissing" -}}
{{- printf "controlPlane.proxy.%v: controlPlane.proxy.%v is set but controlPlane.proxy.url is empty, so no proxy is used: set url to your proxy (http://host:port), or remove %v" (index . "key") (index . "key") (index . "key") -}}
{{- end }}
{{/* proxyUrlScheme */}}
{{- define "rlmesh.refusal.proxyUrlScheme" -}}
{{- printf "controlPlane.proxy.url: is not an http:// or https:// URL: set the scheme, host and port of your HTTP proxy, e.g. http://proxy.corp.example:3128 (other schemes, such as socks5://, are not supported)" -}}
{{- end }}
{{/* proxyUrlCredentials */}}
{{- define "rlmesh.refusal.proxyUrlCredentials" -}}
{{- printf "controlPlane.proxy.url: has credentials (user:password@) in it, where every reader of the values and of ConfigMap rlmesh-runtime-config would see them: remove them from the URL, and put them in a Secret in the release namespace with keys username and password, named by controlPlane.proxy.existingSecret" -}}
{{- end }}
{{/* proxyUrlPath */}}
{{- define "rlmesh.refusal.proxyUrlPath" -}}
{{- printf "controlPlane.proxy.url: has a path, query or fragment: a proxy is named by scheme, host and port only (http://proxy.corp.example:3128)" -}}
{{- end }}
{{/* proxyUrlHost */}}
{{- define "rlmesh.refusal.proxyUrlHost" -}}
{{- printf "controlPlane.proxy.url: has no valid host or port: give a lowercase host name, an IPv4 address or a bracketed IPv6 address ([2001:db8::1]), and a port from 1 to 65535 or none (80 for http, 443 for https)" -}}
{{- end }}
{{/* proxyAddressesMissing */}}
{{- define "rlmesh.refusal.proxyAddressesMissing" -}}
{{- printf "controlPlane.proxy.addresses: controlPlane.proxy.url names its host by name, and a NetworkPolicy can only allow addresses: list the CIDRs the proxy listens on (e.g. [10.20.30.40/32], every address the name resolves to) in controlPlane.proxy.addresses, or give the proxy's IP address in the url" -}}
{{- end }}
{{/* proxyAddressNotCidr; include with (dict "index" … "address" …) */}}
{{- define "rlmesh.refusal.proxyAddressNotCidr" -}}
{{- printf "controlPlane.proxy.addresses.%v: %q is not a CIDR: write each address the proxy listens on with its prefix length, e.g. 10.20.30.40/32 or 2001:db8::10/128" (index . "index") (index . "address") -}}
{{- end }}
{{/* placementKey; include with (dict "field" … "key" …) */}}
{{- define "rlmesh.refusal.placementKey" -}}
{{- printf "evaluations.%v.%v: %q is not a label or annotation key: an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit (example.com/team)" (index . "field") (index . "key") (index . "key") -}}
{{- end }}
{{/* placementReservedKey; include with (dict "field" … "key" …) */}}
{{- define "rlmesh.refusal.placementReservedKey" -}}
{{- printf "evaluations.%v.%v: %v is a key the runtime sets on every evaluation pod (rlmesh.dev/*, app.kubernetes.io/managed-by, name, part-of, instance and component), which the controller and the NetworkPolicies select by: the operator's labels and annotations may not set it; choose a key of your own, such as example.com/%v" (index . "field") (index . "key") (index . "key") (index . "field") -}}
{{- end }}
{{/* placementPlatform; include with (dict "key" … "value" … "allowed" …) */}}
{{- define "rlmesh.refusal.placementPlatform" -}}
{{- printf "evaluations.nodeSelector.%v: %v=%v excludes every node the runtime runs on (%v In [%v]): no evaluation could ever be scheduled; select nodes of that platform, or leave the key out" (index . "key") (index . "key") (index . "value") (index . "key") (index . "allowed") -}}
{{- end }}
{{/* priorityClassSystem; include with (dict "name" …) */}}
{{- define "rlmesh.refusal.priorityClassSystem" -}}
{{- printf "evaluations.priorityClassName: %v is a system PriorityClass, reserved for the pods that keep nodes and the cluster running, which evaluations would then preempt: create a PriorityClass of your own for evaluations and name it here" (index . "name") -}}
{{- end }}
{{/* nodeTermEmpty; include with (dict "index" …) */}}
{{- define "rlmesh.refusal.nodeTermEmpty" -}}
{{- printf "evaluations.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.%v: this required node term has neither matchExpressions nor matchFields, and such a term matches no node: give it the requirements of the nodes evaluations may run on, or remove it" (index . "index") -}}
{{- end }}
{{/* imageDigest; include with (dict "path" … "digest" …) */}}
{{- define "rlmesh.refusal.imageDigest" -}}
{{- printf "%v.digest: %v.digest %q is not an image digest: set sha256: followed by the 64 lowercase hex digits your registry reports for the image, or leave it empty to pull %v.repository:%v.tag" (index . "path") (index . "path") (index . "digest") (index . "path") (index . "path") -}}
{{- end }}
{{/* imageTagMissing; include with (dict "path" …) */}}
{{- define "rlmesh.refusal.imageTagMissing" -}}
{{- printf "%v.tag: %v.tag and %v.digest are both empty: set the tag (or the digest) of the image to pull" (index . "path") (index . "path") (index . "path") -}}
{{- end }}
