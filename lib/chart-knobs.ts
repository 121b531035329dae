// The chart's ordinary knobs: labels and annotations on what it renders, log
// level and format, ServiceAccount annotations, extra environment variables
// and volumes per component, and the arbitrary-UID mode of OpenShift's
// restricted-v2 SCC.
// lib/values-schema.ts spreads these into its schema; knobErrors() are the
// rules JSON Schema cannot express (their words: KNOB_REFUSALS), which the
// chart's templates/_validate-knobs.tpl checks the same way.
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { refuse } from './refusals.ts';
import { KNOB_REFUSALS } from './knob-refusals.ts';
import { POD_USERS } from './fixed-names.ts';

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
/** An environment variable name as the API takes it (C_IDENTIFIER and the relaxed form both allow this). */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/**
 * Label keys the chart sets on its objects (templates/_helpers.tpl, rlmesh.labels and
 * rlmesh.selectorLabels) and the rlmesh.dev/ prefix the runtime selects by
 * (rlmesh.dev/metrics, the NetworkPolicies): commonLabels and podLabels may not set them.
 */
export const CHART_LABEL_KEYS = [
  'app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/part-of', 'app.kubernetes.io/component',
  'app.kubernetes.io/version', 'app.kubernetes.io/managed-by', 'helm.sh/chart',
];
export const CHART_KEY_PREFIXES = ['rlmesh.dev/'];
/** Annotation key prefixes the chart sets on its pods (checksum/… rolls a Deployment when its config changes). */
export const CHART_ANNOTATION_PREFIXES = ['rlmesh.dev/', 'checksum/'];

/**
 * Environment variables the chart sets on some container (a test renders the chart and
 * finds no other): extraEnv may not set them, since a second entry of one name silently
 * wins or loses depending on the kubelet.
 */
export const CHART_ENV_NAMES = [
  'RLMESH_CONFIG', 'POD_NAME', 'POD_NAMESPACE', 'NODE_NAME', 'NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS', 'LOG_LEVEL', 'LOG_FORMAT',
  'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_', 'RLMESH_JOIN_TOKEN', 'RLMESH_MEMORY_LIMIT_MIB',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'HOME',
];

/** Volumes the chart gives its pods (templates/_helpers.tpl and the workloads; a test finds no other): extraVolumes may not take these names. */
export const CHART_VOLUME_NAMES = ['config', 'tmp', 'ca-bundle', 'spool', 'cluster-ranges', 'output-hosts', 'proxy-credentials'];

/**
 * The long-running components in the release namespace that take extraVolumes and
 * extraVolumeMounts. Not the cache filler, which runs in rlmesh-runs beside evaluation
 * pods, nor the CRD upgrade hook; evaluation pods take no chart volumes at all.
 */
export const VOLUME_BLOCKS = ['egress', 'agent', 'controller', 'gpuFeatureDiscovery'] as const;

/** The volume sources Pod Security restricted allows (everything else is refused: extraVolumeType, extraVolumeHostPath). */
export const RESTRICTED_VOLUME_SOURCES = ['configMap', 'secret', 'projected', 'downwardAPI', 'emptyDir', 'csi', 'ephemeral', 'persistentVolumeClaim'];

const VOLUME_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export const LOG_FORMATS = ['json', 'text'] as const;

const labels = (what: string) =>
  z
    .record(z.string(), z.string().max(63).regex(LABEL_VALUE, { message: 'must be a label value: at most 63 letters, digits, -, _ and ., starting and ending with a letter or digit, or empty' }))
    .default({})
    .describe(what);

