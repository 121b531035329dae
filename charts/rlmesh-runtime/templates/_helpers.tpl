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
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
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
The Kubernetes API: network.apiServerPorts, to network.apiServerAddresses when set. A
NetworkPolicy cannot name the API server, and its addresses change on managed control
planes, so by default only the ports are known. With .controlPlane also the control
plane (TCP 443 anywhere: its addresses are not known in advance). .root is the root context.
*/}}
{{- define "rlmesh.apiEgressRule" -}}
- {{- with .root.Values.network.apiServerAddresses }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
  ports:
    {{- range (.root.Values.network.apiServerPorts | uniq) }}
    - protocol: TCP
      port: {{ int . }}
    {{- end }}
{{- if .controlPlane }}
{{- if .root.Values.controlPlane.proxy.url }}
{{ include "rlmesh.proxyEgressRule" .root }}
{{- else }}
- ports:
    - protocol: TCP
      port: 443
{{- end }}
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
{{- define "rlmesh.metricsIngressRule" -}}
- ports:
    - protocol: TCP
      port: {{ .Values.metrics.port }}
    - protocol: TCP
      port: 8081
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
