// The runtime configuration every component reads: the chart renders it as JSON
// into ConfigMap `rlmesh-runtime-config` (key `config.json`), mounted at
// /etc/rlmesh/config/config.json (override with RLMESH_CONFIG). The chart's
// values schema (lib/values-schema.ts) builds this object from the values, so
// both sides share these definitions.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { errorMessage } from './error-fields.ts';
import { MOUNTS, NAMES } from './fixed-names.ts';
import { clusterPlacementSchema } from './evaluation-placement.ts';

export const DEFAULT_CONFIG_PATH = MOUNTS.configFile;
/** evaluations.startDeadlineSeconds when the chart does not say (lib/values-schema.ts explains the choice) */
export const DEFAULT_START_DEADLINE_SECONDS = 30 * 60;

export const hostnameSchema = z
  .string()
  .regex(/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/, {
    message: 'must be a bare lowercase DNS name (no scheme, path, port or wildcard), e.g. api.rlmesh.dev',
  });

const labelSelectorSchema = z
  .object({
    matchLabels: z.record(z.string(), z.string()).optional(),
    matchExpressions: z
      .array(z.object({ key: z.string(), operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']), values: z.array(z.string()).optional() }).strict())
      .optional(),
  })
  .strict();

/** A NetworkPolicy peer as the chart renders network.dnsPeers (checked by the values schema). */
export const networkPolicyPeerConfigSchema = z
  .object({
    ipBlock: z.object({ cidr: z.string(), except: z.array(z.string()).optional() }).strict().optional(),
    namespaceSelector: labelSelectorSchema.optional(),
    podSelector: labelSelectorSchema.optional(),
  })
  .strict();

export const DEFAULT_DNS_PEERS = [
  { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
];

/** controlPlane.proxy as the components read it (lib/outbound-proxy.ts) */
export const outboundProxySchema = z
  .object({
    // http:// or https:// scheme, host and port; never credentials
    url: z.string(),
    // hosts, .domains, IPs and CIDRs reached directly
    noProxy: z.array(z.string()).default([]),
    // where the Secret's keys username and password are mounted, and the Secret's name for messages
    credentialsDir: z.string().optional(),
    credentialsSecret: z.string().optional(),
    // the egress proxy: a name the cluster's DNS cannot resolve goes to the proxy by name (unchecked) instead of being refused
    passUnresolvedNames: z.boolean().optional(),
  })
  .strict();

export const runtimeConfigSchema = z
  .object({
    release: z.string().default('rlmesh'),
    namespace: z.string().default('rlmesh-system'),
    runsNamespace: z.string().default(NAMES.runsNamespace),
    controlPlane: z
      .object({
        apiHost: hostnameSchema.default('api.rlmesh.dev'),
        apiPort: z.number().int().min(1).max(65535).default(443),
        registryHost: hostnameSchema.default('registry.rlmesh.dev'),
        outputHosts: z.array(hostnameSchema).default([]),
        // PEM bundle file for private endpoints (staging, self-hosted, a TLS-inspecting proxy), trusted in addition to the system roots; absent: the system roots only
        caBundlePath: z.string().optional(),
        // true: the agent's connections to the control plane trust that bundle alone, not the system roots
        pinCaBundle: z.boolean().default(false),
        // the corporate proxy outbound connections to the internet go through (controlPlane.proxy in values)
        proxy: outboundProxySchema.optional(),
      })
      .strict(),
    credentials: z
      .object({
        controlSecret: z.string().default(NAMES.controlSecret),
        pullSecret: z.string().default(NAMES.pullSecret),
        relaySecret: z.string().default(NAMES.relaySecret),
        crdHookPullSecret: z.string().default(NAMES.crdHookPullSecret),
        // the agent's ClusterRole: the owner of the Secrets the agent writes, so helm uninstall removes them
        ownerClusterRole: z.string().default(NAMES.agentClusterRole),
        // the join token as a pull Secret (chart-rendered with joinToken, else ''): pods created before the join wrote pullSecret pull with it
        joinPullSecret: z.string().default(''),
        // true when the chart was given a joinToken (env RLMESH_JOIN_TOKEN carries it)
        joinTokenProvided: z.boolean().default(false),
      })
      .strict(),
    observability: z.object({ enabled: z.boolean().default(false) }).strict(),
    gpuFeatureDiscovery: z
      .object({
        enabled: z.boolean().default(true),
        // its required node terms (gpuFeatureDiscovery.affinity), as Kubernetes NodeSelectorTerms; none: every linux/amd64 node
        nodeSelectorTerms: z.array(z.record(z.string(), z.unknown())).default([]),
      })
      .strict(),
    egress: z
      .object({
        proxyUrl: z.string().default(`http://${NAMES.egressProxyService}.rlmesh-system.svc:3128`),
        // built-in platform hosts first, then egress.extraDomains
        allowedDomains: z.array(z.string()).default([]),
        allowedPorts: z.array(z.number().int().min(1).max(65535)).default([443]),
        allowRanges: z.array(z.string()).default([]),
        // egress.clusterRanges; the agent adds what the API exposes (ConfigMap rlmesh-cluster-ranges)
        clusterRanges: z.array(z.string()).default([]),
      })
      .strict(),
    artifactCache: z
      .object({
        pvcName: z.string().default(NAMES.artifactCachePvc),
        cacheName: z.string().default('default'),
        accessModes: z.array(z.enum(['ReadWriteOnce', 'ReadWriteMany', 'ReadOnlyMany', 'ReadWriteOncePod'])).default(['ReadWriteOnce']),
      })
      .strict(),
    agent: z
      .object({
        // label selector for the nodes the agent reports (e.g. `pool=gpu`); empty = every node
        nodeSelector: z.string().default(''),
        // the spool refuses new records past this size (with a log line and a metric), never drops
        spoolMaxBytes: z.number().int().min(4096).default(1024 * 1024 * 1024),
        // where evaluation images may come from (lib/image-prefix.ts): controlPlane.registryHost, a bare host meaning
        // the whole registry, and the repository prefixes of evaluations.extraRegistries, each ending in /
        imageRegistries: z.array(z.string()).min(1).default(['registry.rlmesh.dev']),
      })
      .strict()
      .default({ nodeSelector: '', spoolMaxBytes: 1024 * 1024 * 1024, imageRegistries: ['registry.rlmesh.dev'] }),
    // network.dnsPeers/dnsPorts, storage.className and the preflight switches, for
    // the preflight checks (lib/preflight/settings.ts). Optional with no default, so
    // configs rendered before these fields existed parse to themselves; absent
    // means the chart's defaults (CoreDNS on 53, the default StorageClass, probe on).
    network: z
      .object({
        dnsPeers: z.array(networkPolicyPeerConfigSchema).min(1),
        dnsPorts: z.array(z.number().int().min(1).max(65535)).min(1),
      })
      .strict()
      .optional(),
    // spoolClassName: agent.spool.storageClassName; absent in configs rendered before it existed (the spool followed className)
    storage: z.object({ className: z.string(), spoolClassName: z.string().optional() }).strict().optional(),
    preflight: z
      .object({
        // image: the runtime image (it carries lib/preflight/netprobe.ts); empty: the probe cannot run and says so
        networkPolicyProbe: z.object({ enabled: z.boolean(), image: z.string() }).strict(),
      })
      .strict()
      .optional(),
    // evaluations.runWithoutNetworkPolicyEnforcement; absent (a config rendered before it existed): false, fail closed.
    // evaluations.startDeadlineSeconds; absent: the chart's default. Tests set a few seconds; the chart refuses less than 60.
    // evaluations.placement: the operator's policy for evaluation pods (evaluations.nodeSelector, tolerations, affinity,
    // priorityClassName, runtimeClassName, podLabels, podAnnotations; lib/evaluation-placement.ts); absent: none.
    evaluations: z
      .object({
        runWithoutNetworkPolicyEnforcement: z.boolean(),
        startDeadlineSeconds: z.number().int().min(1).optional(),
        placement: clusterPlacementSchema.optional(),
        // evaluations.hostUsers (lib/user-namespaces.ts); absent (a config from an older chart): auto
        hostUsers: z.union([z.literal('auto'), z.boolean()]).optional(),
        // evaluations.imagePullSecrets: the operator's pull Secrets in rlmesh-runs, each with the repository prefixes it
        // is for; a pod carries one after the platform's only when its image lies under one of them. Absent: none; an
        // entry without registries (a config from an older chart) is for no image and is never attached
        imagePullSecrets: z.array(z.object({ name: z.string().min(1), registries: z.array(z.string()).default([]) }).strict()).optional(),
      })
      .strict()
      .optional(),
    ports: z
      .object({ metrics: z.number().int().default(9090), health: z.number().int().default(8081) })
      .strict()
      .default({ metrics: 9090, health: 8081 }),
    // podSecurity.arbitraryUid (true: no pod the controller starts sets runAsUser, runAsGroup or fsGroup; OpenShift
    // assigns them), commonLabels for every object the agent and the controller create (lib/common-labels.ts), and
    // podLabels, podAnnotations for the controller's NetworkPolicy probe pods; absent: 65532, none.
    pods: z
      .object({
        arbitraryUid: z.boolean(),
        commonLabels: z.record(z.string(), z.string()),
        podLabels: z.record(z.string(), z.string()),
        podAnnotations: z.record(z.string(), z.string()),
        // imagePullSecrets, in rlmesh-runs too: the runtime image's pull Secrets (a mirror's login) for the probe pod and
        // the evaluation pods' network-ready container; absent (a config from an older chart): none
        imagePullSecrets: z.array(z.object({ name: z.string().min(1) }).strict()).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export type RuntimeConfig = z.infer<typeof runtimeConfigSchema>;

/** Reads and validates the config; on failure throws one line naming the field. */
export function loadRuntimeConfig(path = process.env.RLMESH_CONFIG ?? DEFAULT_CONFIG_PATH): RuntimeConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(
      `cannot read the runtime config ${path}: ${errorMessage(err)}; it is rendered by the chart into ConfigMap rlmesh-runtime-config, check the volume mount or set RLMESH_CONFIG`,
    );
  }
  const parsed = runtimeConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`invalid runtime config ${path}: field '${issue.path.join('.') || '(root)'}' ${issue.message}; fix the chart values that render it and upgrade`);
  }
  return parsed.data;
}
