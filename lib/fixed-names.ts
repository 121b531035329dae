// The names the product fixes (not the release: only labels carry it), once.
// The TypeScript code imports them; scripts/generators/chart-names.ts writes them
// into the chart's templates/_names.tpl as rlmesh.name.<key>, which the templates include.

export const NAMES = {
  /** the platform's production registry: the registry of the runtime's own images, which controlPlane.registryHost and global.imageRegistry move */
  platformRegistry: 'registry.rlmesh.dev',
  /** the namespace evaluations run in */
  runsNamespace: 'rlmesh-runs',
  /** Secret: the agent's control-plane credential (default of credentials.controlSecret) */
  controlSecret: 'rlmesh-cluster-control',
  /** Secret: the registry pull credential the join writes (default of credentials.pullSecret) */
  pullSecret: 'rlmesh-registry-pull',
  /** Secret: the join token as a pull credential, until the join has written pullSecret */
  joinPullSecret: 'rlmesh-registry-join',
  /** Secret: the CRD upgrade hook's pull credential (kept on uninstall) */
  crdHookPullSecret: 'rlmesh-registry-join-crd-upgrade',
  /** Secret: the metrics relay credential (observability.enabled) */
  relaySecret: 'rlmesh-cluster-relay-secret',
  /** Secret: the join token, passed to the agent as env */
  joinTokenSecret: 'rlmesh-join-token',
  /** suffix of an evaluation's entry (key) in the artifact-sources Secrets: its artifacts' source credentials */
  sourcesSecretSuffix: '-sources',
  /** suffix of the per-evaluation Secret of secret environment values the agent writes in the runs namespace */
  envSecretSuffix: '-env',
  /** Secrets rlmesh-artifact-sources-<n> (ARTIFACT_SOURCES_SECRETS), written by the agent in the runs namespace, mounted into the cache filler */
  artifactSourcesSecret: 'rlmesh-artifact-sources',
  /** Service of the egress proxy */
  egressProxyService: 'rlmesh-egress-proxy',
  /** PVC of the shared artifact cache (runs namespace) */
  artifactCachePvc: 'rlmesh-artifact-cache',
  /** PVC of the agent's spool */
  agentSpoolPvc: 'rlmesh-agent-spool',
  /** ConfigMap of the runtime config (key config.json) */
  runtimeConfigMap: 'rlmesh-runtime-config',
  /** ConfigMap of controlPlane.caBundle (key ca.crt) */
  caBundleConfigMap: 'rlmesh-ca-bundle',
  /** ConfigMap of the cluster's own address ranges, written by the agent, mounted by the egress proxy */
  clusterRangesConfigMap: 'rlmesh-cluster-ranges',
  /** ConfigMap of the platform's output hosts (lib/output-hosts.ts), written by the agent, mounted by the egress proxy */
  outputHostsConfigMap: 'rlmesh-output-hosts',
  /** ConfigMap of the agent's preflight report */
  preflightConfigMap: 'rlmesh-preflight',
  /** ConfigMap of the agent's own state (session, credentials in use, spool), which rlmesh status reads; no secret in it */
  agentStatusConfigMap: 'rlmesh-agent-status',
  /** ConfigMap the cluster's operator writes with rlmesh drain (and deletes with rlmesh drain --undo); the agent only reads it */
  operatorDrainConfigMap: 'rlmesh-operator-drain',
  /** ConfigMap of the controller's NetworkPolicy probe result, and the probe pods' name */
  networkPolicyProbe: 'rlmesh-network-policy-probe',
  /** the agent's ClusterRole, owner of the Secrets it writes */
  agentClusterRole: 'rlmesh-cluster-agent',
  /** the read-only roles rlmesh status needs (Roles in the release and runs namespaces, a ClusterRole for RLMeshCaches): no Secret */
  statusRole: 'rlmesh-status',
} as const;

