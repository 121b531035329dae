// The rlmesh-runtime chart's values: one zod schema is the source of truth.
// scripts/generators/values-schema.ts turns it into values-schema.json, the
// chart's values.schema.json (JSON Schema draft-07, which Helm validates) and
// the README's values table; renderRuntimeConfig() maps values to the runtime
// config every component reads by RUNTIME_CONFIG_SPEC, from which the chart's
// template is generated (a test still keeps the two renders equal).
import { z } from 'zod';
import { affinitySchema, tolerationSchema, automaticPullPolicy, imageErrors, imageReference, imageRegistrySchema, imageSchema, K8S_NAME, podSettings, port, quantity, resourcesWithStorageSchema, secretName, stringMap, type Image, type ImageRelocation, type Res } from './chart-values.ts';
import { allowRangePrefix, WIDEST_REOPENABLE } from './network-policy-ranges.ts';
import { parseQuantity } from './quantity.ts';
import { refuse } from './refusals.ts';
import { BARE_REGISTRY_HOST, REPOSITORY_PREFIX } from './image-prefix.ts';
import { VALUES_REFUSALS } from './values-refusals.ts';
import { DEFAULT_START_DEADLINE_SECONDS, runtimeConfigSchema, type RuntimeConfig } from './runtime-config.ts';
import { evaluateSpec, RUNTIME_CONFIG_SPEC } from './runtime-config-spec.ts';
import { NAMES, PLATFORM_NODE_REQUIREMENTS, RUNTIME_PLATFORM } from './fixed-names.ts';
import { requiredNodeTerms } from './preflight/label-selector.ts';
import { DEFAULT_PROXY_PORTS, HOST_LABELS, proxyErrors } from './outbound-proxy-values.ts';
import { isReservedKey } from './evaluation-placement.ts';
import { extraEnvSchema, extraVolumeValues, knobErrors, nameserverErrors, podDnsValues, knobValues, reservedLabel, serviceAccountSchema, VOLUME_BLOCKS, volumeErrors } from './chart-knobs.ts';

// Helm validates patterns with Go's RE2: no lookahead, so length is a separate maxLength (HOST_LABELS: lib/outbound-proxy-values.ts).
export const hostnamePattern = new RegExp(`^${HOST_LABELS}$`);
/** A ResourceQuota resource name: pods, count/..., requests.* or limits.* (extended resources included). */
const QUOTA_RESOURCE = /^(pods|services|secrets|configmaps|persistentvolumeclaims|cpu|memory|ephemeral-storage|(count\/[a-z0-9.-]+)|((requests|limits)\.[a-z0-9.\/-]+))$/;
/** cpu, memory and ephemeral-storage of a container: requests or limits. */
/** evaluations.resourceQuota.hard by default (its description explains the figures). */
export const DEFAULT_RUNS_QUOTA = {
  pods: '1000',
  'requests.cpu': '256',
  'requests.memory': '1Ti',
  'limits.memory': '1Ti',
  'requests.nvidia.com/gpu': '16',
  'requests.amd.com/gpu': '16',
} as const;
const containerResources = (what: string) =>
  z.object({ cpu: quantity(`cpu ${what}`), memory: quantity(`memory ${what}`), 'ephemeral-storage': quantity(`ephemeral-storage ${what}`) }).strict();
/** A repository prefix, or a bare registry host so that its refusal can say what to write instead (evaluationRegistryErrors). */
const REPOSITORY_PREFIX_OR_HOST = new RegExp(`${REPOSITORY_PREFIX.source}|${BARE_REGISTRY_HOST.source}`);
export const domainPattern = new RegExp(`^(\\*\\.)?${HOST_LABELS}$`);
const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export const JOIN_TOKEN_PATTERN = /^(rlm_jt_[A-Za-z0-9_-]{16,128})?$/;
// measured with test/bench/agent.ts at 5,000 nodes and 50,000 pods (agent/README.md)
export const AGENT_NODE_OPTIONS = '--max-semi-space-size=8 --max-old-space-size=160';
export const ACCESS_MODES = ['ReadWriteOnce', 'ReadWriteMany', 'ReadOnlyMany', 'ReadWriteOncePod'] as const;

/**
 * The chart's appVersion (charts/rlmesh-runtime/Chart.yaml; a test keeps them equal):
 * the runtime image's tag when a component's image.tag is left empty.
 */
export const CHART_APP_VERSION = '0.1.0';
/**
 * The runtime image this repository builds and publishes; every component runs it
 * with its own entrypoint. No digest here: the release stamps the digest of the image
 * it pushed into the packaged chart (scripts/release/stamp-digests.ts); the tag
 * is the chart's appVersion.
 */
export const RUNTIME_IMAGE = { repository: `${NAMES.platformRegistry}/rlmesh/rlmesh-runtime`, tag: '', digest: '' };
/**
 * The CRD hook's kubectl, built by this repository from the Kubernetes Go modules at
 * the version the local cluster runs (test/cluster/build-binaries.sh, v1.35.4) and
 * published beside the runtime image; pulled with Secret rlmesh-registry-join-crd-upgrade.
 */
export const KUBECTL_IMAGE = { repository: `${NAMES.platformRegistry}/rlmesh/kubectl`, tag: 'v1.35.4', digest: '' };
/** Image blocks that have no appVersion stand-in for an empty tag. */
const OWN_TAG_IMAGES = ['crdUpgradeHook.image'];

/** A key of a ConfigMap or Secret (what the API accepts). */
const DATA_KEY = /^[-._a-zA-Z0-9]+$/;
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const caBundleRef = (kind: 'ConfigMap' | 'Secret') =>
  z
    .object({
      name: z.string().max(253).regex(new RegExp(`^${K8S_NAME}$`), { message: `must be a ${kind} name (lowercase DNS subdomain)` }).describe(`The ${kind}'s name.`),
      key: z.string().max(253).regex(DATA_KEY, { message: `must be a ${kind} key (letters, digits, -, _ and .)` }).default('ca.crt').describe(`The key that holds the PEM bundle.`),
    })
    .strict();
/** controlPlane.caBundleFrom: the CA bundle from a ConfigMap or Secret the cluster already has (trust-manager and the like); exactly one (crossFieldErrors). */
const caBundleFromSchema = z
  .object({
    configMap: caBundleRef('ConfigMap').optional().describe('A ConfigMap in the release namespace and rlmesh-runs (the cache filler runs there), e.g. one a trust-manager Bundle writes.'),
    secret: caBundleRef('Secret').optional().describe('A Secret in the release namespace and rlmesh-runs.'),
  })
  .strict()
  .optional()
  .describe(
    "The PEM CA bundle from an existing ConfigMap or Secret instead of inline in caBundle (not both): {configMap: {name, key}} or {secret: {name, key}}, key default ca.crt. It is mounted (optional: false) into the agent, the controller, the cache filler, the egress proxy and GPU discovery, so a missing ConfigMap, Secret or key keeps the pod from starting, with the reason in its Events. Pods read it at start: after the bundle's contents change, restart them (kubectl rollout restart). Unset: caBundle, or the system roots.",
  );
/** A repository prefix (lib/image-prefix.ts), in values. */
const repositoryPrefix = (what: string) =>
  z.string().max(253).regex(REPOSITORY_PREFIX_OR_HOST, {
    message: `must be ${what}: a registry host, optionally with a port, then / and any repository path components each followed by / (registry.example.com/evals/, or registry.example.com:5000/ for the whole registry), without a scheme, tag or digest`,
  });
