{{/* Names are fixed (one observability release per runtime namespace); labels carry the release. */}}
{{- define "obs.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: rlmesh-observability
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{- define "obs.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{/*
The image a pod runs (dict "image" … "root" $): repository@digest when .image.digest
is set, else the digest the release pushed for a released tag, else repository:tag;
the repository under global.imageRegistry when that is set, its path kept (a mirror;
imageReference() and relocatedRepository() in lib/chart-values.ts are the same rule).
*/}}
{{- define "obs.image" -}}
{{- $img := .image -}}
{{- $released := get (include "obs.releasedImages" . | fromJson) (base $img.repository) -}}
{{- $repo := $img.repository -}}
{{- $mirror := trimSuffix "/" (((.root.Values.global | default dict).imageRegistry) | default "") -}}
{{- if $mirror -}}
{{- $parts := splitn "/" 2 $repo -}}
{{- $path := $repo -}}
{{- if and $parts._1 (or (contains "." $parts._0) (contains ":" $parts._0) (eq $parts._0 "localhost")) -}}
{{- $path = $parts._1 -}}
{{- else if not (contains "/" $repo) -}}
{{- $path = printf "library/%s" $repo -}}
{{- end -}}
{{- $repo = printf "%s/%s" $mirror $path -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else if and $released (eq $img.tag $released.tag) -}}
{{- printf "%s@%s" $repo $released.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo $img.tag -}}
{{- end -}}
{{- end }}

{{/* restricted Pod Security; .uid is the image's own non-root user */}}
{{- define "obs.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "obs.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Scheduling and pull Secrets of a component: .c is its values block */}}
{{- define "obs.podScheduling" -}}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "obs.resources" -}}
requests:
  cpu: {{ .requests.cpu | quote }}
  memory: {{ .requests.memory | quote }}
limits:
  cpu: {{ .limits.cpu | quote }}
  memory: {{ .limits.memory | quote }}
{{- end }}

{{- define "obs.grafanaPasswordSecret" -}}{{ .Values.grafana.adminPasswordSecretName | default "rlmesh-grafana-admin" }}{{- end }}

{{/*
prometheus.yml. Scrapes the rlmesh-runtime pods (label rlmesh.dev/metrics=true,
port named metrics) in prometheus.runtimeNamespace through Kubernetes service
discovery, labels every series cluster=<clusterLabel>, and remote-writes with
the relay credential read from its file on every request.
*/}}
{{- define "obs.prometheusConfig" -}}
{{- $p := .Values.prometheus -}}
global:
  scrape_interval: {{ $p.scrapeInterval }}
  evaluation_interval: {{ $p.scrapeInterval }}
  external_labels:
    cluster: {{ $p.clusterLabel | quote }}
scrape_configs:
  - job_name: rlmesh-runtime
    kubernetes_sd_configs:
      - role: pod
        namespaces:
          names: [{{ $p.runtimeNamespace | quote }}]
        selectors:
          - role: pod
            label: "app.kubernetes.io/part-of=rlmesh-runtime,rlmesh.dev/metrics=true"
    relabel_configs:
      # one target per pod: its container port named metrics
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: metrics
        action: keep
      - source_labels: [__meta_kubernetes_pod_phase]
        regex: Pending|Running
        action: keep
      - source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]
        target_label: component
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
  # Prometheus's own metrics, remote-written too: the platform sees remote-write failures
  - job_name: prometheus
    static_configs:
      - targets: ["localhost:9090"]
        labels:
          component: rlmesh-prometheus
{{- with $p.remoteWrite }}
remote_write:
  {{- range $i, $rw := . }}
  - name: {{ printf "rlmesh-relay-%d" $i | quote }}
    url: {{ $rw.url | quote }}
    {{- /* Helm fills schema defaults in maps, not in list items: the same defaults here */}}
    {{- $auth := $rw.authorization | default dict }}
    authorization:
      type: {{ $auth.type | default "Bearer" }}
      credentials_file: {{ $auth.credentials_file | default "/etc/rlmesh/relay/relay-secret" | quote }}
    {{- if $p.caBundle }}
    tls_config:
      ca_file: /etc/rlmesh/ca/ca.crt
    {{- end }}
    {{- with $rw.queue_config }}
    queue_config:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  {{- end }}
{{- end }}
{{- end }}

{{/* DNS to the cluster's resolver only: network.dnsPeers on network.dnsPorts, UDP and TCP (the runtime chart's rlmesh.dnsEgressRule) */}}
{{- define "obs.dnsEgressRule" -}}
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
The Kubernetes API's addresses as a JSON list of CIDRs, as the runtime chart reads them
(its rlmesh.apiServerAddresses): network.apiServerAddresses when set, else the endpoints
of Service default/kubernetes and its ClusterIPs, read at install. Empty where
helm cannot read the cluster (helm template): _validate.tpl then refuses.
*/}}
{{- define "obs.apiServerAddresses" -}}
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

{{- /* The ports of prometheus.remoteWrite's URLs (443 when a URL names none), as a JSON list */}}
{{- define "obs.remoteWritePorts" -}}
{{- $ports := list }}
{{- range .Values.prometheus.remoteWrite }}
{{- $host := (urlParse .url).host }}
{{- $port := regexFind ":[0-9]+$" $host | trimPrefix ":" }}
{{- $ports = append $ports (int ($port | default "443")) }}
{{- end }}
{{- toJson ($ports | uniq) }}
{{- end }}
