// The refusals of the runtime chart's values that JSON Schema cannot express:
// crossFieldErrors() in lib/values-schema.ts decides when, and the chart's
// templates/_validate.tpl includes the generated rlmesh.refusal.<name> templates.
import type { Refusal } from './refusals.ts';
import { KNOB_REFUSALS } from './knob-refusals.ts';

export const VALUES_REFUSALS = {
  ...KNOB_REFUSALS,
  noCredentials: {
    path: 'joinToken',
    message: 'neither joinToken nor credentials.controlSecret is set: pass --set joinToken=rlm_jt_… from Clusters → Connect your cluster, or name your own Secrets in credentials.controlSecret and credentials.pullSecret',
  },
  tokenAndSecrets: {
    path: 'credentials.controlSecret',
    message: 'joinToken and credentials.controlSecret are both set: use joinToken (the agent writes its own Secrets) or credentials.* (Secrets you deliver), not both',
  },
  pullSecretMissing: {
    path: 'credentials.pullSecret',
    message: 'credentials.controlSecret is set but credentials.pullSecret is empty: name the dockerconfigjson Secret you deliver in rlmesh-system and rlmesh-runs',
  },
  controlSecretMissing: {
    path: 'credentials.controlSecret',
    message: 'credentials.pullSecret is set but credentials.controlSecret is empty: bring both Secrets, or neither and use joinToken',
  },
  cacheAccessMode: {
    path: 'artifactCache.storage.sharedPvc.accessModes',
    message: '{mode} cannot hold the artifact cache (the controller writes it while evaluation pods read it): use [ReadWriteOnce] or [ReadWriteMany]',
  },
  readWriteManyClass: {
    path: 'storage.className',
    message: 'artifactCache.storage.sharedPvc.accessModes has ReadWriteMany but storage.className is empty: set storage.className to a StorageClass that provides ReadWriteMany (e.g. NFS, CephFS, Filestore)',
  },
  quotaResourceName: {
    path: 'evaluations.resourceQuota.hard.{key}',
    message: '{key} is not a ResourceQuota resource name: use pods, requests.cpu, limits.memory, requests.nvidia.com/gpu, count/<resource> and the like',
  },
  dnsPeerEmpty: {
    path: 'network.dnsPeers.{index}',
    message: 'this NetworkPolicy peer is empty: give it an ipBlock, or a namespaceSelector and/or podSelector, that selects your DNS resolver',
  },
  dnsPeerMixed: {
    path: 'network.dnsPeers.{index}',
    message: 'this NetworkPolicy peer has both an ipBlock and selectors: a peer is one or the other; list them as two peers',
  },
  metricsPeerEmpty: {
    path: 'network.metricsPeers.{index}',
    message: 'this NetworkPolicy peer is empty, and an empty peer would admit every source: give it an ipBlock, or a namespaceSelector and/or podSelector, that selects your Prometheus',
  },
  metricsPeerMixed: {
    path: 'network.metricsPeers.{index}',
    message: 'this NetworkPolicy peer has both an ipBlock and selectors: a peer is one or the other; list them as two peers',
  },
  caBundleTwice: {
    path: 'controlPlane.caBundleFrom',
    message: 'controlPlane.caBundle and controlPlane.caBundleFrom are both set: the CA bundle comes from one place; keep the inline PEM in caBundle or the ConfigMap or Secret in caBundleFrom, and remove the other',
  },
  caBundleFromBoth: {
    path: 'controlPlane.caBundleFrom',
    message: 'names both a configMap and a secret: the CA bundle comes from one of them; keep controlPlane.caBundleFrom.configMap or controlPlane.caBundleFrom.secret',
  },
  pinWithoutBundle: {
    path: 'controlPlane.pinCaBundle',
    message: 'is true but there is no CA bundle to pin: set controlPlane.caBundle (or caBundleFrom) to the CA of the control plane, or set pinCaBundle to false to trust the system roots',
  },
  caBundleFromNone: {
    path: 'controlPlane.caBundleFrom',
    message: 'is set but names neither a configMap nor a secret: set controlPlane.caBundleFrom.configMap (or .secret) to {name: <name>, key: <key>}, or remove caBundleFrom to trust the system roots',
  },
  apiServerAddressesUnknown: {
    path: 'network.apiServerAddresses',
    message:
      "is empty and the Kubernetes API's addresses could not be read from the cluster (helm template, helm lint and --dry-run=client do not read it; an install reads EndpointSlice and Service default/kubernetes): without them the chart would have to open the API's ports to every address. Run rlmesh preflight against the cluster, which prints the --set network.apiServerAddresses={…} line to add, or list the endpoints of kubectl get endpointslice -n default -l kubernetes.io/service-name=kubernetes and the ClusterIP of kubectl get service -n default kubernetes as /32 or /128 CIDRs",
  },
  evaluationPullSecretPlatform: {
    path: 'evaluations.imagePullSecrets.{index}.name',
    message: "{name} is the platform's pull Secret, which every evaluation pod already carries (the agent writes and rotates it): list only Secrets you create in rlmesh-runs for the registries in evaluations.extraRegistries",
  },
  evaluationPullSecretTwice: {
    path: 'evaluations.imagePullSecrets.{index}.name',
    message: '{name} is listed more than once: list each pull Secret once',
  },
  evaluationPullSecretUnmapped: {
    path: 'evaluations.imagePullSecrets.{index}.registries',
    message:
      "{name} names no repository prefixes: a pull Secret is attached only to evaluation pods whose image lies under one of its registries, so that the platform cannot have the kubelet use your credential for other images (a confused deputy); list the prefixes it is for, e.g. registries: [registry.corp.example/evals/]",
  },
  evaluationPullSecretBareHost: {
    path: 'evaluations.imagePullSecrets.{index}.registries.{i}',
    message: '{host} is a registry host, and registries takes repository prefixes: write {host}/evals/ (the repositories under evals/) or {host}/ (every repository of that registry)',
  },
  extraRegistryBareHost: {
    path: 'evaluations.extraRegistries.{index}',
    message:
      '{host} is a registry host, and evaluations.extraRegistries takes repository prefixes (it took hosts before): write {host}/evals/ to allow the repositories under evals/, or {host}/ to allow every repository of that registry (the platform may then run any image in it, with the pull Secrets mapped to it)',
  },
  dashboardNoLabel: {
    path: 'metrics.grafanaDashboard.labels',
    message: 'metrics.grafanaDashboard.enabled is true but the ConfigMap would have no label, and Grafana\'s dashboard sidecar finds dashboards only by label: set your sidecar\'s label, e.g. --set-json \'metrics.grafanaDashboard.labels={"grafana_dashboard":"1"}\'',
  },
  alertLabelName: {
    path: 'metrics.prometheusRule.alertLabels.{key}',
    message: '{key:q} is not a Prometheus label name (a letter or _, then letters, digits and _): rename it, e.g. team',
  },
  alertLabelReserved: {
    path: 'metrics.prometheusRule.alertLabels.{key}',
    message: '{key} is set by the chart on every alert (alertname and severity: critical or warning, which your Alertmanager routes may match): choose another label name',
  },
  bothMonitors: {
    path: 'metrics.podMonitor.enabled',
    message: 'metrics.serviceMonitor and metrics.podMonitor are both enabled: every target would be scraped twice; enable one',
  },
  ephemeralBelowRequest: {
    path: '{block}.resources.limits.ephemeral-storage',
    message: '{block}.resources.limits.ephemeral-storage {limit} is below {block}.resources.requests.ephemeral-storage {request}: set the limit to at least the request',
  },
  ephemeralBelowTmp: {
    path: '{block}.resources.limits.ephemeral-storage',
    message: "{block}.resources.limits.ephemeral-storage {limit} is below {tmp}, the size of the pod's /tmp emptyDir, which counts against it: set at least {tmp}",
  },
  limitRangeAboveMax: {
    path: '{field}.{resource}',
    message: '{field}.{resource} {value} is above evaluations.limitRange.max.{resource} {max}: the API server would refuse every pod in rlmesh-runs that gets it; lower it, or raise the max',
  },
  // controlPlane.proxy (proxyErrors() in lib/outbound-proxy-values.ts); no message repeats the url, which may hold a password
  proxyUrlMissing: {
    path: 'controlPlane.proxy.{key}',
    message: 'controlPlane.proxy.{key} is set but controlPlane.proxy.url is empty, so no proxy is used: set url to your proxy (http://host:port), or remove {key}',
  },
  proxyUrlScheme: {
    path: 'controlPlane.proxy.url',
    message: 'is not an http:// or https:// URL: set the scheme, host and port of your HTTP proxy, e.g. http://proxy.corp.example:3128 (other schemes, such as socks5://, are not supported)',
  },
  proxyUrlCredentials: {
    path: 'controlPlane.proxy.url',
    message: 'has credentials (user:password@) in it, where every reader of the values and of ConfigMap rlmesh-runtime-config would see them: remove them from the URL, and put them in a Secret in the release namespace with keys username and password, named by controlPlane.proxy.existingSecret',
  },
  proxyUrlPath: {
    path: 'controlPlane.proxy.url',
    message: 'has a path, query or fragment: a proxy is named by scheme, host and port only (http://proxy.corp.example:3128)',
  },
  proxyUrlHost: {
    path: 'controlPlane.proxy.url',
    message: 'has no valid host or port: give a lowercase host name, an IPv4 address or a bracketed IPv6 address ([2001:db8::1]), and a port from 1 to 65535 or none (80 for http, 443 for https)',
  },
  proxyAddressesMissing: {
    path: 'controlPlane.proxy.addresses',
    message: "controlPlane.proxy.url names its host by name, and a NetworkPolicy can only allow addresses: list the CIDRs the proxy listens on (e.g. [10.20.30.40/32], every address the name resolves to) in controlPlane.proxy.addresses, or give the proxy's IP address in the url",
  },
  proxyAddressNotCidr: {
    path: 'controlPlane.proxy.addresses.{index}',
    message: '{address:q} is not a CIDR: write each address the proxy listens on with its prefix length, e.g. 10.20.30.40/32 or 2001:db8::10/128',
  },
  placementKey: {
    path: 'evaluations.{field}.{key}',
    message: '{key:q} is not a label or annotation key: an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit (example.com/team)',
  },
  placementReservedKey: {
    path: 'evaluations.{field}.{key}',
    message:
      '{key} is a key the runtime sets on every evaluation pod (rlmesh.dev/*, app.kubernetes.io/managed-by, name, part-of, instance and component), which the controller and the NetworkPolicies select by: the operator\'s labels and annotations may not set it; choose a key of your own, such as example.com/{field}',
  },
  placementPlatform: {
    path: 'evaluations.nodeSelector.{key}',
    message: '{key}={value} excludes every node the runtime runs on ({key} In [{allowed}]): no evaluation could ever be scheduled; select nodes of that platform, or leave the key out',
  },
  priorityClassSystem: {
    path: 'evaluations.priorityClassName',
    message: '{name} is a system PriorityClass, reserved for the pods that keep nodes and the cluster running, which evaluations would then preempt: create a PriorityClass of your own for evaluations and name it here',
  },
  nodeTermEmpty: {
    path: 'evaluations.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.{index}',
    message: 'this required node term has neither matchExpressions nor matchFields, and such a term matches no node: give it the requirements of the nodes evaluations may run on, or remove it',
  },
} as const satisfies Record<string, Refusal>;
