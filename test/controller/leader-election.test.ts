// Two controller replicas on the real local cluster: only the Lease holder
// acts, and when it is killed the standby takes over within the lease duration.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { createEvaluation, evaluation, getPod, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';
import { until } from '../support/until.ts';

let env: Env;
const procs: ControllerProcess[] = [];

const holder = (): string =>
  kubectl(['-n', env.sys, 'get', 'lease', 'rlmesh-cluster-controller', '-o', 'jsonpath={.spec.holderIdentity}'], { allowFail: true }).stdout.trim();
const logOf = (p: ControllerProcess): string => readFileSync(p.logFile, 'utf8');

beforeAll(async () => {
  env = await setupEnv();
});

afterAll(async () => {
  for (const p of procs) await p.stop();
  await env?.cleanup();
});

describe('leader election', () => {
  it('lets only the leader act, and fails over to the standby when the leader is killed', async () => {
    const r1 = await startController(env, 'reconciler', ['--identity=replica-1']);
    procs.push(r1);
    await until('replica-1 to hold the Lease', async () => holder() === 'replica-1');
    const r2 = await startController(env, 'reconciler', ['--identity=replica-2']);
    procs.push(r2);
    await until('replica-2 to be campaigning', async () => logOf(r2).includes('waiting to become leader'));

    for (let i = 0; i < 5; i++) await createEvaluation(env, evaluation(`led-${i}`, {}, { duration: '200ms' }));
    for (let i = 0; i < 5; i++) await waitForPhase(env, `led-${i}`, ['Succeeded']);
    expect(holder()).toBe('replica-1');
    expect(logOf(r1)).toContain('evaluation reconciler started');
    expect(logOf(r2)).not.toContain('became leader');
    expect(logOf(r2)).not.toContain('evaluation reconciler started');
    expect(logOf(r2)).not.toContain('"phase"');

    await r1.kill9();
    await createEvaluation(env, evaluation('after-failover', {}, { duration: '200ms' }));
    await until('replica-2 to take the Lease', async () => holder() === 'replica-2', { timeoutMs: 60_000, intervalMs: 100 });
    const done = await waitForPhase(env, 'after-failover', ['Succeeded']);
    expect(done.status!.podName).toBe('rle-after-failover');
    expect(await getPod(env, 'rle-after-failover')).toBeDefined();
    expect(logOf(r2)).toContain('became leader');

    // a leader that shuts down cleanly hands over at once
    const r3 = await startController(env, 'reconciler', ['--identity=replica-3']);
    procs.push(r3);
    await until('replica-3 to be campaigning', async () => logOf(r3).includes('waiting to become leader'));
    await r2.stop();
    // replica-2 released the Lease before it exited (holderIdentity cleared): an unreleased one would still name it
    expect(holder()).not.toBe('replica-2');
    await until('replica-3 to take the released Lease', async () => holder() === 'replica-3', { timeoutMs: 60_000, intervalMs: 100 });
    expect(logOf(r2)).not.toContain('could not release the leader Lease');
    await createEvaluation(env, evaluation('after-handover', {}, { duration: '200ms' }));
    await waitForPhase(env, 'after-handover', ['Succeeded']);
  });
});