/** evaluations.imagePullSecrets: the operator's pull Secrets, each for the repository prefixes it names, in rlmesh-runs. */
const evaluationPullSecretsSchema = z
  .array(
    z
      .object({
        name: z.string().max(253).regex(new RegExp(`^${K8S_NAME}$`), { message: 'must be a Secret name (lowercase DNS subdomain)' }).describe('The Secret\'s name in rlmesh-runs.'),
        registries: z
          .array(repositoryPrefix('a repository prefix'))
          .optional()
          .describe('The repository prefixes this Secret is for (required), in the form of evaluations.extraRegistries, e.g. [registry.corp.example/evals/].'),
      })
      .strict(),
  )
  .default([])
  .describe(
    "kubernetes.io/dockerconfigjson Secrets you create in rlmesh-runs for private registries, each with the repository prefixes it is for, e.g. [{name: corp-pull, registries: [registry.corp.example/evals/]}]. An evaluation pod carries one, after the platform's pull Secret, only when its image lies under one of that Secret's prefixes (and under evaluations.extraRegistries); the controller's admission policy refuses a pod with a pull Secret not mapped to its image. Risk: a credential lent to the platform's pods is a confused deputy: the platform chooses which images its evaluations run, and the kubelet pulls them with whatever Secret the pod carries, so give a read-only token scoped to the evaluation repositories (pull only, on exactly the repositories under these prefixes), never a login that can push or reach other repositories. No pod of the product can read them (the controller names them on pods, the kubelet reads them); rlmesh preflight checks that each exists and is a dockerconfigjson, and an evaluation whose image then does not pull fails at its start deadline, quoting the kubelet and naming the pod's pull Secrets.",
  );

/** Size limit of the /tmp emptyDir every pod of the chart mounts (templates/_helpers.tpl, rlmesh.tmpSizeLimit). */
export const TMP_SIZE_LIMIT = '64Mi';
/**
 * Every container's ephemeral storage. Its root filesystem is read-only, so what it uses is
 * its logs (the kubelet rotates them at 5 files of 10Mi by default) and its pod's /tmp
 * (at most TMP_SIZE_LIMIT); the limit holds both with room to spare.
 */
export const EPHEMERAL_STORAGE = { requests: '64Mi', limits: '256Mi' };
const PLATFORM = `${RUNTIME_PLATFORM.os}/${RUNTIME_PLATFORM.architectures.join(', ')}`;
const PLATFORM_AFFINITY_HELP = `The chart ANDs kubernetes.io/os In [${RUNTIME_PLATFORM.os}] and kubernetes.io/arch In [${RUNTIME_PLATFORM.architectures.join(', ')}] into every required node term (a term of their own when there is none), as the images are ${PLATFORM} only; preferred terms and pod (anti-)affinity pass through.`;

const labelIs = (key: string, value: string) => ({ matchExpressions: [{ key, operator: 'In', values: [value] }] });
const labelExists = (key: string) => ({ matchExpressions: [{ key, operator: 'Exists' }] });
/**
 * Nodes that can have GPUs, by the labels GPU nodes carry (the default required node terms
 * of GPU discovery): a DaemonSet cannot select on what a node advertises (nvidia.com/gpu,
 * amd.com/gpu), only on its labels.
 */
export const GPU_NODE_TERMS = [
  // NVIDIA's GPU Operator and GPU feature discovery (and the label that forces NVIDIA's device plugin onto a node); by hand for AMD
  labelIs('nvidia.com/gpu.present', 'true'),
  labelIs('amd.com/gpu.present', 'true'),
  // AMD's GPU Operator (its node-feature-discovery rule)
  labelIs('feature.node.kubernetes.io/amd-gpu', 'true'),
  // node-feature-discovery: a PCI device of NVIDIA (10de) or AMD (1002), labelled by vendor (as the vendors' charts
  // configure it) or by class and vendor (its default; 0302 and 0380 are the classes of data-centre GPUs)
  labelIs('feature.node.kubernetes.io/pci-10de.present', 'true'),
  labelIs('feature.node.kubernetes.io/pci-0302_10de.present', 'true'),
  labelIs('feature.node.kubernetes.io/pci-0300_10de.present', 'true'),
  labelIs('feature.node.kubernetes.io/pci-1002.present', 'true'),
  labelIs('feature.node.kubernetes.io/pci-0380_1002.present', 'true'),
  labelIs('feature.node.kubernetes.io/pci-0300_1002.present', 'true'),
  // managed GPU node pools: GKE, AKS, EKS with Karpenter, EKS Auto Mode
  labelExists('cloud.google.com/gke-accelerator'),
  labelExists('kubernetes.azure.com/accelerator'),
  labelExists('karpenter.k8s.aws/instance-gpu-count'),
  labelExists('eks.amazonaws.com/instance-gpu-count'),
];

/** The values blocks of the chart's pods, each with image, resources and scheduling settings. */
export const POD_BLOCKS = ['egress', 'artifactCache.filler', 'agent', 'controller', 'gpuFeatureDiscovery', 'crdUpgradeHook'] as const;

/**
 * A component's pod settings as the runtime chart takes them: podSettings(), with an
 * automatic pull policy and ephemeral-storage requests and limits.
 */
const runtimePod = (what: string, image: Image, resources: { requests: Res; limits: Res }) => ({
  ...podSettings(what, image, resources),
  extraEnv: extraEnvSchema(what),
  serviceAccount: serviceAccountSchema(what),
  affinity: affinitySchema.default({}).describe(`Affinity of ${what} pods. ${PLATFORM_AFFINITY_HELP}`),
  image: imageSchema(image, what, {}, automaticPullPolicy),
  resources: resourcesWithStorageSchema(
    {
      requests: { ...resources.requests, 'ephemeral-storage': EPHEMERAL_STORAGE.requests },
      limits: { ...resources.limits, 'ephemeral-storage': EPHEMERAL_STORAGE.limits },
    },
    {
      requests: ` (the container's logs and its pod's /tmp, an emptyDir of at most ${TMP_SIZE_LIMIT}; the root filesystem is read-only).`,
      limits: `: at least the request and ${TMP_SIZE_LIMIT} (the /tmp emptyDir); a pod using more is evicted. The default holds /tmp and the kubelet's rotated logs (5 × 10Mi by default) with room to spare.`,
    },
  ),
});

/** How the replicas of a multi-replica component spread over nodes (topologySpreadConstraints). */
const topologySpread = (what: string) =>
  z
    .object({
      whenUnsatisfiable: z
        .enum(['ScheduleAnyway', 'DoNotSchedule'])
        .default('ScheduleAnyway')
        .describe(
          `ScheduleAnyway: the scheduler prefers nodes that spread ${what}'s replicas, and still places them together when no other node fits, so a single-node cluster installs and runs. DoNotSchedule: a replica that would break maxSkew stays Pending until another node fits (one node's loss never takes all replicas, but an install on too few nodes never becomes ready).`,
        ),
      maxSkew: z.number().int().min(1).max(10).default(1).describe('Largest allowed difference in replicas between two topology domains.'),
      topologyKeys: z
        .array(z.string().regex(LABEL_KEY))
        .min(1)
        .default(['kubernetes.io/hostname'])
        .describe('Node labels to spread by, one constraint each: kubernetes.io/hostname (nodes); add topology.kubernetes.io/zone to spread over zones too.'),
    })
    .strict()
    .prefault({})
    .describe(`Spreading of ${what}'s replicas over nodes; a PodDisruptionBudget keeps one up from 2 replicas.`);

const labelSelector = z
  .object({
    matchLabels: z.record(z.string().regex(LABEL_KEY), z.string().regex(LABEL_VALUE)).optional(),
    matchExpressions: z
      .array(
        z
          .object({
            key: z.string().regex(LABEL_KEY),
            operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
            values: z.array(z.string()).optional(),
          })
          .strict(),
      )
      .optional(),
  })
  .strict();
const cidr = z.union([z.cidrv4(), z.cidrv6()]);
// an allow-range may only re-open a private or special-purpose block (a reopenable row of lib/special-purpose-registry.ts),
// so it is at most as wide as the widest of them: a shorter prefix would open everything, and is refused before anything is installed
const tooWide = (family: 'ipv4' | 'ipv6') => ({ message: `must be at most as wide as ${WIDEST_REOPENABLE[family].cidr}: a shorter prefix would open every private address` });
/** A private or special-purpose range a value may re-open (also the observability chart's). */
export const allowRange = z.union([z.cidrv4().regex(allowRangePrefix('ipv4'), tooWide('ipv4')), z.cidrv6().regex(allowRangePrefix('ipv6'), tooWide('ipv6'))]);
/** A NetworkPolicy peer: an ipBlock, or namespace and/or pod selectors. */
export const networkPolicyPeerSchema = z
  .object({
    ipBlock: z.object({ cidr, except: z.array(cidr).optional() }).strict().optional(),
    namespaceSelector: labelSelector.optional(),
    podSelector: labelSelector.optional(),
  })
  .strict();
