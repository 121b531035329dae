// The kept-alive informer (lib/informer.ts, used by the agent and the
// controller) against the real API server: the watchdog re-opens a silent
// watch, a 410 Gone (resourceVersion too old) relists, and events keep flowing
// afterwards.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { startInformer, type Informer } from '../../lib/informer.ts';
import type { Page } from '../../lib/list-pages.ts';
import { createInformerMetrics } from '../../lib/informer-metrics.ts';
import { GROUP, VERSION, type RLMeshEvaluation } from '../../lib/crds/types.ts';
import { adminKubeConfig } from '../support/cluster.ts';
import { createEvaluation, evaluation, setupEnv, type Env } from './harness.ts';
import { until } from '../support/until.ts';

type Ev = RLMeshEvaluation & KubernetesObject;
let env: Env;
const informers: Informer<Ev>[] = [];
afterAll(async () => {
  for (const i of informers) await i.stop();
  await env?.cleanup();
});
beforeAll(async () => {
  env = await setupEnv();
});

describe('kept-alive informer', () => {
  it('re-opens a silent watch, relists on 410 Gone, and keeps delivering events', async () => {
    const seen = new Set<string>();
    const warnings: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const list = (page: { limit: number; _continue?: string }) =>
      env.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations', ...page }) as Promise<Page<Ev>>;
    const registry = new Registry();
    const metrics = createInformerMetrics(registry, 'controller');
    const counted = async (name: string, labels: Record<string, string>) =>
      (await registry.getMetricsAsJSON()).find((m) => m.name === name)?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0;
    const make = (watchSilenceMs: number, name = 'test', listPage: typeof list = list) => {
      const i = startInformer<Ev>({
        kc: adminKubeConfig(),
        log,
        name,
        metrics,
        watchSilenceMs,
        path: `/apis/${GROUP}/${VERSION}/namespaces/${env.runs}/rlmeshevaluations`,
        list: listPage,
      });
      for (const verb of ['add', 'update'] as const) i.on(verb, (o) => seen.add(o.metadata!.name!));
      informers.push(i);
      return i;
    };
    const informer = make(1500);
    await informer.synced;
    expect(informer.relists).toBe(1);
    const silent = () => warnings.filter((m) => m === 'watch silent for too long; re-opening it').length;
    await until('the watchdog to re-open the silent watch twice', async () => silent() >= 2, { timeoutMs: 15_000, intervalMs: 100 });
    // re-opening resumes from the last resourceVersion: no relist was needed
    expect(informer.relists).toBe(1);
    expect(await counted('rlmesh_controller_informer_relists_total', { informer: 'test' })).toBe(1);
    expect(await counted('rlmesh_controller_informer_watch_restarts_total', { informer: 'test', reason: 'watchdog' })).toBeGreaterThanOrEqual(2);

    await createEvaluation(env, evaluation('seen-after-reopen', {}));
    await until('the informer to see a new object', async () => seen.has('seen-after-reopen'), { timeoutMs: 10_000, intervalMs: 100 });

    // a resourceVersion older than the API server keeps answers 410 Gone: the informer
    // must relist (its watchdog is far off, so only the 410 can cause it). Its first list
    // is answered as if long ago, with an expired resourceVersion, so its first watch
    // asks the real API server for history it no longer has.
    let lists = 0;
    const expiredFirst = async (page: { limit: number; _continue?: string }): Promise<Page<Ev>> => {
      const answer = await list(page);
      return lists++ === 0 ? { ...answer, metadata: { ...answer.metadata, resourceVersion: '1' } } : answer;
    };
    const quiet = make(600_000, 'quiet', expiredFirst);
    await quiet.synced;
    expect(quiet.relists).toBe(1);
    await until('a relist after 410 Gone', async () => quiet.relists === 2, { timeoutMs: 15_000, intervalMs: 50 });
    expect(await counted('rlmesh_controller_informer_relists_total', { informer: 'quiet' })).toBe(2);
    await createEvaluation(env, evaluation('seen-after-410', {}));
    // this informer's own cache (the first informer sees the object too, maybe sooner)
    await until('events after the 410 relist', async () => quiet.cache.get('seen-after-410', env.runs) !== undefined, { timeoutMs: 10_000, intervalMs: 100 });
    expect(quiet.cache.list(env.runs).map((o) => o.metadata!.name).sort()).toEqual(['seen-after-410', 'seen-after-reopen']);
  });
});
