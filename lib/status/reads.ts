// Reads shared by the status checks, once per run: the runtime config the
// chart rendered (namespaces, the control plane's host, the opt-outs), the
// agent's published state, ConfigMaps by name, pods by label. A missing object
// is undefined, not an error.
import * as k8s from '@kubernetes/client-node';
import { isNotFound } from '../kube-errors.ts';
import { NAMES } from '../fixed-names.ts';
import { readSecretMetadata } from '../secret-metadata.ts';
import { AGENT_STATUS_CONFIGMAP, parseAgentStatus, type AgentStatus } from '../agent-status.ts';
import type { StatusContext } from './types.ts';

export async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

const memo = new WeakMap<StatusContext, Map<string, Promise<unknown>>>();
/** `read` once per run (per context) under `key`. */
function once<T>(ctx: StatusContext, key: string, read: () => Promise<T>): Promise<T> {
  let m = memo.get(ctx);
  if (!m) memo.set(ctx, (m = new Map()));
  let p = m.get(key) as Promise<T> | undefined;
  if (!p) m.set(key, (p = read()));
  return p;
}

export const configMap = (ctx: StatusContext, namespace: string, name: string): Promise<k8s.V1ConfigMap | undefined> =>
  once(ctx, `cm/${namespace}/${name}`, () => orUndefined(ctx.kc.makeApiClient(k8s.CoreV1Api).readNamespacedConfigMap({ namespace, name })));

/** The part of the runtime config (ConfigMap rlmesh-runtime-config, key config.json) the checks use. */
export type RuntimeFacts = { runsNamespace: string; apiHost: string; runWithoutNetworkPolicyEnforcement: boolean; probeEnabled: boolean; controlSecret: string; pullSecret: string };

export function runtimeFacts(ctx: StatusContext): Promise<RuntimeFacts | undefined> {
  return once(ctx, 'runtime', async () => {
    const raw = (await configMap(ctx, ctx.namespace, NAMES.runtimeConfigMap))?.data?.['config.json'];
    if (!raw) return undefined;
    const c = JSON.parse(raw) as {
      runsNamespace?: string;
      controlPlane?: { apiHost?: string };
      evaluations?: { runWithoutNetworkPolicyEnforcement?: boolean };
      preflight?: { networkPolicyProbe?: { enabled?: boolean } };
      credentials?: { controlSecret?: string; pullSecret?: string };
    };
    return {
      runsNamespace: c.runsNamespace ?? NAMES.runsNamespace,
      apiHost: c.controlPlane?.apiHost ?? '',
      runWithoutNetworkPolicyEnforcement: c.evaluations?.runWithoutNetworkPolicyEnforcement === true,
      probeEnabled: c.preflight?.networkPolicyProbe?.enabled !== false,
      controlSecret: c.credentials?.controlSecret ?? NAMES.controlSecret,
      pullSecret: c.credentials?.pullSecret ?? NAMES.pullSecret,
    };
  });
}

export const runsNamespace = async (ctx: StatusContext): Promise<string> => (await runtimeFacts(ctx))?.runsNamespace ?? NAMES.runsNamespace;

export type PublishedAgentStatus = { kind: 'missing' } | { kind: 'unreadable'; problem: string } | { kind: 'ok'; status: AgentStatus };

export function agentStatus(ctx: StatusContext): Promise<PublishedAgentStatus> {
  return once(ctx, 'agent-status', async () => {
    const cm = await configMap(ctx, ctx.namespace, AGENT_STATUS_CONFIGMAP);
    if (!cm) return { kind: 'missing' } as const;
    const r = parseAgentStatus(cm);
    return r.ok ? ({ kind: 'ok', status: r.status } as const) : ({ kind: 'unreadable', problem: r.problem } as const);
  });
}

export const PART_OF = 'app.kubernetes.io/part-of=rlmesh-runtime';

export const runtimeDeployments = (ctx: StatusContext, namespace: string): Promise<k8s.V1Deployment[]> =>
  once(ctx, `deploy/${namespace}`, async () => (await ctx.kc.makeApiClient(k8s.AppsV1Api).listNamespacedDeployment({ namespace, labelSelector: PART_OF })).items);

export const pods = (ctx: StatusContext, namespace: string, labelSelector: string): Promise<k8s.V1Pod[]> =>
  once(ctx, `pods/${namespace}/${labelSelector}`, async () => (await ctx.kc.makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace, labelSelector })).items);

/**
 * A Secret's metadata only (a PartialObjectMetadata GET): the CLI never receives a
 * Secret's data, so it cannot print it. Undefined when the Secret does not exist.
 */
export const secretMetadata = (ctx: StatusContext, namespace: string, name: string): Promise<k8s.V1ObjectMeta | undefined> =>
  once(ctx, `secret/${namespace}/${name}`, () => readSecretMetadata(ctx.kc.makeApiClient(k8s.CoreV1Api), namespace, name));
