// The egress proxy: its replicas ready, what it refused in the last minutes
// and since its pods started (its metrics, read from each ready pod's metrics
// port through the API server's pod proxy: the operator's kube context needs
// get on pods/proxy, nothing in the cluster changes).
import * as k8s from '@kubernetes/client-node';
import { NAMES } from '../../fixed-names.ts';
import { errorMessage } from '../../error-fields.ts';
import { LAST_REFUSAL_METRIC, RECENT_MINUTES, RECENT_REFUSALS_METRIC } from '../../egress-recent-refusals.ts';
import { runtimeDeployments, pods } from '../reads.ts';
import { ago, type CheckResult, type StatusContext } from '../types.ts';

export type Decisions = { outcome: string; rule: string; count: number }[];

/** rlmesh_egress_decisions_total from a Prometheus text exposition. */
export function parseDecisions(text: string): Decisions {
  const out: Decisions = [];
  for (const line of text.split('\n')) {
    const m = /^rlmesh_egress_decisions_total\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    out.push({ outcome: labels.outcome ?? '', rule: labels.rule ?? '', count: Number(m[2]) });
  }
  return out;
}

/** Refusals in the last RECENT_MINUTES and when the last one was (Unix seconds, 0 for none), summed and latest over the pods. */
export type RecentRefusals = { count: number; lastAt: number };

export function parseRecent(text: string): RecentRefusals {
  const gauge = (name: string) => Number(new RegExp(`^${name}\\s+(\\S+)`, 'm').exec(text)?.[1] ?? 0);
  return { count: gauge(RECENT_REFUSALS_METRIC), lastAt: gauge(LAST_REFUSAL_METRIC) };
}

export type ProxyFacts = { namespace: string; deployment: k8s.V1Deployment | undefined; decisions: Decisions | undefined; recent?: RecentRefusals; now?: number; metricsProblem?: string };

export function egressVerdict(f: ProxyFacts): CheckResult {
  const id = 'egress-proxy';
  const d = f.deployment;
  if (!d) return { id, verdict: 'fail', found: `no Deployment ${NAMES.egressProxyService} in ${f.namespace}`, fix: 'Evaluations have no way out: helm upgrade the release so the chart puts it back.' };
  const want = d.spec?.replicas ?? 1;
  const ready = d.status?.readyReplicas ?? 0;
  let refusals = 'its refusals unknown';
  if (f.decisions) {
    const total = f.decisions.reduce((n, x) => n + x.count, 0);
    const refused = f.decisions.filter((x) => x.outcome === 'refused');
    const n = refused.reduce((a, x) => a + x.count, 0);
    const byRule = new Map<string, number>();
    for (const r of refused) byRule.set(r.rule, (byRule.get(r.rule) ?? 0) + r.count);
    const top = [...byRule].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([rule, c]) => `${rule || 'other'} ${c}`);
    const since = `${n} of ${total} decisions refused since its pods started${top.length ? ` (${top.join(', ')})` : ''}`;
    const r = f.recent;
    const last = r && r.lastAt > 0 && f.now !== undefined ? `, the last ${ago(f.now - r.lastAt * 1000)} ago` : '';
    refusals = r ? `${r.count} refused in the last ${RECENT_MINUTES} min${last}; ${since}` : since;
  } else if (f.metricsProblem) {
    refusals = `refusals unknown (${f.metricsProblem})`;
  }
  const found = `${ready}/${want} ready; ${refusals}`;
  if (ready === 0) return { id, verdict: 'fail', found, fix: `Evaluations cannot reach the platform or their artifacts: kubectl -n ${f.namespace} describe deployment ${NAMES.egressProxyService} and its pods' logs say why.` };
  if (ready < want) return { id, verdict: 'warn', found, fix: `kubectl -n ${f.namespace} get pods -l app.kubernetes.io/name=${NAMES.egressProxyService} shows the replica that is not ready.` };
  return { id, verdict: 'pass', found, fix: 'Refusals are the allow-list at work; a host evaluations need goes in egress.extraDomains.' };
}

export async function checkEgressProxy(ctx: StatusContext): Promise<CheckResult> {
  const deployment = (await runtimeDeployments(ctx, ctx.namespace)).find((d) => d.metadata?.name === NAMES.egressProxyService);
  const ready = (await pods(ctx, ctx.namespace, `app.kubernetes.io/name=${NAMES.egressProxyService}`)).filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  const core = ctx.kc.makeApiClient(k8s.CoreV1Api);
  let decisions: Decisions | undefined;
  let recent: RecentRefusals | undefined;
  let metricsProblem: string | undefined;
  try {
    const all = await Promise.all(
      ready.map(async (p) => {
        const port = p.spec?.containers.flatMap((c) => c.ports ?? []).find((x) => x.name === 'metrics')?.containerPort;
        if (!port) throw new Error(`pod ${p.metadata?.name} has no port named metrics`);
        return core.connectGetNamespacedPodProxyWithPath({ namespace: ctx.namespace, name: `${p.metadata!.name!}:${port}`, path: 'metrics' });
      }),
    );
    if (ready.length) {
      decisions = all.flatMap(parseDecisions);
      recent = all.map(parseRecent).reduce((a, b) => ({ count: a.count + b.count, lastAt: Math.max(a.lastAt, b.lastAt) }));
    }
  } catch (err) {
    metricsProblem = `cannot read its metrics through the API server: ${errorMessage(err).slice(0, 160)}`;
  }
  return egressVerdict({ namespace: ctx.namespace, deployment, decisions, now: ctx.now(), ...(recent ? { recent } : {}), ...(metricsProblem ? { metricsProblem } : {}) });
}
