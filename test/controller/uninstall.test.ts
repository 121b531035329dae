// Nothing of the controller's can block an uninstall: no finalizers on
// evaluations or pods, and deleting the runs namespace with evaluations
// running completes. The CRDs print what `kubectl get` and `kubectl explain` promise.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { createEvaluation, evaluation, getCache, getEvaluation, getPod, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';
import { until } from '../support/until.ts';

let env: Env;
let reconciler: ControllerProcess;
let filler: ControllerProcess;
beforeAll(async () => {
  env = await setupEnv();
  reconciler = await startController(env, 'reconciler');
  filler = await startController(env, 'cache-filler', [`--cache-dir=${env.dir}/cache`, '--node-name=kwok-cpu-0']);
  await until('the cache status', async () => (await getCache(env))?.status?.phase === 'Ready');
});
afterAll(async () => {
  await reconciler?.stop();
  await filler?.stop();
  await env?.cleanup();
});

describe('kubectl and uninstall', () => {
  it('prints the promised columns and explains every field', async () => {
    await createEvaluation(env, evaluation('listed', {}, { duration: '300ms' }));
    await waitForPhase(env, 'listed', ['Succeeded']);
    const rle = kubectl(['-n', env.runs, 'get', 'rle', 'listed']).stdout;
    expect(rle).toMatch(/^NAME\s+PHASE\s+REASON\s+POD\s+NODE\s+EXIT\s+AGE/);
    expect(rle).toMatch(/listed\s+Succeeded\s+Completed\s+rle-listed\s+kwok-\S+\s+0\s+/);
    const caches = kubectl(['get', 'rlmeshcaches', env.cacheName]).stdout;
    expect(caches).toMatch(/^NAME\s+PHASE\s+CAPACITY\s+USED\s+ARTIFACTS\s+HIT RATIO\s+AGE/);
    expect(caches).toMatch(new RegExp(`${env.cacheName}\\s+Ready\\s+\\S+\\s+\\S+\\s+\\d+\\s+\\d\\.\\d\\d`));
    const explain = (field: string): string => kubectl(['explain', field]).stdout.replace(/\s+/g, ' ');
    expect(explain('rlmeshevaluation.spec.resources.gpu.vendor')).toContain('GPU vendor: nvidia requests nvidia.com/gpu, amd requests amd.com/gpu.');
    expect(explain('rlmeshevaluation.status.conditions.reason')).toContain('CamelCase reason');
    expect(explain('rlmeshcache.spec.highWaterMarkPercent')).toContain('least recently used artifacts are evicted');
  });

  it('puts no finalizers anywhere, so deleting the runs namespace with evaluations running completes', async () => {
    for (const n of ['u1', 'u2']) await createEvaluation(env, evaluation(n, {}, { duration: '300s' }));
    await waitForPhase(env, 'u1', ['Running']);
    await waitForPhase(env, 'u2', ['Running']);
    expect((await getEvaluation(env, 'u1'))!.metadata).not.toHaveProperty('finalizers');
    expect((await getPod(env, 'rle-u1'))!.metadata!.finalizers ?? []).toEqual([]);
    const r = kubectl(['delete', 'namespace', env.runs, '--wait=true', '--timeout=90s'], { allowFail: true });
    expect(r.status, r.stderr).toBe(0);
    expect(kubectl(['get', 'namespace', env.runs], { allowFail: true }).status).not.toBe(0);
  });
});