/**
 * The users pods run as, unless podSecurity.arbitraryUid lets OpenShift's SCC assign them.
 * runtime: the runtime image's own user (scripts/image/debian-base.ts NONROOT) and every pod the
 * chart renders. evaluation: every pod the controller starts (evaluation and NetworkPolicy probe
 * pods), a user no runtime component runs as, so that code the platform sends shares no UID with
 * the agent, the controller, the egress proxy or the cache filler (whose cache files it reads but
 * may not write) on a node without user namespaces; above the login.defs user range (1000-60000)
 * and below the 65532-65534 users images ship. The controller's admission policy holds it to this.
 */
export const POD_USERS = {
  runtime: { uid: 65532, gid: 65532 },
  evaluation: { uid: 64000, gid: 64000 },
} as const;

const CONFIG_DIR = '/etc/rlmesh/config';
const CA_DIR = '/etc/rlmesh/ca';
const CLUSTER_RANGES_DIR = '/etc/rlmesh/cluster-ranges';
const CLUSTER_RANGES_KEY = 'ranges';
const OUTPUT_HOSTS_DIR = '/etc/rlmesh/output-hosts';
const OUTPUT_HOSTS_KEY = 'hosts';
const PROXY_CREDENTIALS_DIR = '/etc/rlmesh/proxy-credentials';

/** Where the chart mounts files into its pods. */
export const MOUNTS = {
  configDir: CONFIG_DIR,
  configFile: `${CONFIG_DIR}/config.json`,
  caDir: CA_DIR,
  caFile: `${CA_DIR}/ca.crt`,
  clusterRangesDir: CLUSTER_RANGES_DIR,
  /** the key of ConfigMap clusterRangesConfigMap, one CIDR per line */
  clusterRangesKey: CLUSTER_RANGES_KEY,
  clusterRangesFile: `${CLUSTER_RANGES_DIR}/${CLUSTER_RANGES_KEY}`,
  outputHostsDir: OUTPUT_HOSTS_DIR,
  /** the key of ConfigMap outputHostsConfigMap, one host per line */
  outputHostsKey: OUTPUT_HOSTS_KEY,
  outputHostsFile: `${OUTPUT_HOSTS_DIR}/${OUTPUT_HOSTS_KEY}`,
  /** controlPlane.proxy.existingSecret (keys username and password), in the agent and the egress proxy */
  proxyCredentialsDir: PROXY_CREDENTIALS_DIR,
  /** the artifact-sources Secrets, projected into one directory of the cache filler (--sources-dir): the kubelet reads them, the filler needs no Secret rights */
  artifactSourcesDir: '/etc/rlmesh/artifact-sources',
  /** the agent's spool PVC (--spool-dir) */
  agentSpoolDir: '/var/lib/rlmesh/spool',
} as const;

/**
 * The Secrets that hold the artifact source credentials (S3 keys, presigned URLs) of the
 * evaluations, one key `<evaluation>-sources` each, spread by a hash of the name
 * (agent/artifact-sources.ts): a Secret holds at most 1 MiB, about 250 evaluations' worth.
 */
export const ARTIFACT_SOURCES_SECRETS: readonly string[] = Array.from({ length: 16 }, (_, i) => `${NAMES.artifactSourcesSecret}-${i}`);

/**
 * The platform every image of the runtime is built for (scripts/image/oci-layout.ts
 * writes linux/amd64 into each; add an architecture here only with images built for it).
 * Every pod the product runs requires such a node: the chart's (rlmesh.podScheduling
 * merges PLATFORM_NODE_REQUIREMENTS, rendered into _names.tpl, into each pod's
 * affinity) and evaluation pods (controller/pod-spec.ts); the agent offers the
 * platform only such nodes (agent/eligible-nodes.ts).
 */
export const RUNTIME_PLATFORM = { os: 'linux', architectures: ['amd64'] } as const;

/** The node affinity requirements (ANDed into every required term) that hold a pod to RUNTIME_PLATFORM's nodes. */
export const PLATFORM_NODE_REQUIREMENTS: readonly { key: string; operator: 'In'; values: string[] }[] = [
  { key: 'kubernetes.io/os', operator: 'In', values: [RUNTIME_PLATFORM.os] },
  { key: 'kubernetes.io/arch', operator: 'In', values: [...RUNTIME_PLATFORM.architectures] },
];