// which fields a peer needs is a cross-field rule (crossFieldErrors): JSON Schema, and so helm, would not see it

/**
 * network.dnsPeers and network.dnsPorts: the cluster's resolver as NetworkPolicies name it. The
 * rlmesh-observability chart takes the same two values (give both charts the same file).
 */
export const dnsValues = {
  dnsPeers: z
    .array(networkPolicyPeerSchema)
    .min(1)
    .default([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
      },
    ])
    .describe('NetworkPolicy peers of the cluster DNS resolver (default CoreDNS); GKE NodeLocal DNSCache: an ipBlock of its IP.'),
  dnsPorts: z.array(port).min(1).default([53]).describe('Resolver ports allowed to dnsPeers, over UDP and TCP (post-DNAT, e.g. 5353 on OpenShift).'),
};

/**
 * network.apiServerPorts and network.apiServerAddresses: the Kubernetes API as NetworkPolicies
 * reach it. The rlmesh-observability chart takes the same two values (Prometheus's discovery).
 */
export const apiServerValues = {
  apiServerPorts: z.array(port).min(1).default([443, 6443]).describe("Ports the chart's pods may reach the Kubernetes API on, at network.apiServerAddresses only."),
  apiServerAddresses: z
    .array(cidr)
    .default([])
    .describe(
      "Addresses (CIDRs) at which pods reach the Kubernetes API: the only destinations the chart's pods may reach on network.apiServerPorts, so no pod can use those ports to reach anything else (the runtime's cache filler, which fetches URLs the platform names, cannot bypass the egress proxy through them). Empty: helm install and helm upgrade read them from the cluster (the endpoints of Service default/kubernetes and its ClusterIP, for enforcers that match before its DNAT), and a render that cannot read the cluster (helm template, as GitOps tools run it) is refused; rlmesh preflight prints the line to set. Risk: managed control planes (EKS, GKE) can move the API's addresses; the pods then lose the API until helm upgrade reads them again (or this value is updated), and rlmesh status says so.",
    ),
};

