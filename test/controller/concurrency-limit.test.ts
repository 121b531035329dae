// --max-concurrent: evaluations beyond the limit wait, saying so, and start as
// soon as a running one finishes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/until.ts';
import { createEvaluation, evaluation, eventsFor, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';

let env: Env;
let reconciler: ControllerProcess;
beforeAll(async () => {
  env = await setupEnv();
  reconciler = await startController(env, 'reconciler', ['--max-concurrent=2']);
});
afterAll(async () => {
  await reconciler?.stop();
  await env?.cleanup();
});

describe('concurrency limit', () => {
  it('holds evaluations beyond --max-concurrent in Waiting and starts them when one finishes', async () => {
    await createEvaluation(env, evaluation('first', {}, { duration: '4s' }));
    await createEvaluation(env, evaluation('second', {}, { duration: '4s' }));
    await waitForPhase(env, 'first', ['Running']);
    await waitForPhase(env, 'second', ['Running']);
    await createEvaluation(env, evaluation('third', {}, { duration: '500ms' }));
    const waiting = await waitForPhase(env, 'third', ['Waiting']);
    expect(waiting.status!.reason).toBe('ConcurrencyLimit');
    expect(waiting.status!.message).toContain('2 evaluation pods are already running or pending');
    // the event is written beside the status, not before it: give it a moment to be listed
    const warned = await until('the ConcurrencyLimit event', async () => ((await eventsFor(env, 'third')).some((e) => e.type === 'Warning' && e.reason === 'ConcurrencyLimit') ? true : undefined), { timeoutMs: 10_000 }).catch(() => false);
    expect(warned).toBe(true);
    const done = await waitForPhase(env, 'third', ['Succeeded'], 60_000);
    const first = await waitForPhase(env, 'first', ['Succeeded']);
    expect(new Date(done.status!.startTime!).getTime()).toBeGreaterThanOrEqual(new Date(first.status!.finishTime!).getTime() - 1000);
  });
});
