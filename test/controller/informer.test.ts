// The kept-alive informer against the real API server: the watchdog relists a
// silent watch, a 410 Gone (resourceVersion too old) relists, and events keep
// flowing afterwards.
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { startInformer, type KeptInformer } from '../../controller/informer.ts';
import { GROUP, VERSION, type RLMeshEvaluation } from '../../lib/crds/types.ts';
import { adminKubeConfig } from '../support/cluster.ts';
import { createEvaluation, evaluation, setupEnv, waitFor, type Env } from './harness.ts';

let env: Env;
const informers: KeptInformer<RLMeshEvaluation & KubernetesObject>[] = [];
afterAll(async () => {
  for (const i of informers) await i.stop();
  await env?.cleanup();
});
beforeAll(async () => {
  env = await setupEnv();
});

describe('kept-alive informer', () => {
  it('relists when the watch is silent, relists on 410 Gone, and keeps delivering events', async () => {
    let lists = 0;
    const seen = new Set<string>();
    const make = (watchdogMs: number, counter: () => void) => {
      const i = startInformer<RLMeshEvaluation & KubernetesObject>({
        kc: adminKubeConfig(),
        log: pino({ level: 'silent' }),
        name: 'test',
        watchdogMs,
        path: `/apis/${GROUP}/${VERSION}/namespaces/${env.runs}/rlmeshevaluations`,
        list: () => env.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: env.runs, plural: 'rlmeshevaluations' }),
        onChange: (o) => seen.add(o.metadata.name),
        onRelist: counter,
      });
      informers.push(i);
      return i;
    };
    const informer = make(1500, () => lists++);
    await informer.synced;
    expect(lists).toBe(1);
    await waitFor('the watchdog to relist the silent watch', async () => lists >= 3, 15_000, 100);

    await createEvaluation(env, evaluation('seen-after-relists', {}));
    await waitFor('the informer to see a new object', async () => seen.has('seen-after-relists'), 10_000, 100);

    // a resourceVersion older than the API server keeps answers 410 Gone: the informer
    // must relist (its watchdog is far off, so only the 410 can cause it)
    let quietLists = 0;
    const quiet = make(600_000, () => quietLists++);
    await quiet.synced;
    expect(quietLists).toBe(1);
    await sleep(1000); // the watch request is open once the list has been delivered
    (quiet.cache as unknown as { resourceVersion: string }).resourceVersion = '1';
    (quiet.cache as unknown as { _stop: () => void })._stop();
    await waitFor('a relist after 410 Gone', async () => quietLists === 2, 10_000, 50);
    await createEvaluation(env, evaluation('seen-after-410', {}));
    await waitFor('events after the 410 relist', async () => seen.has('seen-after-410'), 10_000, 100);
    expect(quiet.cache.list(env.runs).map((o) => o.metadata.name).sort()).toEqual(['seen-after-410', 'seen-after-relists']);
  });
});
