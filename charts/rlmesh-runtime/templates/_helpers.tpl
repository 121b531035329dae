{{/* Names are fixed by the product (see DESIGN "Names"); only labels carry the release. */}}
{{- define "rlmesh.runsNamespace" -}}{{ include "rlmesh.name.runsNamespace" . }}{{- end }}

{{- define "rlmesh.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: rlmesh-runtime
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "rlmesh.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{/*
The repository a pod pulls .image.repository from (relocatedRepository() in
lib/chart-values.ts is the same rule): under global.imageRegistry when set, the
repository's path kept; else, for an image of the platform's registry, under
controlPlane.registryHost; else as named. The registry of a repository is its first
component when that has a dot or a port or is localhost, else Docker Hub's.
*/}}
{{- define "rlmesh.imageRepository" -}}
{{- $repo := .image.repository -}}
{{- $parts := splitn "/" 2 $repo -}}
{{- $first := $parts._0 -}}
{{- $registry := "docker.io" -}}
{{- $path := $repo -}}
{{- if and $parts._1 (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $registry = $first -}}
{{- $path = $parts._1 -}}
{{- else if not (contains "/" $repo) -}}
{{- $path = printf "library/%s" $repo -}}
{{- end -}}
{{- $mirror := trimSuffix "/" (.root.Values.global.imageRegistry | default "") -}}
{{- if $mirror -}}
{{- printf "%s/%s" $mirror $path -}}
{{- else if and (eq $registry (include "rlmesh.name.platformRegistry" .root)) .root.Values.controlPlane.registryHost -}}
{{- printf "%s/%s" .root.Values.controlPlane.registryHost $path -}}
{{- else -}}
{{- $repo -}}
{{- end -}}
{{- end }}

{{/*
The image a pod runs (dict "image" … "root" $ "defaultTag" …): the repository of
rlmesh.imageRepository, @digest when .image.digest is set (the tag is then ignored);
else, in a released chart, the digest the release pushed for this image
(templates/_released-images.tpl) when the tag is empty or the released one; else
:tag. An empty tag is .defaultTag (the chart's appVersion for the runtime image).
imageReference() in lib/chart-values.ts is the same rule; templates/_validate.tpl
has already refused a malformed digest.
*/}}
{{- define "rlmesh.image" -}}
{{- $tag := .image.tag | default .defaultTag -}}
{{- $released := get (include "rlmesh.releasedImages" . | fromJson) (base .image.repository) -}}
{{- $repository := include "rlmesh.imageRepository" . -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repository .image.digest -}}
{{- else if and $released (eq $tag $released.tag) -}}
{{- printf "%s@%s" $repository $released.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end }}

{{/* The join token as a dockerconfigjson for controlPlane.registryHost (Secrets rlmesh-registry-join and the CRD hook's rlmesh-crd-upgrade-join). */}}
{{- define "rlmesh.joinDockerConfig" -}}
{{- dict "auths" (dict .Values.controlPlane.registryHost (dict "username" "rlmesh-join" "password" .Values.joinToken "auth" (printf "rlmesh-join:%s" .Values.joinToken | b64enc))) | toJson -}}
{{- end }}

{{/*
The imagePullPolicy of a container (same dict as rlmesh.image): .image.pullPolicy when
set; else IfNotPresent when rlmesh.image pins the image by digest (its own, or the
released one for its tag: the bytes cannot change, so a cached copy is the image) and
Always when it pulls by tag (a tag can be moved to other bytes, and a node would keep
running whatever it pulled first).
*/}}
{{- define "rlmesh.imagePullPolicy" -}}
{{- if .image.pullPolicy -}}
{{- .image.pullPolicy -}}
{{- else if contains "@" (include "rlmesh.image" .) -}}
IfNotPresent
{{- else -}}
Always
{{- end -}}
{{- end }}

{{- /* podSecurity.arbitraryUid (OpenShift restricted-v2): no fixed user, group or fsGroup; the SCC assigns them */}}
{{- define "rlmesh.podSecurityContext" -}}
runAsNonRoot: true
{{- if not .Values.podSecurity.arbitraryUid }}
runAsUser: {{ include "rlmesh.user.runtime.uid" . }}
runAsGroup: {{ include "rlmesh.user.runtime.gid" . }}
fsGroup: {{ include "rlmesh.user.runtime.gid" . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "rlmesh.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
Scheduling and pull Secrets of a component: .c is its values block. .nodeLossSeconds, when
set, is how long the pod stays bound to a node that stopped reporting (the not-ready and
unreachable NoExecute taints) before it is evicted and started elsewhere, instead of the
300 s the API server gives by default; a toleration of the operator's for either key wins.
*/}}
{{- define "rlmesh.podScheduling" -}}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $tolerations := .c.tolerations | default list }}
{{- if .nodeLossSeconds }}
{{- $keys := list }}
{{- range $tolerations }}{{ $keys = append $keys (.key | default "") }}{{ end }}
{{- range list "node.kubernetes.io/not-ready" "node.kubernetes.io/unreachable" }}
{{- if not (has . $keys) }}
{{- $tolerations = append $tolerations (dict "key" . "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" $.nodeLossSeconds) }}
{{- end }}
{{- end }}
{{- end }}
{{- with $tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{ include "rlmesh.affinity" .c.affinity }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- /* values' pull Secrets, the caller's, the cluster's own pull Secret (written at join, or credentials.pullSecret), then the join token's until the join has written that (not for .afterJoin pods: the upgrade hook runs once the token is spent) */}}
{{- $names := list }}
{{- range concat .root.Values.imagePullSecrets (.extraPullSecrets | default list) }}{{ $names = append $names .name }}{{ end }}
{{- /* global.imagePullSecrets: names or {name}; never in the runtime config, so never on a pod the controller starts */}}
{{- range (.root.Values.global).imagePullSecrets }}{{ if kindIs "string" . }}{{ $names = append $names . }}{{ else }}{{ $names = append $names .name }}{{ end }}{{ end }}
{{- $names = append $names (include "rlmesh.pullSecret" .root) | uniq }}
{{- if and .root.Values.joinToken (not .afterJoin) }}{{ $names = append $names (include "rlmesh.joinPullSecret" .root) }}{{ end }}
imagePullSecrets:
  {{- range $names }}
  - name: {{ . }}
  {{- end }}
{{- end }}