/** A node selector requirement and term as required node affinity takes them. */
const nodeSelectorRequirement = z
  .object({ key: z.string().min(1), operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt']), values: z.array(z.string()).optional() })
  .strict();
const nodeSelectorTerm = z.object({ matchExpressions: z.array(nodeSelectorRequirement).optional(), matchFields: z.array(nodeSelectorRequirement).optional() }).strict();
/** evaluations.affinity: the cluster's required node terms are checked; the rest passes through as the pod takes it. */
const evaluationAffinitySchema = z
  .object({
    nodeAffinity: z
      .object({
        requiredDuringSchedulingIgnoredDuringExecution: z.object({ nodeSelectorTerms: z.array(nodeSelectorTerm).min(1) }).strict().optional(),
        preferredDuringSchedulingIgnoredDuringExecution: z
          .array(z.object({ weight: z.number().int().min(1).max(100), preference: nodeSelectorTerm }).strict())
          .optional(),
      })
      .strict()
      .optional(),
    podAffinity: z.record(z.string(), z.unknown()).optional(),
    podAntiAffinity: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
/** Label values as the API takes them (JSON Schema checks them; keys are checked by crossFieldErrors, which names them in the path). */
const labelMap = (what: string, dflt: Record<string, string> = {}) =>
  z.record(z.string(), z.string().max(63).regex(LABEL_VALUE, { message: 'must be a label value: at most 63 letters, digits, -, _ and ., starting and ending with a letter or digit, or empty' })).default(dflt).describe(what);
const POLICY_HELP = 'The operator\'s policy for evaluation pods, which the platform cannot override (chart README, "Policy engines and placement of evaluation pods").';

const monitor = (kind: string) =>
  z
    .object({
      enabled: z.boolean().default(false).describe(`Create a ${kind} (needs the Prometheus Operator CRDs).`),
      interval: z
        .string()
        .regex(/^[0-9]+(ms|s|m|h)$/, { message: 'must be a Prometheus duration such as 30s' })
        .default('30s')
        .describe('Scrape interval.'),
      labels: stringMap(`Extra labels on the ${kind}, e.g. for the Prometheus selector.`),
    })
    .strict()
    .default({ enabled: false, interval: '30s', labels: {} });

const small = { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '100m', memory: '64Mi' } };

/** The values' shape and defaults; valuesSchema adds the cross-field rules. */
export const valuesObjectSchema = z
  .object({
    joinToken: z
      .string()
      .regex(JOIN_TOKEN_PATTERN, { message: 'must be a join token shaped rlm_jt_… as shown by Clusters → Connect your cluster' })
      .default('')
      .describe(
        'Single-use join token (rlm_jt_…, valid one hour) from Clusters → Connect your cluster. The agent trades it for the cluster credentials and records only its hash. Until then it is also the pull credential for the runtime image (Secret rlmesh-registry-join, in both namespaces), so the agent pod can start. Leave empty when credentials.controlSecret names Secrets you deliver yourself.',
      ),
    credentials: z
      .object({
        controlSecret: secretName
          .default('')
          .describe('Secret in the release namespace with keys control and cluster-id, delivered out of band (GitOps). Empty: the agent writes rlmesh-cluster-control from joinToken.'),
        pullSecret: secretName
          .default('')
          .describe('kubernetes.io/dockerconfigjson Secret in the release namespace and rlmesh-runs, delivered out of band. Empty: the agent writes rlmesh-registry-pull.'),
      })
      .strict()
      .default({ controlSecret: '', pullSecret: '' })
      .describe('Bring your own Secrets instead of joinToken.'),
    controlPlane: z
      .object({
        apiHost: z.string().max(253).regex(hostnamePattern).default('api.rlmesh.dev').describe('Control-plane API host (HTTPS and gRPC on 443).'),
        registryHost: z
          .string()
          .max(253)
          .regex(hostnamePattern)
          .default(NAMES.platformRegistry)
          .describe(
            `The platform's registry: where the runtime's images come from (every image the chart names under ${NAMES.platformRegistry} moves to this host), the host the join's pull credential is for, and where evaluation images come from. A staging cell sets it together with apiHost; the agent refuses to join a control plane whose registry is another host, before it uses the token.`,
          ),
        outputHosts: z
          .array(z.string().max(253).regex(hostnamePattern))
          .default([])
          .describe(
            "More output hosts evaluations upload to, besides the API host and those the platform names itself (GET /v1/info and the session, which the agent keeps in ConfigMap rlmesh-output-hosts, exact public hostnames only); the egress proxy allows them. Empty is right for a production or staging cell.",
          ),
        addresses: z
          .array(allowRange)
          .default([])
          .describe(
            "CIDRs of a control plane at private or special-purpose addresses (a staging or self-hosted cell's API host and registry host, e.g. 10.20.30.40/32), which the agent may then reach on TCP 443. Without controlPlane.proxy the agent reaches only public addresses on 443 (the blocks the egress proxy refuses stay shut), so a control plane elsewhere needs its addresses here; with a proxy, they are reached directly, for a control plane in controlPlane.proxy.noProxy. Empty: public addresses only.",
          ),
        caBundle: z
          .string()
          .regex(/^(-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*)?$/, { message: 'must be PEM certificates' })
          .default('')
          .describe(
            "PEM CA bundle for private or staging endpoints and TLS-inspecting proxies, trusted in addition to the system roots by every component (by the agent's connections to the control plane too, unless controlPlane.pinCaBundle); empty: the system roots only.",
          ),
        caBundleFrom: caBundleFromSchema,
        pinCaBundle: z
          .boolean()
          .default(false)
          .describe(
            "true: the agent's connections to the control plane (GET /v1/info, the join, the session, preflight's TLS checks of the API and registry hosts) trust only controlPlane.caBundle (or caBundleFrom), not the system roots: the platform's CA is pinned, so a certificate that any public CA issued for the API host is refused. Needs caBundle or caBundleFrom, holding every CA those hosts (or a TLS-inspecting proxy on the way) present. The other components keep trusting the system roots and the bundle.",
          ),
        proxy: z
          .object({
            // its shape is checked by proxyErrors() (crossFieldErrors), so that each mistake is refused with what to do
            url: z
              .string()
              .max(2048)
              .default('')
              .describe(
                `Corporate HTTP(S) proxy every outbound connection to the internet goes through: http://host:port or https://host:port (no port: ${DEFAULT_PROXY_PORTS.http} for http, ${DEFAULT_PROXY_PORTS.https} for https). The agent's discovery, join and gRPC session tunnel through it with HTTP CONNECT, and so do the egress proxy's own connections (the cache filler's downloads, the evaluations' traffic); the NetworkPolicies then allow only the proxy on its port instead of TCP 443 to every address. Credentials in the URL are refused: use existingSecret. Empty: no proxy.`,
              ),
            noProxy: z
              .array(
                z
                  .string()
                  .max(253)
                  .regex(new RegExp(`^(\\.?${HOST_LABELS}|[0-9a-fA-F:.]+(/[0-9]{1,3})?)$`), {
                    message: 'must be a host name, a .domain suffix, an IP address or a CIDR, without scheme or port',
                  }),
              )
              .default([])
              .describe(
                'Destinations reached directly, not through the proxy: host names, .domain suffixes (.corp.example matches every host under it), IP addresses and CIDRs. The NetworkPolicies must still allow them: for the egress proxy, list their addresses in egress.allowRanges (private ranges only: a public host the egress proxy needs goes through the corporate proxy, not noProxy).',
              ),
            existingSecret: secretName
              .default('')
              .describe(
                'Secret in the release namespace with keys username and password, sent to the proxy as Proxy-Authorization: Basic. Mounted read-only into the agent and the egress proxy (no Kubernetes API read); their pods wait to start until it exists, the kubelet naming it in their events. Empty: the proxy needs no credentials.',
              ),
            addresses: z
              .array(z.string())
              .default([])
              .describe(
                "CIDRs the proxy listens on (e.g. 10.20.30.40/32), the only destination the NetworkPolicies then allow the agent and the egress proxy besides DNS, the Kubernetes API and egress.allowRanges. Required when url names its host by name (a NetworkPolicy cannot); empty with an IP address in url: that address (/32 or /128).",
              ),
            passUnresolvedNames: z
              .boolean()
              .default(false)
              .describe(
                "The egress proxy resolves every destination with the cluster's DNS, checks the address, and asks the proxy for that address (CONNECT 203.0.113.7:443, the client's TLS SNI keeping the name; plain HTTP as GET http://203.0.113.7/), so the proxy cannot connect anywhere the egress proxy did not check: its rules must allow CONNECT to the allowed hosts' addresses. false: a name the cluster's DNS cannot resolve is refused (rule unresolved-name). true: such a name goes to the proxy by name, unchecked (rule parent-resolves). RISK: the proxy then resolves the name with its own DNS, whose answers the platform may control, and connects wherever they point, private, cluster and cloud-metadata addresses included; set it only if the proxy itself refuses those destinations (rlmesh preflight's private-via-proxy check asks it).",
              ),
          })
          .strict()
          .prefault({})
          .describe('Outbound through a corporate HTTP(S) proxy (chart README, "Behind a corporate proxy").'),
      })
      .strict()
      .prefault({})
      .describe('Where the control plane is; production defaults, overridable for staging.'),
    egress: z
      .object({
        extraDomains: z
          .array(
            z
              .string()
              .max(253)
              .regex(domainPattern, { message: 'must be a bare hostname or a *.suffix wildcard, without scheme, path or port' }),
          )
          .default([])
          .describe('Hosts evaluations may reach besides the built-in platform hosts: bare hostnames (my-inputs.s3.eu-west-1.amazonaws.com) or *.suffix wildcards; no scheme, path or port.'),
        allowedPorts: z.array(port).min(1).default([443]).describe('Destination ports the egress proxy allows.'),
        allowRanges: z
          .array(allowRange)
          .default([])
          .describe(
            "Private or special-purpose address ranges the egress proxy may dial anyway (an artifact store inside your network, e.g. 10.20.0.0/24): its allow-list still applies, and its NetworkPolicy opens these ranges on allowedPorts. Loopback and link-local addresses stay refused, and so do the cloud metadata addresses inside a listed range (100.100.100.200, fd00:ec2::254, fd00:ec2::23, fd20:ce::254, fd00:c1::a9fe:a9fe), which the NetworkPolicy excepts too.",
          ),
        clusterRanges: z
          .array(cidr)
          .default([])
          .describe(
            "The cluster's own address ranges the egress proxy refuses even where they are public (an IPv6 pod or node range, a VPC range the CNI hands pods from). Added to what the agent reads from the API into ConfigMap rlmesh-cluster-ranges: ServiceCIDRs, each node's podCIDRs and addresses and the API server's endpoints at start and every 5 minutes, every Service's externalIPs and load balancer IPs as they change (a load balancer known only by host name needs its addresses here).",
          ),
        replicas: z.number().int().min(1).max(10).default(2).describe('Egress proxy replicas (a PodDisruptionBudget keeps one up from 2).'),
        port: port.default(3128).describe('Port of the egress proxy Service.'),
        topologySpread: topologySpread('the egress proxy'),
        ...runtimePod('the egress proxy', RUNTIME_IMAGE, { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } }),
        ...extraVolumeValues('the egress proxy'),
        ...podDnsValues('the egress proxy'),
      })
      .strict()
      .prefault({})
      .describe(
        'The egress proxy, the only way out of rlmesh-runs. It sizes what it buffers from resources.limits.memory: a quarter for all clients together, an eighth of that per client (evaluation pod), and its tunnel limits to match (2,048 tunnels, 256 per pod at 256Mi); a pod over its share gets 429. Raise the limit for more.',
      ),
    network: z
      .object({
        ...dnsValues,
        metricsPeers: z
          .array(networkPolicyPeerSchema)
          .default([
            { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'rlmesh-prometheus' } } },
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
              podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
            },
          ])
          .describe(
            "NetworkPolicy peers that may reach the metrics port (metrics.port) and the health port (8081) of the agent, the controller, the egress proxy and the cache filler; no one else may (the kubelet's probes come from the node, which NetworkPolicy enforcers let through). A peer with a podSelector alone selects pods in the release namespace. Default: the rlmesh-observability chart's Prometheus beside the release, and a Prometheus Operator's Prometheus (app.kubernetes.io/name=prometheus) in namespace monitoring; name yours here if it runs elsewhere. [] admits no pod. The Kubernetes API's addresses (network.apiServerAddresses, or those helm install reads) are admitted too: rlmesh status reads the egress proxy's refusal counts through the API server.",
          ),
        ...apiServerValues,
      })
      .strict()
      .prefault({})
      .describe('NetworkPolicy inputs.'),
    evaluations: z
      .object({
        extraRegistries: z
          .array(repositoryPrefix('a repository prefix'))
          .default([])
          .describe(
            "Repository prefixes whose images evaluations may run besides controlPlane.registryHost, e.g. [registry.corp.example/evals/]: a registry host (and port), then / and the path, ending in /. An image is allowed when its repository starts with a prefix at a / boundary: registry.corp.example/evals/ allows registry.corp.example/evals/gym, not registry.corp.example/evals-evil/gym; the port is part of the host, docker.io and index.docker.io are one registry, tags and digests are not compared. registry.corp.example/ allows the whole registry. A bare host (registry.corp.example), which this value took before, is refused: write the prefix. The agent refuses an assignment whose image lies elsewhere, the controller's admission policy refuses such a pod, and evaluation pods always pull (imagePullPolicy Always), so an image already on a node is not run without the registry's say. Risk: every repository under a prefix is one the platform may choose to run, with the pull Secrets mapped to it; list the narrowest prefixes that hold your evaluation images.",
          ),
        imagePullSecrets: evaluationPullSecretsSchema,
        runWithoutNetworkPolicyEnforcement: z
          .boolean()
          .default(false)
          .describe(
            'Start evaluation pods even though the controller has not seen NetworkPolicy enforced (its probe failed, has not finished, or preflight.networkPolicyProbe.enabled=false). By default they wait as NetworkPolicyNotEnforced, because without enforcement nothing keeps them from the cluster network, the API server or cloud metadata. Set it only when another layer fences rlmesh-runs.',
          ),
        startDeadlineSeconds: z
          .number()
          .int()
          .min(60)
          .default(DEFAULT_START_DEADLINE_SECONDS)
          .describe(
            "How long an evaluation may take to start: from its creation (or, with artifacts, from when the cache holds them all; fetching has failures of its own and is not counted) until its container runs. Every wait in between counts: the ResourceQuota, controller.maxConcurrent, the cache node, the NetworkPolicy fence, an unschedulable pod, an image that does not pull. When it passes, the pod is stopped and the evaluation fails as StartDeadlineExceeded, quoting the last reason the scheduler, the kubelet or the quota gave. 30 minutes leaves room for a cold pull of a multi-gigabyte image and for a GPU node pool scaling up from zero, which can take 10 to 20 minutes each; raise it where starting takes longer, or where evaluations are meant to queue behind the quota.",
          ),
        nodeSelector: labelMap(
          `Node labels every evaluation pod must match, ANDed with the platform's placement: an assignment whose node selector sets one of these keys to another value is refused as PlacementConflict before anything is created, and the agent offers the platform only the nodes that match. ${POLICY_HELP}`,
        ),
        tolerations: z
          .array(tolerationSchema)
          .default([])
          .describe(
            `Tolerations of every evaluation pod (for example of a dedicated, tainted node pool). The agent offers the platform no node with a NoSchedule or NoExecute taint these do not tolerate. ${POLICY_HELP}`,
          ),
        affinity: evaluationAffinitySchema
          .default({})
          .describe(
            `Affinity of every evaluation pod. Its required node terms (ORed) are the cluster's constraint: each is ANDed with the runtime's platform (${PLATFORM}), the platform's node selector and, for a ReadWriteOnce cache, the cache's node; the agent offers only the nodes some term matches, and refuses an assignment whose node selector rules out every term (PlacementConflict). Preferred terms and pod (anti-)affinity pass through. ${POLICY_HELP}`,
          ),
        priorityClassName: z
          .string()
          .max(253)
          .regex(new RegExp(`^(${K8S_NAME})?$`), { message: 'must be a PriorityClass name or empty' })
          .default('')
          .describe(`PriorityClass of every evaluation pod (empty: none); not a system- class. The controller may set no other (ValidatingAdmissionPolicy rlmesh-cluster-controller-pods). ${POLICY_HELP}`),
        runtimeClassName: z
          .string()
          .max(253)
          .regex(new RegExp(`^(${K8S_NAME})?$`), { message: 'must be a RuntimeClass name or empty' })
          .default('')
          .describe(
            `RuntimeClass of every evaluation pod, for example gvisor or kata for a sandbox around untrusted code (empty: the nodes' default runtime). The RuntimeClass must exist, with its handler on the nodes evaluations run on; set, the controller may not create a pod that runs anything but the runtime's own image without it (ValidatingAdmissionPolicy rlmesh-cluster-controller-pods). Pod Security restricted still applies in rlmesh-runs. ${POLICY_HELP}`,
          ),
        podLabels: labelMap(`Extra labels on every evaluation pod (for policy engines, cost allocation); not rlmesh.dev/* nor the app.kubernetes.io/ keys the runtime sets. ${POLICY_HELP}`),
        podAnnotations: stringMap(`Extra annotations on every evaluation pod; not rlmesh.dev/* nor the app.kubernetes.io/ keys the runtime sets. ${POLICY_HELP}`),
        hostUsers: z
          .union([z.literal('auto'), z.boolean()], { error: 'must be auto, true or false (in YAML, true and false unquoted: a boolean, not a string)' })
          .default('auto')
          .describe(
            "hostUsers of evaluation pods. false: every evaluation pod runs in a user namespace, so its user (even root, were Pod Security to allow it) maps to an unprivileged range of the node's users that no other pod shares, and a container escape lands as nobody. It needs Kubernetes 1.33+ with UserNamespacesSupport, and nodes whose container runtime supports it (containerd 2.0+ or CRI-O 1.25+, runc 1.2+ or crun 1.9+, Linux 6.3+ for idmapped mounts of the volumes); the kubelet reports this as status.runtimeHandlers[].features.userNamespaces. Set false where that holds: an evaluation then waits as UserNamespacesUnsupported (and fails at evaluations.startDeadlineSeconds) while a node it may use does not report support, the agent's preflight check user-namespaces fails and tells the platform evaluations are blocked, and the controller's admission policy refuses an evaluation pod without it. auto (default): false when every node evaluations may use (evaluations.nodeSelector, tolerations, affinity) reports support for the runtime handler of evaluations.runtimeClassName (the nodes' default handler when empty), otherwise true with a preflight warning. true: evaluation pods share the node's users, the Kubernetes default; their UID is still one no runtime component uses.",
          ),
        limitRange: z
          .object({
            defaultRequest: containerResources('request').default({ cpu: '500m', memory: '1Gi', 'ephemeral-storage': '1Gi' })
              .describe('Requests a container in rlmesh-runs gets when its evaluation names none, so none runs BestEffort.'),
            default: containerResources('limit').default({ cpu: '4', memory: '8Gi', 'ephemeral-storage': '20Gi' })
              .describe('Limits a container in rlmesh-runs gets when its evaluation names none, so none uses a node without bound.'),
            max: containerResources('max')
              .default({ cpu: '32', memory: '256Gi', 'ephemeral-storage': '200Gi' })
              .describe(
                "The most one container in rlmesh-runs may ask for (its limits, and requests up to them): the API server refuses a pod above it, and that evaluation fails as PodRejected quoting it, so an assignment cannot take a whole large node. The default fits one evaluation on a large GPU node (8 GPUs usually come with 96 or more cores and 1 TiB or more of memory): 32 cores, 256 GiB of memory and 200 GiB of local disk. Set it to the largest evaluation you mean to run, at most your largest node's allocatable. It must be at least default and defaultRequest, and at least artifactCache.filler's limits, which run in rlmesh-runs too.",
              ),
          })
          .strict()
          .prefault({})
          .describe('LimitRange rlmesh-runs-defaults.'),
        resourceQuota: z
          .object({
            enabled: z.boolean().default(true).describe('Apply evaluations.resourceQuota.hard in ResourceQuota rlmesh-runs (false: the quota holds nothing; it is kept on uninstall with the namespace, so it always exists).'),
            hard: z
              .record(z.string(), quantity('quota'))
              .default(DEFAULT_RUNS_QUOTA)
              .describe(
                "The most all pods in rlmesh-runs together may hold (evaluations, the cache filler, the NetworkPolicy probe): any ResourceQuota resource name (pods, requests.cpu, limits.memory, requests.nvidia.com/gpu, requests.ephemeral-storage, ...). It is what the platform can take of this cluster, whatever it assigns: the agent offers it no more than the quota still admits, and an evaluation that would exceed it waits as QuotaExceeded, with the API server's words in its status, until room frees or evaluations.startDeadlineSeconds passes. The default bounds CPU, memory and both GPU kinds at the size of a modest shared cluster: 1,000 pods, 256 cores and 1 TiB of memory requested, 1 TiB of memory limits, 16 NVIDIA and 16 AMD GPUs. Set each to what you give the platform (for a cluster dedicated to evaluations, its allocatable); your entries replace the defaults of the same name and the others stay, so lift a bound by setting it to your cluster's size (evaluations.resourceQuota.enabled=false drops them all).",
              ),
          })
          .strict()
          .prefault({})
          .describe('ResourceQuota rlmesh-runs.'),
      })
      .strict()
      .prefault({})
      .describe('What evaluations may run.'),
    storage: z
      .object({
        className: z
          .string()
          .max(253)
          .regex(new RegExp(`^(${K8S_NAME})?$`), { message: 'must be a StorageClass name or empty' })
          .default('')
          .describe('StorageClass for the artifact cache (and the agent spool unless agent.spool.storageClassName names another); empty: the default StorageClass. Must be an RWX class for ReadWriteMany.'),
      })
      .strict()
      .default({ className: '' }),
    artifactCache: z
      .object({
        storage: z
          .object({
            sharedPvc: z
              .object({
                accessModes: z
                  .array(z.enum(ACCESS_MODES))
                  .min(1)
                  .default(['ReadWriteOnce'])
                  .describe('Access modes of PVC rlmesh-artifact-cache: [ReadWriteOnce] (evaluation pods run on its node) or [ReadWriteMany] (any node; needs storage.className).'),
                size: quantity('PVC size').default('100Gi').describe('Size of PVC rlmesh-artifact-cache.'),
              })
              .strict()
              .prefault({}),
          })
          .strict()
          .prefault({}),
        filler: z
          .object({
            ...runtimePod('the artifact cache filler', RUNTIME_IMAGE, { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } }),
          })
          .strict()
          .prefault({})
          .describe('The cache filler (Deployment rlmesh-artifact-cache-filler in rlmesh-runs): it mounts the cache PVC, fetches and verifies artifacts and evicts them.'),
      })
      .strict()
      .prefault({})
      .describe('The shared artifact cache in rlmesh-runs (kept on uninstall).'),
    agent: z
      .object({
        spool: z
          .object({
            size: quantity('PVC size').default('10Gi').describe('Size of the agent spool PVC rlmesh-agent-spool (removed on uninstall).'),
            storageClassName: z
              .string()
              .max(253)
              .regex(new RegExp(`^(${K8S_NAME})?$`), { message: 'must be a StorageClass name or empty' })
              .default('')
              .describe(
                "StorageClass of the agent spool PVC rlmesh-agent-spool, a single-writer journal: name a block-storage class (e.g. gp3, pd-balanced, managed-csi) that can attach on another node, so the agent comes back elsewhere after a node loss; not a ReadWriteMany class (NFS, EFS, Filestore's 1 TiB minimum) and not a node-local disk. Empty: the class of storage.className, so an upgrade from a release without this value keeps the class of an existing spool (Kubernetes refuses to change it). Changing it on an existing install needs the PVC deleted first (chart README, \"Several nodes\").",
              ),
          })
          .strict()
          .prefault({}),
        reportNodeSelector: z
          .string()
          .default('')
          .describe('Label selector of the nodes whose capacity the agent reports (e.g. pool=gpu); empty: every node.'),
        nodeOptions: z
          .string()
          .max(512)
          .regex(/^(--[a-z0-9-]+(=[A-Za-z0-9._:/-]+)?( +|$))*$/, { message: 'must be Node.js flags such as --max-semi-space-size=1, separated by spaces' })
          .default(AGENT_NODE_OPTIONS)
          .describe(
            'Node.js flags of the agent process (NODE_OPTIONS). The default caps V8\'s old generation at 160 MiB, so it collects instead of growing: about 215 MiB resident at 5,000 nodes and 50,000 pods, whose objects take about 70 MiB of heap. For much larger clusters raise --max-old-space-size together with agent.resources.limits.memory. Empty: Node.js defaults.',
          ),
        // a whole CPU for its start, which is CPU-bound: process start → Connected took 884 ms in a pod at 500m and 542 ms at 1 (test/bench/start.ts)
        ...runtimePod('the agent', RUNTIME_IMAGE, { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } }),
        ...extraVolumeValues('the agent'),
        ...podDnsValues('the agent'),
      })
      .strict()
      .prefault({})
      .describe('The cluster agent (one replica).'),
    controller: z
      .object({
        replicas: z.number().int().min(1).max(5).default(2).describe('Controller replicas; leader election keeps one active (a PodDisruptionBudget keeps one up from 2).'),
        maxConcurrent: z
          .number()
          .int()
          .min(1)
          .nullable()
          .default(null)
          .describe('At most this many evaluations run at once in this cluster; the rest wait in phase Waiting (reason ConcurrencyLimit) and start as others finish. null: no limit beyond what the nodes and quotas allow.'),
        topologySpread: topologySpread('the controller'),
        ...runtimePod('the controller', RUNTIME_IMAGE, { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } }),
        ...extraVolumeValues('the controller'),
        ...podDnsValues('the controller'),
      })
      .strict()
      .prefault({})
      .describe('The evaluation and cache controller.'),
    gpuFeatureDiscovery: z
      .object({
        enabled: z
          .boolean()
          .default(true)
          .describe('Label GPU nodes with vendor, model and memory (a DaemonSet on the nodes gpuFeatureDiscovery.affinity selects: by default those with a GPU label of a vendor tool or a cloud GPU pool). Off: nothing GPU-specific is installed.'),
        ...runtimePod('GPU feature discovery', RUNTIME_IMAGE, small),
        ...extraVolumeValues('GPU feature discovery'),
        ...podDnsValues('GPU feature discovery'),
        affinity: affinitySchema
          .default({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: GPU_NODE_TERMS } } })
          .describe(
            `Affinity of GPU feature discovery pods. Its required node terms (ORed) are the nodes that can have GPUs, by the labels GPU nodes carry (a DaemonSet cannot select on the nvidia.com/gpu or amd.com/gpu a node advertises): nvidia.com/gpu.present or amd.com/gpu.present=true (NVIDIA's GPU Operator and feature discovery; set them by hand on GPU nodes that have neither), AMD's GPU Operator, node-feature-discovery's PCI labels for NVIDIA and AMD, and the GPU node labels of GKE, AKS, Karpenter and EKS Auto Mode. Replace nodeSelectorTerms to choose other nodes; setting only preferred terms or pod (anti-)affinity keeps these. ${PLATFORM_AFFINITY_HELP}`,
          ),
        tolerations: z
          .array(tolerationSchema)
          .default([])
          .describe('Tolerations of GPU feature discovery pods. Empty: every NoSchedule taint, since GPU node pools are tainted under many keys (nvidia.com/gpu, amd.com/gpu, sku=gpu, dedicated=…) and the affinity already keeps the pods to GPU nodes.'),
      })
      .strict()
      .prefault({})
      .describe('GPU node labelling.'),
    crdUpgradeHook: z
      .object({
        enabled: z.boolean().default(true).describe('Reapply the CRDs on helm upgrade with a pre-upgrade Job.'),
        ...runtimePod('the CRD upgrade hook (kubectl)', KUBECTL_IMAGE, { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } }),
      })
      .strict()
      .prefault({})
      .describe('The pre-upgrade Job that applies the CRDs server-side (pull Secret rlmesh-registry-join-crd-upgrade, kept on uninstall).'),
    preflight: z
      .object({
        networkPolicyProbe: z
          .object({
            enabled: z
              .boolean()
              .default(true)
              .describe('The controller starts a short-lived probe pod in rlmesh-runs to prove NetworkPolicy is enforced; the agent reports the result in its preflight.'),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({})
      .describe('Preflight checks the agent runs at start and every hour (ConfigMap rlmesh-preflight).'),
    statusRole: z
      .object({
        subjects: z
          .array(
            z
              .object({
                kind: z.enum(['User', 'Group', 'ServiceAccount']),
                name: z.string().min(1).max(253),
                namespace: z.string().regex(NAMESPACE_NAME, { message: 'must be a namespace name' }).optional(),
              })
              .strict(),
          )
          .default([])
          .describe(
            "Who may run rlmesh status with least privilege: RBAC subjects ({kind: User|Group|ServiceAccount, name, and for a ServiceAccount its namespace, default the release namespace}) the chart binds to the Roles rlmesh-status in the release and runs namespaces and the ClusterRole rlmesh-status (list RLMeshCaches). They read what status reads (its ConfigMaps by name, Deployments, pods and the egress proxy's metrics through the pod proxy, the Leases, RLMeshEvaluations) and no Secret: the credentials check shows the metadata the agent publishes. Pod lists include evaluation pods' specs. Empty: the roles exist unbound; bind them yourself (chart README).",
          ),
      })
      .strict()
      .prefault({}),
    helmTest: z
      .object({
        enabled: z
          .boolean()
          .default(true)
          .describe(
            'Render the helm test hook: `helm test <release>` runs `rlmesh status` in a pod (the runtime image, the agent\'s scheduling and resources) as ServiceAccount rlmesh-status-test, bound to the rlmesh-status roles; its NetworkPolicy opens only the Kubernetes API\'s addresses. The test fails when a check fails; `helm test --logs` prints the checks.',
          ),
      })
      .strict()
      .prefault({})
      .describe('The helm test hook.'),
    observability: z
      .object({ enabled: z.boolean().default(false).describe('Join also claims the relay credential (Secret rlmesh-cluster-relay-secret) for the rlmesh-observability chart.') })
      .strict()
      .default({ enabled: false }),
    metrics: z
      .object({
        port: port.default(9090).describe('Metrics port of every component.'),
        serviceMonitor: monitor('ServiceMonitor'),
        podMonitor: monitor('PodMonitor'),
        prometheusRule: z
          .object({
            enabled: z
              .union([z.boolean(), z.literal('auto')])
              .default(false)
              .describe(
                'Alert rules for a Prometheus you run (PrometheusRule rlmesh-runtime, monitoring.coreos.com/v1: the Prometheus Operator): agent disconnected, spool filling, credential near expiry, evaluations failing, the egress proxy refusing far more than usual, artifact cache full. true: rendered (needs the Operator\'s CRDs); auto: rendered only when the cluster serves the PrometheusRule API (helm template: add --api-versions monitoring.coreos.com/v1/PrometheusRule); false: none. The rules read the series metrics.podMonitor or metrics.serviceMonitor scrape (or the rlmesh-observability chart\'s), by their namespace label.',
              ),
            labels: labelMap('Extra labels on the PrometheusRule, e.g. the ruleSelector of your Prometheus (release: kube-prometheus-stack).'),
            alertLabels: stringMap('Extra labels on every alert, e.g. for Alertmanager routing (team: platform); severity is the chart\'s (critical or warning).'),
          })
          .strict()
          .prefault({})
          .describe('Alert rules (PrometheusRule), each with a description that says what to do.'),
        grafanaDashboard: z
          .object({
            enabled: z.boolean().default(false).describe('The RLMesh runtime dashboard as ConfigMap rlmesh-runtime-dashboard (key rlmesh-runtime.json), for a Grafana you run whose dashboard sidecar loads ConfigMaps by label (the grafana and kube-prometheus-stack charts\' sidecar.dashboards). The dashboard asks for its Prometheus data source.'),
            labels: labelMap('Labels on the ConfigMap; your sidecar\'s label (sidecar.dashboards.label and labelValue) must be among them. At least one.', { grafana_dashboard: '1' }),
            annotations: stringMap('Annotations on the ConfigMap, e.g. grafana_folder: RLMesh with the sidecar\'s folderAnnotation.'),
            namespace: z
              .string()
              .max(63)
              .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/, { message: 'must be empty or a namespace name (lower-case letters, digits and -)' })
              .default('')
              .describe('Namespace of the ConfigMap: one your sidecar watches (it must exist); empty: the release namespace.'),
          })
          .strict()
          .prefault({})
          .describe('Grafana dashboard for your own Grafana.'),
      })
      .strict()
      .prefault({})
      .describe('Prometheus metrics.'),
    global: z
      .object({
        imageRegistry: imageRegistrySchema,
        imagePullSecrets: z
          .array(z.union([secretName.min(1), z.object({ name: secretName.min(1) }).strict()]))
          .default([])
          .describe(
            'Pull Secrets (names, or {name: …}) for the pods this chart renders, as umbrella charts set them for every subchart. Unlike imagePullSecrets, the controller never gives them to a pod it starts (evaluation and NetworkPolicy probe pods); evaluation images take evaluations.imagePullSecrets.',
          ),
      })
      .catchall(z.unknown())
      .prefault({})
      .describe('Helm global values, shared with the rlmesh-observability chart and any umbrella chart; this chart reads imageRegistry and imagePullSecrets.'),
    imagePullSecrets: z
      .array(z.object({ name: secretName.min(1) }).strict())
      .default([])
      .describe('Pull Secrets for the chart images, e.g. [{name: rlmesh-registry-pull}] with a private mirror.'),
    ...knobValues,
  })
  .strict();

export const valuesSchema = valuesObjectSchema.superRefine((v, ctx) => {
    for (const e of crossFieldErrors(v)) ctx.addIssue({ code: 'custom', path: e.path.split('.'), message: e.message });
  });

export type Values = z.output<typeof valuesObjectSchema>;

/**
 * Rules JSON Schema cannot express. Their messages are VALUES_REFUSALS (lib/values-refusals.ts),
 * which the chart's templates/_validate.tpl includes as generated templates at helm install time.
 */
export function crossFieldErrors(v: Values): { path: string; message: string }[] {
  const R = VALUES_REFUSALS;
  const errors: { path: string; message: string }[] = [];
  const { controlSecret, pullSecret } = v.credentials;
  if (v.joinToken === '' && controlSecret === '') errors.push(refuse(R.noCredentials));
  if (v.joinToken !== '' && controlSecret !== '') errors.push(refuse(R.tokenAndSecrets));
  if (controlSecret !== '' && pullSecret === '') errors.push(refuse(R.pullSecretMissing));
  if (controlSecret === '' && pullSecret !== '') errors.push(refuse(R.controlSecretMissing));
  const modes = v.artifactCache.storage.sharedPvc.accessModes;
  for (const mode of modes) if (mode === 'ReadOnlyMany' || mode === 'ReadWriteOncePod') errors.push(refuse(R.cacheAccessMode, { mode }));
  if (modes.includes('ReadWriteMany') && v.storage.className === '') errors.push(refuse(R.readWriteManyClass));
  // the key names here, not as JSON Schema propertyNames: helm reports those at the wrong path
  for (const key of Object.keys(v.evaluations.resourceQuota.hard)) if (!QUOTA_RESOURCE.test(key)) errors.push(refuse(R.quotaResourceName, { key }));
  v.network.dnsPeers.forEach((p, index) => {
    if (p.ipBlock === undefined && p.namespaceSelector === undefined && p.podSelector === undefined) errors.push(refuse(R.dnsPeerEmpty, { index }));
    else if (p.ipBlock !== undefined && (p.namespaceSelector !== undefined || p.podSelector !== undefined)) errors.push(refuse(R.dnsPeerMixed, { index }));
  });
  v.network.metricsPeers.forEach((p, index) => {
    if (p.ipBlock === undefined && p.namespaceSelector === undefined && p.podSelector === undefined) errors.push(refuse(R.metricsPeerEmpty, { index }));
    else if (p.ipBlock !== undefined && (p.namespaceSelector !== undefined || p.podSelector !== undefined)) errors.push(refuse(R.metricsPeerMixed, { index }));
  });
  if (v.metrics.serviceMonitor.enabled && v.metrics.podMonitor.enabled) errors.push(refuse(R.bothMonitors));
  errors.push(...monitoringErrors(v));
  errors.push(...proxyErrors(v.controlPlane.proxy));
  errors.push(...caBundleFromErrors(v));
  errors.push(...evaluationPullSecretErrors(v));
  errors.push(...evaluationRegistryErrors(v));
  errors.push(...placementErrors(v));
  errors.push(...imageErrors(v, OWN_TAG_IMAGES));
  errors.push(...ephemeralStorageErrors(v));
  errors.push(...limitRangeErrors(v));
  errors.push(...knobErrors(v, Object.fromEntries(POD_BLOCKS.map((b) => [b, podBlock(v, b)]))));
  errors.push(...volumeErrors(Object.fromEntries(VOLUME_BLOCKS.map((b) => [b, v[b]]))));
  errors.push(...nameserverErrors(v.network.dnsPeers, Object.fromEntries(VOLUME_BLOCKS.map((b) => [b, v[b]]))));
  return errors;
}

/** PROMETHEUS_LABEL_NAME: what Prometheus accepts as a label name. */
const PROMETHEUS_LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** metrics.prometheusRule and metrics.grafanaDashboard: label keys, alert label names, a label for the sidecar. */
export function monitoringErrors(v: Values): { path: string; message: string }[] {
  const R = VALUES_REFUSALS;
  const errors: { path: string; message: string }[] = [];
  const { prometheusRule: rule, grafanaDashboard: dash } = v.metrics;
  for (const [field, labels] of [['metrics.prometheusRule.labels', rule.labels], ['metrics.grafanaDashboard.labels', dash.labels]] as const) {
    for (const key of Object.keys(labels)) {
      if (!LABEL_KEY.test(key) || key.length > 317) errors.push(refuse(R.knobKey, { field, key }));
      else if (reservedLabel(key)) errors.push(refuse(R.knobReservedKey, { field, key }));
    }
  }
  for (const key of Object.keys(dash.annotations)) if (!LABEL_KEY.test(key) || key.length > 317) errors.push(refuse(R.knobKey, { field: 'metrics.grafanaDashboard.annotations', key }));
  for (const key of Object.keys(rule.alertLabels)) {
    if (!PROMETHEUS_LABEL_NAME.test(key)) errors.push(refuse(R.alertLabelName, { key }));
    else if (key === 'severity' || key === 'alertname') errors.push(refuse(R.alertLabelReserved, { key }));
  }
  if (dash.enabled && Object.keys(dash.labels).length === 0) errors.push(refuse(R.dashboardNoLabel));
  return errors;
}

/** controlPlane.caBundleFrom: exactly one source, and not beside an inline caBundle; controlPlane.pinCaBundle: only with a bundle. */
export function caBundleFromErrors(v: Values): { path: string; message: string }[] {
  const from = v.controlPlane.caBundleFrom;
  const R = VALUES_REFUSALS;
  if (from === undefined) return v.controlPlane.pinCaBundle && v.controlPlane.caBundle === '' ? [refuse(R.pinWithoutBundle)] : [];
  const errors: { path: string; message: string }[] = [];
  if (v.controlPlane.caBundle !== '') errors.push(refuse(R.caBundleTwice));
  if (from.configMap && from.secret) errors.push(refuse(R.caBundleFromBoth));
  if (!from.configMap && !from.secret) errors.push(refuse(R.caBundleFromNone));
  return errors;
}

/** evaluations.imagePullSecrets: the operator's own Secrets, each once, each mapped to repository prefixes. */
export function evaluationPullSecretErrors(v: Values): { path: string; message: string }[] {
  const R = VALUES_REFUSALS;
  const platform = v.credentials.pullSecret || NAMES.pullSecret;
  const errors: { path: string; message: string }[] = [];
  v.evaluations.imagePullSecrets.forEach(({ name, registries }, index) => {
    if (name === platform) errors.push(refuse(R.evaluationPullSecretPlatform, { index, name }));
    else if (v.evaluations.imagePullSecrets.findIndex((s) => s.name === name) < index) errors.push(refuse(R.evaluationPullSecretTwice, { index, name }));
    if (!registries?.length) errors.push(refuse(R.evaluationPullSecretUnmapped, { index, name }));
    (registries ?? []).forEach((host, i) => {
      if (!host.includes('/')) errors.push(refuse(R.evaluationPullSecretBareHost, { index, i, host }));
    });
  });
  return errors;
}

/** evaluations.extraRegistries: repository prefixes; a bare host (what the value took before) gets a refusal naming the prefix to write. */
export function evaluationRegistryErrors(v: Values): { path: string; message: string }[] {
  const errors: { path: string; message: string }[] = [];
  v.evaluations.extraRegistries.forEach((host, index) => {
    // the schema takes a prefix or a bare host, so no slash means a bare host
    if (!host.includes('/')) errors.push(refuse(VALUES_REFUSALS.extraRegistryBareHost, { index, host }));
  });
  return errors;
}

/** The operator's policy for evaluation pods (lib/evaluation-placement.ts): keys, the platform, system priorities, empty node terms. */
export function placementErrors(v: Values): { path: string; message: string }[] {
  const R = VALUES_REFUSALS;
  const e = v.evaluations;
  const errors: { path: string; message: string }[] = [];
  for (const field of ['nodeSelector', 'podLabels', 'podAnnotations'] as const) {
    for (const key of Object.keys(e[field])) {
      if (!LABEL_KEY.test(key) || key.length > 317) errors.push(refuse(R.placementKey, { field, key }));
      else if (field !== 'nodeSelector' && isReservedKey(key)) errors.push(refuse(R.placementReservedKey, { field, key }));
    }
  }
  for (const r of PLATFORM_NODE_REQUIREMENTS) {
    const value = e.nodeSelector[r.key];
    if (value !== undefined && !r.values.includes(value)) errors.push(refuse(R.placementPlatform, { key: r.key, value, allowed: r.values.join(', ') }));
  }
  if (e.priorityClassName.startsWith('system-')) errors.push(refuse(R.priorityClassSystem, { name: e.priorityClassName }));
  (e.affinity.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? []).forEach((t, index) => {
    if (!t.matchExpressions?.length && !t.matchFields?.length) errors.push(refuse(R.nodeTermEmpty, { index }));
  });
  return errors;
}

/**
 * Each container's ephemeral-storage limit is at least its request (the API refuses less)
 * and at least the pod's /tmp emptyDir (TMP_SIZE_LIMIT), which counts against it.
 */
export function ephemeralStorageErrors(v: Values): { path: string; message: string }[] {
  const errors: { path: string; message: string }[] = [];
  for (const block of POD_BLOCKS) {
    const { resources } = block.split('.').reduce((o: Record<string, unknown>, k) => o[k] as Record<string, unknown>, v) as Pick<Values['agent'], 'resources'>;
    const request = resources.requests['ephemeral-storage'];
    const limit = resources.limits['ephemeral-storage'];
    if (parseQuantity(limit) < parseQuantity(request)) errors.push(refuse(VALUES_REFUSALS.ephemeralBelowRequest, { block, limit, request }));
    if (parseQuantity(limit) < parseQuantity(TMP_SIZE_LIMIT)) errors.push(refuse(VALUES_REFUSALS.ephemeralBelowTmp, { block, limit, tmp: TMP_SIZE_LIMIT }));
  }
  return errors;
}

/** evaluations.limitRange: its defaults, and the cache filler's limits (it runs in rlmesh-runs), within its max. */
export function limitRangeErrors(v: Values): { path: string; message: string }[] {
  const errors: { path: string; message: string }[] = [];
  const { max } = v.evaluations.limitRange;
  const within = { 'evaluations.limitRange.default': v.evaluations.limitRange.default, 'evaluations.limitRange.defaultRequest': v.evaluations.limitRange.defaultRequest, 'artifactCache.filler.resources.limits': v.artifactCache.filler.resources.limits };
  for (const [field, resources] of Object.entries(within)) {
    for (const resource of LIMIT_RANGE_RESOURCES) {
      const value = (resources as Record<string, string | undefined>)[resource];
      if (value !== undefined && parseQuantity(value) > parseQuantity(max[resource])) errors.push(refuse(VALUES_REFUSALS.limitRangeAboveMax, { field, resource, value, max: max[resource] }));
    }
  }
  return errors;
}
export const LIMIT_RANGE_RESOURCES = ['cpu', 'memory', 'ephemeral-storage'] as const;

/** Where the values pull the chart's images from (imageReference's relocation). */
export const imageRelocation = (v: Values): ImageRelocation => ({ mirror: v.global.imageRegistry, registryHost: v.controlPlane.registryHost });

/** The values block of a pod (POD_BLOCKS), e.g. artifactCache.filler. */
const podBlock = (v: Values, block: (typeof POD_BLOCKS)[number]) =>
  block.split('.').reduce((o: Record<string, unknown>, k) => o[k] as Record<string, unknown>, v) as unknown as Values['agent'];

/** Values with every default filled in (what values.yaml holds). */
export const defaultValues = (): Values => valuesObjectSchema.parse({});

/** The spool stops taking new records at 90% of its PVC, leaving room for the journal. */
export function spoolMaxBytes(size: string): number {
  return Math.floor(parseQuantity(size) * 0.9);
}

/**
 * The runtime config (ConfigMap rlmesh-runtime-config, key config.json) the chart renders from these
 * values: RUNTIME_CONFIG_SPEC, which the chart's generated rlmesh.runtimeConfig template follows too.
 */
export function renderRuntimeConfig(values: Values, release = { name: 'rlmesh', namespace: 'rlmesh-system' }): RuntimeConfig {
  return runtimeConfigSchema.parse(
    evaluateSpec(RUNTIME_CONFIG_SPEC, {
      values,
      release,
      helpers: {
        spoolMaxBytes: () => spoolMaxBytes(values.agent.spool.size),
        probeImage: () => imageReference(values.controller.image, CHART_APP_VERSION, imageRelocation(values)),
        gpuDiscoveryNodeTerms: () => requiredNodeTerms(values.gpuFeatureDiscovery.affinity),
      },
    }),
  );
}