/** An EnvVar as a container takes it: a value, or valueFrom (checked by the apiserver). */
const envVar = z
  .object({
    name: z.string().min(1).max(253).regex(ENV_NAME, { message: 'must be an environment variable name: a letter or _, then letters, digits, _, . or -' }),
    value: z.string().optional(),
    valueFrom: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/** extraEnv of a component's containers. */
export const extraEnvSchema = (what: string) =>
  z
    .array(envVar)
    .default([])
    .describe(`Extra environment variables of ${what}'s container: EnvVars (name with value or valueFrom), after the chart's own. Names the chart sets itself (${CHART_ENV_NAMES.join(', ')}) are refused.`);

/** A Volume as a pod takes it: a name and one source (the source's fields are checked by the apiserver). */
const volume = z
  .object({ name: z.string().max(63).regex(VOLUME_NAME, { message: 'must be a volume name: at most 63 lowercase letters, digits and -, starting and ending with a letter or digit' }) })
  .catchall(z.unknown());

/** A VolumeMount of one of the component's extraVolumes. */
const volumeMount = z
  .object({
    name: z.string().min(1).max(63),
    mountPath: z.string().regex(/^\//, { message: 'must be an absolute path' }),
    readOnly: z.boolean().optional(),
    subPath: z.string().optional(),
    subPathExpr: z.string().optional(),
    recursiveReadOnly: z.enum(['Disabled', 'IfPossible', 'Enabled']).optional(),
    // Bidirectional needs a privileged container, which the chart never runs
    mountPropagation: z.enum(['None', 'HostToContainer']).optional(),
  })
  .strict();

/** extraVolumes and extraVolumeMounts of a component's pod and its container. */
export const extraVolumeValues = (what: string) => ({
  extraVolumes: z
    .array(volume)
    .default([])
    .describe(
      `Extra volumes of ${what}'s pod (Volumes: name and one source), after the chart's own; mount them with extraVolumeMounts. Pod Security restricted applies: only ${RESTRICTED_VOLUME_SOURCES.join(', ')} volumes, never hostPath. The chart's own volume names (${CHART_VOLUME_NAMES.join(', ')}) are refused.`,
    ),
  extraVolumeMounts: z
    .array(volumeMount)
    .default([])
    .describe(`Extra VolumeMounts of ${what}'s container, each of a volume in extraVolumes (name, mountPath, readOnly, subPath); the container's security context (read-only root filesystem, no privilege) stays as it is.`),
});

const ip = z.union([z.ipv4(), z.ipv6()]);
const hostname = z.string().min(1).max(253).regex(/^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$/, { message: 'must be a host name: letters, digits, - and .' });

/** hostAliases and dnsConfig of a component's pod. */
export const podDnsValues = (what: string) => ({
  hostAliases: z
    .array(z.object({ ip, hostnames: z.array(hostname).min(1) }).strict())
    .default([])
    .describe(
      `Entries added to /etc/hosts of ${what}'s pod (HostAliases: ip and hostnames), e.g. a control plane or proxy name your DNS does not resolve. Its NetworkPolicy still decides where the pod may connect: an address outside it needs controlPlane.addresses or controlPlane.proxy.`,
    ),
  dnsConfig: z
    .object({
      nameservers: z.array(ip).max(3).optional().describe('Resolver addresses added to the cluster DNS (at most 3 in all).'),
      searches: z.array(hostname).max(32).optional().describe('Search domains added to the pod\'s.'),
      options: z.array(z.object({ name: z.string().min(1), value: z.string().optional() }).strict()).optional().describe('resolv.conf options, e.g. [{name: ndots, value: "2"}].'),
    })
    .strict()
    .default({})
    .describe(
      `DNS settings of ${what}'s pod (PodDNSConfig), merged with the cluster DNS (dnsPolicy stays ClusterFirst). Its NetworkPolicy lets it reach DNS only at network.dnsPeers on network.dnsPorts: every nameserver must be one of those peers (an address inside an ipBlock peer, or a resolver pod a selector peer selects, e.g. the DNS Service's), else lookups time out. When every peer is an ipBlock, an IPv4 nameserver outside them is refused.`,
    ),
});

/** serviceAccount of a component: annotations on its ServiceAccount (IRSA, Workload Identity). */
export const serviceAccountSchema = (what: string) =>
  z
    .object({
      annotations: z
        .record(z.string(), z.string())
        .default({})
        .describe(`Annotations on the ServiceAccount of ${what}, e.g. eks.amazonaws.com/role-arn (IRSA) or iam.gke.io/gcp-service-account (Workload Identity).`),
    })
    .strict()
    .prefault({})
    .describe(`The ServiceAccount ${what} runs as.`);

/** The top-level knobs, spread into the values object. */
export const knobValues = {
  commonLabels: labels(
    'Labels added to every object the chart renders (not the CRDs in crds/, which Helm applies as they are) and to every object the agent and the controller create (their Secrets, ConfigMaps, Leases and Events, RLMeshEvaluations, the RLMeshCache, evaluation and probe pods), e.g. for a policy engine or cost allocation. The chart\'s own keys (app.kubernetes.io/*, helm.sh/chart, rlmesh.dev/*) are refused: selectors use them.',
  ),
  podLabels: labels(
    'Labels added to every pod the chart renders and to the NetworkPolicy probe pods the controller starts (not to evaluation pods: evaluations.podLabels). The chart\'s own keys are refused, as for commonLabels.',
  ),
  podAnnotations: z
    .record(z.string(), z.string())
    .default({})
    .describe(
      'Annotations added to every pod the chart renders and to the NetworkPolicy probe pods (not to evaluation pods: evaluations.podAnnotations); a component\'s own <component>.podAnnotations win on the same key. rlmesh.dev/* and checksum/* are refused.',
    ),
  logging: z
    .object({
      level: z.enum(LOG_LEVELS).default('info').describe('Log level of every component (LOG_LEVEL): debug, info, warn or error.'),
      format: z
        .enum(LOG_FORMATS)
        .default('json')
        .describe('json: one JSON object a line (pino), for a log pipeline. text: one line of time, level, component, message and key=value fields, for reading with kubectl logs.'),
    })
    .strict()
    .prefault({})
    .describe('Logs of every component (stdout).'),
  podSecurity: z
    .object({
      arbitraryUid: z
        .boolean()
        .default(false)
        .describe(
          `OpenShift (restricted-v2 SCC): no pod the chart renders or the controller starts sets runAsUser, runAsGroup or fsGroup, so the SCC assigns them from the namespace's range; the images run under any UID with group 0. Then evaluation pods and the cache filler, both in rlmesh-runs, get the same UID from that namespace's range: evaluations.hostUsers=false (user namespaces) keeps them apart on the node. false: every pod the chart renders runs as ${POD_USERS.runtime.uid}:${POD_USERS.runtime.gid} with fsGroup ${POD_USERS.runtime.gid}, and every pod the controller starts (evaluation and NetworkPolicy probe pods) as ${POD_USERS.evaluation.uid}:${POD_USERS.evaluation.gid}, a user no runtime component runs as, which the controller's admission policy enforces.`,
        ),
    })
    .strict()
    .prefault({})
    .describe('The user pods run as (chart README, "OpenShift").'),
};

type KnobValues = {
  commonLabels: Record<string, string>;
  podLabels: Record<string, string>;
  podAnnotations: Record<string, string>;
};

export const reservedLabel = (key: string) => CHART_LABEL_KEYS.includes(key) || CHART_KEY_PREFIXES.some((p) => key.startsWith(p));

/** A label or annotation key as the API takes it: an optional DNS subdomain prefix and /, then a name of at most 63 characters. */
const isKey = (key: string) => LABEL_KEY.test(key) && key.length <= 317;

type KnobBlock = { extraEnv: { name: string; value?: string; valueFrom?: unknown }[]; serviceAccount: { annotations: Record<string, string> } };

/**
 * Label and annotation keys (well-formed, not the chart's own) of the top-level knobs; of each
 * block, extraEnv names (not the chart's own) and ServiceAccount annotation keys (well-formed).
 */
type VolumeBlock = { extraVolumes: ({ name: string } & Record<string, unknown>)[]; extraVolumeMounts: { name: string }[] };

/** Each extraVolumes entry: a source restricted allows (hostPath named with its path), not a chart volume's name, once; each mount of one of them. */
export function volumeErrors(blocks: Record<string, VolumeBlock>): { path: string; message: string }[] {
  const R = KNOB_REFUSALS;
  const errors: { path: string; message: string }[] = [];
  for (const [block, c] of Object.entries(blocks)) {
    c.extraVolumes.forEach((vol, index) => {
      const { name } = vol;
      const hostPath = vol.hostPath as { path?: unknown } | undefined;
      const other = Object.keys(vol).find((k) => k !== 'name' && k !== 'hostPath' && !RESTRICTED_VOLUME_SOURCES.includes(k));
      if (hostPath !== undefined) errors.push(refuse(R.extraVolumeHostPath, { block, index, name, hostPath: String(hostPath?.path ?? '') }));
      else if (other !== undefined) errors.push(refuse(R.extraVolumeType, { block, index, name, type: other }));
      if (CHART_VOLUME_NAMES.includes(name)) errors.push(refuse(R.extraVolumeReserved, { block, index, name }));
      else if (c.extraVolumes.findIndex((x) => x.name === name) < index) errors.push(refuse(R.extraVolumeTwice, { block, index, name }));
    });
    const names = new Set(c.extraVolumes.map((x) => x.name));
    c.extraVolumeMounts.forEach((m, index) => {
      if (!names.has(m.name)) errors.push(refuse(R.extraVolumeMountUnknown, { block, index, name: m.name }));
    });
  }
  return errors;
}

type DnsBlock = { dnsConfig: { nameservers?: string[] } };
type DnsPeer = { ipBlock?: { cidr: string; except?: string[] }; namespaceSelector?: unknown; podSelector?: unknown };

const inCidr = (ip: ipaddr.IPv4, cidr: string): boolean => {
  const range = ipaddr.parseCIDR(cidr);
  return range[0].kind() === 'ipv4' && ip.match(range);
};

/**
 * Each IPv4 nameserver of a block's dnsConfig inside an ipBlock of network.dnsPeers (and outside
 * its except), when every peer is an ipBlock. A selector peer selects resolver pods, which a
 * Service address (the cluster DNS's ClusterIP) reaches, so with one the address is not judged;
 * nor is an IPv6 nameserver (the template cannot match IPv6 ranges).
 */
export function nameserverErrors(dnsPeers: DnsPeer[], blocks: Record<string, DnsBlock>): { path: string; message: string }[] {
  if (dnsPeers.some((p) => p.ipBlock === undefined)) return [];
  const errors: { path: string; message: string }[] = [];
  for (const [block, c] of Object.entries(blocks)) {
    (c.dnsConfig.nameservers ?? []).forEach((ns, index) => {
      if (!ipaddr.IPv4.isValidFourPartDecimal(ns)) return;
      const ip = ipaddr.IPv4.parse(ns);
      const covered = dnsPeers.some(({ ipBlock }) => inCidr(ip, ipBlock!.cidr) && !(ipBlock!.except ?? []).some((e) => inCidr(ip, e)));
      if (!covered) errors.push(refuse(KNOB_REFUSALS.nameserverNotDnsPeer, { block, index, ip: ns }));
    });
  }
  return errors;
}

export function knobErrors(v: KnobValues, blocks: Record<string, KnobBlock>): { path: string; message: string }[] {
  const R = KNOB_REFUSALS;
  const errors: { path: string; message: string }[] = [];
  for (const field of ['commonLabels', 'podLabels', 'podAnnotations'] as const) {
    for (const key of Object.keys(v[field])) {
      if (!isKey(key)) errors.push(refuse(R.knobKey, { field, key }));
      else if (field === 'podAnnotations' ? CHART_ANNOTATION_PREFIXES.some((p) => key.startsWith(p)) : reservedLabel(key)) errors.push(refuse(R.knobReservedKey, { field, key }));
    }
  }
  for (const [block, c] of Object.entries(blocks)) {
    c.extraEnv.forEach((e, index) => {
      if (CHART_ENV_NAMES.includes(e.name)) errors.push(refuse(R.extraEnvReserved, { block, index, name: e.name }));
      if (e.value !== undefined && e.valueFrom !== undefined) errors.push(refuse(R.extraEnvValue, { block, index, name: e.name }));
    });
    for (const key of Object.keys(c.serviceAccount.annotations)) if (!isKey(key)) errors.push(refuse(R.serviceAccountAnnotationKey, { block, key }));
  }
  return errors;
}

/** The fixed user of a pod the controller starts: POD_USERS.evaluation, or none under podSecurity.arbitraryUid (OpenShift's SCC assigns one). */
export const evaluationPodUser = (arbitraryUid: boolean | undefined): { runAsUser?: number; runAsGroup?: number } =>
  arbitraryUid ? {} : { runAsUser: POD_USERS.evaluation.uid, runAsGroup: POD_USERS.evaluation.gid };