{{/*
A component's affinity (the dict given) with the runtime's platform required: the images
are linux/amd64 only (lib/fixed-names.ts, rlmesh.platformNodeRequirements in the generated
_names.tpl). Required node terms are ORed, so the requirements are ANDed into each of
them (one term of their own when there is none); preferred terms and pod (anti-)affinity
pass through as they are.
*/}}
{{- define "rlmesh.affinity" -}}
{{- $platform := include "rlmesh.platformNodeRequirements" . | fromJsonArray }}
{{- $affinity := deepCopy (. | default dict) }}
{{- $node := $affinity.nodeAffinity | default dict }}
{{- $required := $node.requiredDuringSchedulingIgnoredDuringExecution | default dict }}
{{- $terms := list }}
{{- range ($required.nodeSelectorTerms | default (list (dict))) }}
{{- $terms = append $terms (merge (dict "matchExpressions" (concat (.matchExpressions | default list) $platform | uniq)) .) }}
{{- end }}
{{- $_ := set $required "nodeSelectorTerms" $terms }}
{{- $_ = set $node "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- $_ = set $affinity "nodeAffinity" $node }}
affinity:
  {{- toYaml $affinity | nindent 2 }}
{{- end }}

{{- define "rlmesh.resources" -}}
requests:
  cpu: {{ .requests.cpu | quote }}
  memory: {{ .requests.memory | quote }}
  ephemeral-storage: {{ index .requests "ephemeral-storage" | quote }}
limits:
  cpu: {{ .limits.cpu | quote }}
  memory: {{ .limits.memory | quote }}
  ephemeral-storage: {{ index .limits "ephemeral-storage" | quote }}
{{- end }}

{{/* Size limit of every pod's /tmp emptyDir (TMP_SIZE_LIMIT in lib/values-schema.ts); each container's ephemeral-storage limit is at least this */}}
{{- define "rlmesh.tmpSizeLimit" -}}64Mi{{- end }}

{{/*
Replicas of a component spread over nodes: one constraint per .c.topologySpread.topologyKeys
entry. ScheduleAnyway (the default) is a preference, so a single-node cluster still
schedules every replica; DoNotSchedule makes it a rule. Tainted nodes the pods do not
tolerate are no domain to spread to (nodeTaintsPolicy: Honor).
*/}}
{{- define "rlmesh.topologySpread" -}}
{{- $s := .c.topologySpread }}
topologySpreadConstraints:
  {{- range $s.topologyKeys }}
  - maxSkew: {{ $s.maxSkew }}
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $s.whenUnsatisfiable }}
    nodeTaintsPolicy: Honor
    labelSelector:
      matchLabels:
        {{- include "rlmesh.selectorLabels" (dict "root" $.root "component" $.component) | nindent 8 }}
  {{- end }}
{{- end }}

