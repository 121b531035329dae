// How the runtime config (ConfigMap rlmesh-runtime-config, key config.json)
// follows from the chart's values, as one declarative table. renderRuntimeConfig()
// in lib/values-schema.ts evaluates it; scripts/generators/chart-runtime-config.ts
// compiles it into the chart's rlmesh.runtimeConfig template.
import { MOUNTS, NAMES } from './fixed-names.ts';

/** Computed fields with a TypeScript and a template implementation of their own, each tested. */
export type HelperName = 'spoolMaxBytes' | 'probeImage' | 'gpuDiscoveryNodeTerms';

export type Scalar =
  | { kind: 'const'; value: string | number }
  | { kind: 'value'; path: string }
  | { kind: 'release'; field: 'name' | 'namespace' }
  /** the value, or `fallback` when it is '' */
  | { kind: 'valueOr'; path: string; fallback: string }
  /** `then` when the value is not '', else '' */
  | { kind: 'whenSet'; path: string; then: string }
  /** whether the value is not '' */
  | { kind: 'isSet'; path: string }
  /** the parts joined, scalars in between */
  | { kind: 'format'; parts: (string | Scalar)[] }
  /** scalar values and lists, concatenated, without repeats */
  | { kind: 'uniqueList'; items: ({ scalar: string } | { list: string })[] }
  | { kind: 'helper'; name: HelperName };
/** An optional field: present when the value at `when` (any of them, for a list) is set. */
export type Optional = { kind: 'optional'; when: string | string[]; node: SpecNode };
export type SpecNode = Scalar | { kind: 'object'; fields: Record<string, SpecNode | Optional> };

const v = (path: string): Scalar => ({ kind: 'value', path });
const c = (value: string | number): Scalar => ({ kind: 'const', value });
const object = (fields: Record<string, SpecNode | Optional>): SpecNode => ({ kind: 'object', fields });

