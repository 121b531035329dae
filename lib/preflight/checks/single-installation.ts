// One runtime installation per cluster: two agents would both take evaluation
// assignments and fight over the CRDs and cluster-scoped roles. Looks for the
// agent Deployment (or its pods), Helm releases of the chart and control
// Secrets in any namespace other than the one being installed into.
import { gunzipSync } from 'node:zlib';
import * as k8s from '@kubernetes/client-node';
import { NAMES } from '../../fixed-names.ts';
import { CLUSTER_ID_KEY } from '../../credential-secret.ts';
import { isForbidden } from '../../kube-errors.ts';
import type { CheckResult, PreflightContext } from '../types.ts';
import { errorMessage } from '../../error-fields.ts';

const ID = 'single-installation';
export const AGENT_NAME = 'rlmesh-cluster-agent';
export const CHART_NAME = 'rlmesh-runtime';
export const CONTROL_SECRET = NAMES.controlSecret;

export type Installation = { namespace: string; what: string };

export function installationVerdict(ownNamespace: string, found: Installation[], unread: string[]): CheckResult {
  const others = found.filter((f) => f.namespace !== ownNamespace);
  const byNs = new Map<string, string[]>();
  for (const o of others) byNs.set(o.namespace, [...(byNs.get(o.namespace) ?? []), o.what]);
  const notRead = unread.length ? `; not read: ${unread.join('; ')}` : '';
  if (byNs.size > 0) {
    const list = [...byNs].map(([ns, what]) => `namespace ${ns} (${[...new Set(what)].join(', ')})`).join('; ');
    const first = [...byNs.keys()][0]!;
    return {
      id: ID,
      verdict: 'fail',
      found: `another runtime installation: ${list}${notRead}`,
      fix: `Install into ${first} instead (helm upgrade --install there), or remove that installation first (helm uninstall -n ${first} rlmesh): one cluster takes one runtime installation.`,
    };
  }
  return { id: ID, verdict: unread.length ? 'warn' : 'pass', found: `no runtime installation outside ${ownNamespace}${notRead}`, fix: unread.length ? 'Run rlmesh preflight with a kube context that can list Deployments and Secrets in every namespace to be sure.' : 'Nothing to do.' };
}

/** The chart name inside a Helm 3 release Secret (data.release: base64 of gzip JSON). */
export function helmReleaseChart(secret: k8s.V1Secret): string | undefined {
  const encoded = secret.data?.release;
  if (!encoded) return undefined;
  try {
    const inner = Buffer.from(Buffer.from(encoded, 'base64').toString('utf8'), 'base64');
    const release = JSON.parse(gunzipSync(inner).toString('utf8')) as { chart?: { metadata?: { name?: string } } };
    return release.chart?.metadata?.name;
  } catch {
    return undefined;
  }
}

export async function checkSingleInstallation(ctx: PreflightContext): Promise<CheckResult> {
  const apps = ctx.kc.makeApiClient(k8s.AppsV1Api);
  const core = ctx.kc.makeApiClient(k8s.CoreV1Api);
  const found: Installation[] = [];
  const unread: string[] = [];
  const attempt = async (what: string, read: () => Promise<void>): Promise<void> => {
    try {
      await read();
    } catch (err) {
      if (!isForbidden(err)) throw err;
      unread.push(`${what}: ${errorMessage(err)}`);
    }
  };
  if (ctx.mode === 'agent') {
    // the agent may list pods cluster-wide (capacity reports); that is enough to see another agent running
    await attempt('agent pods', async () => {
      const pods = await core.listPodForAllNamespaces({ labelSelector: `app.kubernetes.io/name=${AGENT_NAME}` });
      for (const p of pods.items) found.push({ namespace: p.metadata?.namespace ?? '', what: `agent pod ${p.metadata?.name}` });
    });
    return installationVerdict(ctx.settings.namespace, found, unread);
  }
  await attempt('Deployments', async () => {
    const list = await apps.listDeploymentForAllNamespaces({ fieldSelector: `metadata.name=${AGENT_NAME}` });
    for (const d of list.items) found.push({ namespace: d.metadata?.namespace ?? '', what: `Deployment ${AGENT_NAME}` });
  });
  await attempt('Helm release Secrets', async () => {
    const list = await core.listSecretForAllNamespaces({ labelSelector: 'owner=helm' });
    for (const s of list.items) {
      if (helmReleaseChart(s) === CHART_NAME) found.push({ namespace: s.metadata?.namespace ?? '', what: `Helm release ${s.metadata?.labels?.name ?? '?'} of chart ${CHART_NAME}` });
    }
  });
  await attempt('control Secrets', async () => {
    const list = await core.listSecretForAllNamespaces({ fieldSelector: `metadata.name=${CONTROL_SECRET}` });
    for (const s of list.items) {
      const raw = s.data?.[CLUSTER_ID_KEY];
      const clusterId = raw ? Buffer.from(raw, 'base64').toString('utf8') : '?';
      found.push({ namespace: s.metadata?.namespace ?? '', what: `control Secret ${CONTROL_SECRET} for cluster ${clusterId}` });
    }
  });
  return installationVerdict(ctx.settings.namespace, found, unread);
}