{{/* A drain evicts at most all but one replica of a component with .replicas ≥ 2 (none below: a PDB would block every drain of a single replica) */}}
{{- define "rlmesh.podDisruptionBudget" -}}
{{- if ge (int .replicas) 2 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "rlmesh.labels" . | nindent 4 }}
spec:
  minAvailable: 1
  selector:
    matchLabels:
      {{- include "rlmesh.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{- define "rlmesh.controlSecret" -}}{{ .Values.credentials.controlSecret | default (include "rlmesh.name.controlSecret" .) }}{{- end }}
{{- define "rlmesh.pullSecret" -}}{{ .Values.credentials.pullSecret | default (include "rlmesh.name.pullSecret" .) }}{{- end }}
{{- define "rlmesh.joinPullSecret" -}}{{ include "rlmesh.name.joinPullSecret" . }}{{- end }}

{{- /* rlmesh.runtimeConfig is generated from lib/runtime-config-spec.ts (_runtime-config.tpl) */}}

{{/* 90% of agent.spool.size in bytes (spoolMaxBytes() in lib/values-schema.ts; rlmesh.quantityBytes is in the generated _quantity.tpl) */}}
{{- define "rlmesh.spoolMaxBytes" -}}
{{- mulf (include "rlmesh.quantityBytes" .Values.agent.spool.size | float64) 0.9 | floor | int64 }}
{{- end }}

{{/* "true" when the pods trust a CA bundle: inline (controlPlane.caBundle) or from the operator's ConfigMap or Secret (controlPlane.caBundleFrom) */}}
{{- define "rlmesh.hasCaBundle" -}}
{{- if or .Values.controlPlane.caBundle .Values.controlPlane.caBundleFrom }}true{{ end }}
{{- end }}

{{/* Pod annotations that roll a Deployment when its config changes (with caBundleFrom: when the reference changes; its contents are the operator's) */}}
{{- define "rlmesh.configChecksums" -}}
checksum/runtime-config: {{ include "rlmesh.runtimeConfig" . | sha256sum }}
{{- if .Values.controlPlane.caBundle }}
checksum/ca-bundle: {{ .Values.controlPlane.caBundle | sha256sum }}
{{- else if .Values.controlPlane.caBundleFrom }}
checksum/ca-bundle: {{ .Values.controlPlane.caBundleFrom | toJson | sha256sum }}
{{- end }}
{{- end }}

{{/* Volumes and mounts for the runtime config (and CA bundle) */}}
{{- define "rlmesh.configVolumes" -}}
- name: config
  configMap:
    name: {{ include "rlmesh.name.runtimeConfigMap" . }}
- name: tmp
  emptyDir:
    sizeLimit: {{ include "rlmesh.tmpSizeLimit" . }}
{{- if .Values.controlPlane.caBundle }}
- name: ca-bundle
  configMap:
    name: {{ include "rlmesh.name.caBundleConfigMap" . }}
{{- else if .Values.controlPlane.caBundleFrom }}
{{- /* optional: false, so a missing ConfigMap, Secret or key keeps the pod from starting, with the reason in its Events */}}
{{- with .Values.controlPlane.caBundleFrom.configMap }}
- name: ca-bundle
  configMap:
    name: {{ .name }}
    items:
      - key: {{ .key | default "ca.crt" | quote }}
        path: ca.crt
    optional: false
{{- end }}
{{- with .Values.controlPlane.caBundleFrom.secret }}
- name: ca-bundle
  secret:
    secretName: {{ .name }}
    items:
      - key: {{ .key | default "ca.crt" | quote }}
        path: ca.crt
    optional: false
{{- end }}
{{- end }}
{{- end }}

{{- define "rlmesh.configMounts" -}}
- name: config
  mountPath: {{ include "rlmesh.mount.configDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if include "rlmesh.hasCaBundle" . }}
- name: ca-bundle
  mountPath: {{ include "rlmesh.mount.caDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "rlmesh.commonEnv" -}}
- name: RLMESH_CONFIG
  value: {{ include "rlmesh.mount.configFile" . }}
- name: LOG_LEVEL
  value: {{ .Values.logging.level | quote }}
- name: LOG_FORMAT
  value: {{ .Values.logging.format | quote }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if include "rlmesh.hasCaBundle" . }}
- name: NODE_EXTRA_CA_CERTS
  value: {{ include "rlmesh.mount.caFile" . }}
{{- end }}
{{- end }}

{{- define "rlmesh.ports" -}}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
- name: health
  containerPort: 8081
  protocol: TCP
{{- end }}

{{- define "rlmesh.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: health
  periodSeconds: 5
  failureThreshold: 2
{{- end }}

{{- /* DNS: only to network.dnsPeers, only on network.dnsPorts, UDP and TCP */}}
{{- define "rlmesh.dnsEgressRule" -}}
- to:
    {{- toYaml .Values.network.dnsPeers | nindent 4 }}
  ports:
    {{- range .Values.network.dnsPorts }}
    - protocol: UDP
      port: {{ . }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
{{- end }}
{{- /*
The Kubernetes API's addresses, as a JSON list of CIDRs: network.apiServerAddresses when
set; otherwise what helm install and upgrade read from the cluster: the endpoints of the
EndpointSlices of Service default/kubernetes, where its DNAT leads, and that Service's
ClusterIPs, for enforcers that match before the DNAT. Empty where helm cannot read the
cluster (helm template, helm lint, --dry-run=client): _validate.tpl then refuses.
*/}}
{{- define "rlmesh.apiServerAddresses" -}}
{{- $cidrs := list }}
{{- if .Values.network.apiServerAddresses }}
{{- $cidrs = .Values.network.apiServerAddresses }}
{{- else }}
{{- $ips := list }}
{{- $slices := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "" }}
{{- range (dig "items" list $slices) }}
{{- if and (eq (dig "metadata" "labels" "kubernetes.io/service-name" "" .) "kubernetes") (ne (dig "addressType" "" .) "FQDN") }}
{{- range (dig "endpoints" list .) }}
{{- $ips = concat $ips (dig "addresses" list .) }}
{{- end }}
{{- end }}
{{- end }}
{{- $svc := lookup "v1" "Service" "default" "kubernetes" }}
{{- $ips = concat $ips (dig "spec" "clusterIPs" list $svc) }}
{{- with (dig "spec" "clusterIP" "" $svc) }}{{ $ips = append $ips . }}{{ end }}
{{- range (without (uniq $ips) "" "None") }}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) }}
{{- end }}
{{- end }}
{{- toJson $cidrs }}
{{- end }}
{{- /*
The Kubernetes API: network.apiServerPorts, to its addresses only (rlmesh.apiServerAddresses;
the install refuses when they are not known, so no pod gets those ports to every address).
With .controlPlane also the control plane on TCP 443 (rlmesh.controlPlaneEgressRules).
.root is the root context.
*/}}
{{- define "rlmesh.apiEgressRule" -}}
- to:
    {{- range (include "rlmesh.apiServerAddresses" .root | fromJsonArray) }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- range (.root.Values.network.apiServerPorts | uniq) }}
    - protocol: TCP
      port: {{ int . }}
    {{- end }}
{{- if .controlPlane }}
{{ include "rlmesh.controlPlaneEgressRules" .root }}
{{- end }}
{{- end }}
{{- /*
The agent's way to the control plane on TCP 443. Through controlPlane.proxy when set: the
proxy's addresses on its port. Without: the public addresses (the egress proxy's public
blocks, _egress-public-blocks.tpl) and controlPlane.addresses (a control plane at private
addresses, such as a staging or self-hosted cell). With a proxy, controlPlane.addresses
stay reachable directly (for a control plane in controlPlane.proxy.noProxy).
*/}}
{{- define "rlmesh.controlPlaneEgressRules" -}}
{{- if .Values.controlPlane.proxy.url }}
{{- include "rlmesh.proxyEgressRule" . }}
{{- with .Values.controlPlane.addresses }}
- to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - protocol: TCP
      port: 443
{{- end }}
{{- else -}}
- to:
    {{- include "rlmesh.egressPublicBlocks" . | nindent 4 }}
    {{- range .Values.controlPlane.addresses }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - protocol: TCP
      port: 443
{{- end }}
{{- end }}
{{- /*
controlPlane.proxy: the corporate proxy, at its addresses (controlPlane.proxy.addresses, or
the url's IP address) on its port. With a proxy set it replaces the rules to every public
address: the agent's TCP 443 and the egress proxy's public blocks on egress.allowedPorts.
*/}}
{{- define "rlmesh.proxyEgressRule" -}}
{{- $p := include "rlmesh.proxy" . | fromJson -}}
- to:
    {{- range $p.addresses }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - protocol: TCP
      port: {{ int $p.port }}
{{- end }}

{{- /*
controlPlane.proxy.existingSecret, mounted read-only at MOUNTS.proxyCredentialsDir (the
agent's and the egress proxy's runtime config name it credentialsDir): a volume, so no
component needs a right to read Secrets. Not optional: a missing Secret, or one without
the key username or password, keeps the pod in ContainerCreating with an event that names
the Secret (MountVolume.SetUp failed … secret "…" not found), and the kubelet retries the
mount, so the pod starts once the Secret exists. Optional, the pod would start and meet the
proxy without credentials, and the cause would show only as the proxy's 407 in its logs.
*/}}
{{- define "rlmesh.proxyCredentialsVolume" -}}
- name: proxy-credentials
  secret:
    secretName: {{ .Values.controlPlane.proxy.existingSecret }}
    optional: false
    # 0440: the owner (root) and the pod's fsGroup read them
    defaultMode: 288
    items:
      - key: username
        path: username
      - key: password
        path: password
{{- end }}

{{- define "rlmesh.proxyCredentialsMount" -}}
- name: proxy-credentials
  mountPath: {{ include "rlmesh.mount.proxyCredentialsDir" . }}
  readOnly: true
{{- end }}
{{- /*
The metrics and health ports: from network.metricsPeers only (a peer with a podSelector
alone selects pods in the release namespace, from the runs namespace's policies too), and
from the API's addresses (rlmesh.apiServerAddresses), through which rlmesh status reads the egress proxy's
metrics. No peer: no rule at all, as a rule without `from` would admit every source. The
kubelet's probes come from the node, which NetworkPolicy enforcers let through.
*/}}
{{- define "rlmesh.metricsIngressRule" -}}
{{- $root := . }}
{{- $peers := list }}
{{- range .Values.network.metricsPeers }}
{{- if and (hasKey . "podSelector") (not (hasKey . "namespaceSelector")) (not (hasKey . "ipBlock")) }}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" $root.Release.Namespace)) "podSelector" .podSelector) }}
{{- else }}
{{- $peers = append $peers . }}
{{- end }}
{{- end }}
{{- range (include "rlmesh.apiServerAddresses" . | fromJsonArray) }}
{{- $peers = append $peers (dict "ipBlock" (dict "cidr" .)) }}
{{- end }}
{{- if $peers }}
- from:
    {{- toYaml $peers | nindent 4 }}
  ports:
    - protocol: TCP
      port: {{ .Values.metrics.port }}
    - protocol: TCP
      port: 8081
{{- end }}
{{- end }}

{{/*
Fills every value missing from .Values with this chart version's default, in
place. `helm upgrade --reuse-values` hands templates the previous release's
values, without the defaults of values added since; every template includes
this first so such an upgrade renders with the new defaults. (Only missing keys
are filled: a user's false, 0 or "" stays.)
*/}}
{{- define "rlmesh.fillMissing" -}}
{{- $dst := .dst }}
{{- range $k, $v := .src }}
{{- if not (hasKey $dst $k) }}
{{- $_ := set $dst $k (deepCopy $v) }}
{{- else if and (kindIs "map" $v) (kindIs "map" (get $dst $k)) }}
{{- include "rlmesh.fillMissing" (dict "dst" (get $dst $k) "src" $v) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "rlmesh.defaults" -}}
{{- include "rlmesh.fillMissing" (dict "dst" .Values "src" (include "rlmesh.defaultValues" . | fromJson)) }}
{{- end }}

{{/*
The alert rules of the PrometheusRule (templates/prometheus-rule.yaml), one group.
Every description says what happened, why it matters and what to do.
*/}}
{{- define "rlmesh.alertRules" -}}
{{- $ns := .Release.Namespace }}
{{- $runs := include "rlmesh.name.runsNamespace" . }}
{{- $sel := printf "namespace=\"%s\"" $ns }}
{{- $selRuns := printf "namespace=~\"%s|%s\"" $ns $runs }}
{{- $extra := .Values.metrics.prometheusRule.alertLabels }}
- name: rlmesh-runtime
  rules:
    - alert: RLMeshAgentDisconnected
      expr: |-
        max by (namespace) (rlmesh_agent_session_state{ {{- $sel }},state="connected"}) == 0
        or absent(rlmesh_agent_session_state{ {{- $sel }},state="connected"})
      for: 10m
      labels:
        severity: critical
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: The RLMesh agent in {{ $ns }} has not been connected to the platform for 10 minutes.
        description: >-
          The agent holds the cluster's only connection to the platform. While it is away no
          new evaluation reaches this cluster; those running go on, and their results wait in
          the agent's spool until it reconnects. Find why in its log:
          `kubectl -n {{ $ns }} logs deploy/rlmesh-cluster-agent` (each connection problem is
          one line with its cause and fix). The series rlmesh_agent_session_state says which
          state it is in: `unauthenticated` means the platform refused its control credential
          (revoked, or expired after a rotation it did not store): run a New install command
          from Clusters → your cluster. `backoff` means it cannot reach controlPlane.apiHost on
          443: check DNS, the firewall, controlPlane.proxy and controlPlane.caBundle. No series
          at all means the agent pod is not running or not scraped:
          `kubectl -n {{ $ns }} get pods -l app.kubernetes.io/name=rlmesh-cluster-agent`.
    - alert: RLMeshAgentSpoolFilling
      expr: |-
        max by (namespace) (rlmesh_agent_spool_bytes{ {{- $sel }}})
          / max by (namespace) (rlmesh_agent_spool_max_bytes{ {{- $sel }}} > 0) > 0.75
      for: 5m
      labels:
        severity: warning
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: The RLMesh agent's spool in {{ $ns }} is {{`{{ $value | humanizePercentage }}`}} full.
        description: >-
          The spool holds the evaluation updates the platform has not acknowledged. It fills
          while the agent is disconnected, or when the platform does not acknowledge what it
          sends. When it is full, new updates wait (the latest status of each evaluation is
          kept) and the platform sees results late. Restore the connection first (see
          RLMeshAgentDisconnected and `kubectl -n {{ $ns }} logs deploy/rlmesh-cluster-agent`);
          the spool drains by itself once updates are acknowledged. If the outage will be long,
          raise agent.spool.size (the spool PVC; the agent takes up to 90% of it) with
          `helm upgrade --reuse-values --set agent.spool.size=<size>` on a StorageClass that
          allows volume expansion.
    - alert: RLMeshCredentialNearExpiry
      expr: |-
        (max by (namespace, purpose) (rlmesh_agent_credential_valid_until_seconds{ {{- $sel }}}) > 0) - time()
      for: 15m
      labels:
        severity: warning
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: The {{`{{ $labels.purpose }}`}} credential of the RLMesh cluster in {{ $ns }} stops being valid in {{`{{ $value | humanizeDuration }}`}}.
        description: >-
          The platform rotated the {{`{{ $labels.purpose }}`}} credential, and the agent has not
          stored the new value for 15 minutes: the value in use stays valid only until the
          rotation's overlap ends. Then the agent (control), the kubelet pulling runtime and
          evaluation images (pull) or Prometheus's remote write (relay) is refused. The agent's
          log says why the new value was not stored:
          `kubectl -n {{ $ns }} logs deploy/rlmesh-cluster-agent | grep -i rotat` (usually
          it cannot write its Secret while the API server is away, or it refused a value of the
          wrong form). Fix what it names, or rotate the credential again from the platform; if
          that fails too, run a New install command before the time above runs out. With your
          own Secrets (credentials.*), write the rotated value into the Secret yourself.
    - alert: RLMeshCredentialNearExpiry
      expr: |-
        (max by (namespace, purpose) (rlmesh_agent_credential_valid_until_seconds{ {{- $sel }}}) > 0) - time() < 7200
      labels:
        severity: critical
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: The {{`{{ $labels.purpose }}`}} credential of the RLMesh cluster in {{ $ns }} stops being valid in {{`{{ $value | humanizeDuration }}`}}.
        description: >-
          Less than two hours are left before the {{`{{ $labels.purpose }}`}} credential in use
          is refused, and the rotated value is still not stored. Run a New install command from
          Clusters → your cluster at once (`helm upgrade --install … --reset-then-reuse-values
          --set joinToken=…`, as printed): it issues new credentials and keeps your values. The
          agent's log says why the rotation was not stored:
          `kubectl -n {{ $ns }} logs deploy/rlmesh-cluster-agent | grep -i rotat`.
    - alert: RLMeshEvaluationsFailing
      expr: |-
        sum by (namespace) (increase(rlmesh_controller_phase_transitions_total{ {{- $sel }},phase="Failed"}[1h]))
          / sum by (namespace) (increase(rlmesh_controller_phase_transitions_total{ {{- $sel }},phase=~"Succeeded|Failed"}[1h])) > 0.5
        and
        sum by (namespace) (increase(rlmesh_controller_phase_transitions_total{ {{- $sel }},phase="Failed"}[1h])) >= 3
      for: 5m
      labels:
        severity: warning
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: Most RLMesh evaluations in this cluster failed in the last hour ({{`{{ $value | humanizePercentage }}`}}).
        description: >-
          More than half of the evaluations that finished in the last hour failed (at least
          three). Each failure has a reason: `kubectl -n {{ $runs }} get rle` lists them
          (StartDeadlineExceeded, NetworkNotReady, ImageNotAllowed, an exit
          code …) and `kubectl -n {{ $runs }} describe rle <name>` says what to do; the query
          `sum by (reason) (increase(rlmesh_controller_phase_transitions_total{phase="Failed"}[1h]))`
          shows which dominates. One reason for all of them points at the cluster (quota,
          nodes, a missing pull Secret, NetworkPolicy enforcement); exit codes of the
          evaluation's own container are the evaluation author's to fix.
    - alert: RLMeshEgressRefusalsHigh
      expr: |-
        sum by (namespace) (rate(rlmesh_egress_decisions_total{ {{- $sel }},outcome="refused"}[15m])) > 0.1
        unless on (namespace)
        (
          5 * sum by (namespace) (rate(rlmesh_egress_decisions_total{ {{- $sel }},outcome="refused"}[1d] offset 15m))
            >= sum by (namespace) (rate(rlmesh_egress_decisions_total{ {{- $sel }},outcome="refused"}[15m]))
        )
      for: 10m
      labels:
        severity: warning
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: The RLMesh egress proxy in {{ $ns }} refuses {{`{{ $value | printf "%.2f" }}`}} requests/s, more than five times its usual rate.
        description: >-
          Evaluation pods reach the network only through the egress proxy, and it refuses
          every destination that is not an allowed, public one. Far more refusals than the day
          before mean an evaluation needs a host it may not reach (its results will suffer), or
          something in rlmesh-runs is probing. The rule that refuses:
          `sum by (rule) (rate(rlmesh_egress_decisions_total{outcome="refused"}[15m]))`; the
          destinations: `kubectl -n {{ $ns }} logs deploy/rlmesh-egress-proxy | grep refused`.
          A host evaluations need goes into egress.extraDomains (`helm upgrade --reuse-values
          --set-json 'egress.extraDomains=[…]'`); a private address stays refused unless
          egress.allowRanges opens it. Refusals you did not expect: report the evaluation to the
          platform.
    - alert: RLMeshArtifactCacheFull
      expr: |-
        max by (namespace) (rlmesh_controller_cache_bytes{ {{- $selRuns }}})
          / max by (namespace) (rlmesh_controller_cache_capacity_bytes{ {{- $selRuns }}} > 0) > 0.95
      for: 30m
      labels:
        severity: warning
        {{- with $extra }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        summary: The RLMesh artifact cache is {{`{{ $value | humanizePercentage }}`}} full.
        description: >-
          The cache filler evicts the least recently used artifacts, but never one an
          evaluation is using: a cache that stays this full holds artifacts in use, and an
          evaluation that needs a new artifact may fail to fetch it for lack of space (its
          status says why: `kubectl -n {{ $runs }} get rle`). Make the PVC larger:
          `helm upgrade --reuse-values --set artifactCache.storage.sharedPvc.size=<size>` (the
          StorageClass must allow expansion; otherwise
          `kubectl -n {{ $runs }} edit pvc rlmesh-artifact-cache` after moving to one that
          does), or run fewer evaluations with large artifacts at once. The filler's log:
          `kubectl -n {{ $runs }} logs deploy/rlmesh-artifact-cache-filler`.
{{- end }}
{{- /* A repository prefix as compared (normalPrefix() in lib/image-prefix.ts): the host in lower case, index.docker.io as docker.io, a bare host as its whole registry. */}}
{{- define "rlmesh.repositoryPrefix" -}}
{{- $parts := splitList "/" (ternary . (printf "%s/" .) (contains "/" .)) -}}
{{- $host := lower (first $parts) -}}
{{- printf "%s/%s" (ternary "docker.io" $host (eq $host "index.docker.io")) (join "/" (rest $parts)) -}}
{{- end }}