export const RUNTIME_CONFIG_SPEC: SpecNode = object({
  release: { kind: 'release', field: 'name' },
  namespace: { kind: 'release', field: 'namespace' },
  runsNamespace: c(NAMES.runsNamespace),
  controlPlane: object({
    apiHost: v('controlPlane.apiHost'),
    apiPort: c(443),
    registryHost: v('controlPlane.registryHost'),
    outputHosts: v('controlPlane.outputHosts'),
    // inline (ConfigMap rlmesh-ca-bundle) or from the operator's ConfigMap or Secret: mounted at the same path
    caBundlePath: { kind: 'optional', when: ['controlPlane.caBundle', 'controlPlane.caBundleFrom'], node: c(MOUNTS.caFile) },
    pinCaBundle: v('controlPlane.pinCaBundle'),
    // only with a proxy; its credentials only with existingSecret, mounted at credentialsDir in the agent and the egress proxy
    proxy: {
      kind: 'optional',
      when: 'controlPlane.proxy.url',
      node: object({
        url: v('controlPlane.proxy.url'),
        noProxy: v('controlPlane.proxy.noProxy'),
        passUnresolvedNames: v('controlPlane.proxy.passUnresolvedNames'),
        credentialsDir: { kind: 'optional', when: 'controlPlane.proxy.existingSecret', node: c(MOUNTS.proxyCredentialsDir) },
        credentialsSecret: { kind: 'optional', when: 'controlPlane.proxy.existingSecret', node: v('controlPlane.proxy.existingSecret') },
      }),
    },
  }),
  credentials: object({
    controlSecret: { kind: 'valueOr', path: 'credentials.controlSecret', fallback: NAMES.controlSecret },
    pullSecret: { kind: 'valueOr', path: 'credentials.pullSecret', fallback: NAMES.pullSecret },
    relaySecret: c(NAMES.relaySecret),
    crdHookPullSecret: c(NAMES.crdHookPullSecret),
    ownerClusterRole: c(NAMES.agentClusterRole),
    joinPullSecret: { kind: 'whenSet', path: 'joinToken', then: NAMES.joinPullSecret },
    joinTokenProvided: { kind: 'isSet', path: 'joinToken' },
  }),
  observability: object({ enabled: v('observability.enabled') }),
  // GPU discovery's required node terms, so the agent's preflight names GPU nodes it does not run on
  gpuFeatureDiscovery: object({ enabled: v('gpuFeatureDiscovery.enabled'), nodeSelectorTerms: { kind: 'helper', name: 'gpuDiscoveryNodeTerms' } }),
  egress: object({
    proxyUrl: { kind: 'format', parts: [`http://${NAMES.egressProxyService}.`, { kind: 'release', field: 'namespace' }, '.svc:', v('egress.port')] },
    // built-in platform hosts first, then egress.extraDomains
    allowedDomains: { kind: 'uniqueList', items: [{ scalar: 'controlPlane.apiHost' }, { scalar: 'controlPlane.registryHost' }, { list: 'controlPlane.outputHosts' }, { list: 'egress.extraDomains' }] },
    allowedPorts: v('egress.allowedPorts'),
    allowRanges: v('egress.allowRanges'),
    clusterRanges: v('egress.clusterRanges'),
  }),
  artifactCache: object({ pvcName: c(NAMES.artifactCachePvc), cacheName: c('default'), accessModes: v('artifactCache.storage.sharedPvc.accessModes') }),
  agent: object({
    nodeSelector: v('agent.reportNodeSelector'),
    spoolMaxBytes: { kind: 'helper', name: 'spoolMaxBytes' },
    imageRegistries: { kind: 'uniqueList', items: [{ scalar: 'controlPlane.registryHost' }, { list: 'evaluations.extraRegistries' }] },
  }),
  network: object({ dnsPeers: v('network.dnsPeers'), dnsPorts: v('network.dnsPorts') }),
  storage: object({ className: v('storage.className'), spoolClassName: v('agent.spool.storageClassName') }),
  // the probe runs the controller's image (it carries lib/preflight/netprobe.ts)
  preflight: object({ networkPolicyProbe: object({ enabled: v('preflight.networkPolicyProbe.enabled'), image: { kind: 'helper', name: 'probeImage' } }) }),
  evaluations: object({
    runWithoutNetworkPolicyEnforcement: v('evaluations.runWithoutNetworkPolicyEnforcement'),
    startDeadlineSeconds: v('evaluations.startDeadlineSeconds'),
    imagePullSecrets: v('evaluations.imagePullSecrets'),
    hostUsers: v('evaluations.hostUsers'),
    // the operator's policy for evaluation pods (lib/evaluation-placement.ts)
    placement: object({
      nodeSelector: v('evaluations.nodeSelector'),
      tolerations: v('evaluations.tolerations'),
      affinity: v('evaluations.affinity'),
      priorityClassName: v('evaluations.priorityClassName'),
      runtimeClassName: v('evaluations.runtimeClassName'),
      podLabels: v('evaluations.podLabels'),
      podAnnotations: v('evaluations.podAnnotations'),
    }),
  }),
  ports: object({ metrics: v('metrics.port'), health: c(8081) }),
  // podSecurity.arbitraryUid, the commonLabels of every object the agent and the controller create, and the pod
  // labels of the pods the controller starts besides evaluations (lib/chart-knobs.ts)
  pods: object({
    arbitraryUid: v('podSecurity.arbitraryUid'),
    commonLabels: v('commonLabels'),
    podLabels: v('podLabels'),
    podAnnotations: v('podAnnotations'),
    // a mirror's login (global.imageRegistry): the probe pod and the evaluation pods' network-ready container run the runtime image
    imagePullSecrets: v('imagePullSecrets'),
  }),
});

type Context = { values: unknown; release: { name: string; namespace: string }; helpers: Record<HelperName, () => unknown> };

const lookup = (values: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], values);

/** Set as a template's `if` reads it: not '', 0, false, nil, or an empty list or map. */
const isSet = (x: unknown): boolean =>
  Array.isArray(x) ? x.length > 0 : typeof x === 'object' && x !== null ? Object.keys(x).length > 0 : Boolean(x);

/** The config a spec node gives for these values (what the chart's template renders). */
export function evaluateSpec(node: SpecNode, ctx: Context): unknown {
  switch (node.kind) {
    case 'const':
      return node.value;
    case 'value':
      return lookup(ctx.values, node.path);
    case 'release':
      return ctx.release[node.field];
    case 'valueOr':
      return (lookup(ctx.values, node.path) as string) || node.fallback;
    case 'whenSet':
      return lookup(ctx.values, node.path) !== '' ? node.then : '';
    case 'isSet':
      return lookup(ctx.values, node.path) !== '';
    case 'format':
      return node.parts.map((p) => (typeof p === 'string' ? p : String(evaluateSpec(p, ctx)))).join('');
    case 'uniqueList':
      return [...new Set(node.items.flatMap((i) => ('scalar' in i ? [lookup(ctx.values, i.scalar)] : (lookup(ctx.values, i.list) as unknown[]))))];
    case 'helper':
      return ctx.helpers[node.name]();
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, f] of Object.entries(node.fields)) {
        if (f.kind !== 'optional') out[k] = evaluateSpec(f, ctx);
        else if ([f.when].flat().some((w) => isSet(lookup(ctx.values, w)))) out[k] = evaluateSpec(f.node, ctx);
      }
      return out;
    }
  }
}
