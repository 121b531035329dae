// evaluations.startDeadlineSeconds on the real apiserver, shortened to a few
// seconds through the runtime config: an evaluation no node can take and one
// the ResourceQuota refuses fail as StartDeadlineExceeded in the scheduler's
// and the quota's words, with no event to wake the controller but its own
// requeue; one that started in time runs past it. (An image that never pulls
// needs a real kubelet: kwok pulls nothing. The unit tests cover that case.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { until } from '../support/until.ts';
import { apply, createEvaluation, evaluation, eventsFor, getPod, setupEnv, startController, waitForPhase, type ControllerProcess, type Env } from './harness.ts';

const START_DEADLINE_SECONDS = 8;

let env: Env;
let reconciler: ControllerProcess;
beforeAll(async () => {
  env = await setupEnv({ startDeadlineSeconds: START_DEADLINE_SECONDS });
  // retries far apart: only the requeue at the start deadline can fail these evaluations on time
  reconciler = await startController(env, 'reconciler', ['--waiting-retry-seconds=120']);
});
afterAll(async () => {
  await reconciler?.stop();
  await env?.cleanup();
});

/** Seconds from the evaluation's creation until it finished. */
const secondsToFail = (ev: { metadata: { creationTimestamp?: string | Date }; status?: { finishTime?: string } }) =>
  (new Date(ev.status!.finishTime!).getTime() - new Date(ev.metadata.creationTimestamp!).getTime()) / 1000;

describe('start deadline', () => {
  it('fails an evaluation no node can take, quoting the scheduler, and stops its pod', async () => {
    await createEvaluation(env, evaluation('nowhere', { placement: { nodeSelector: { 'kubernetes.io/hostname': 'no-such-node' } } }));
    await waitForPhase(env, 'nowhere', ['Waiting']);
    const failed = await waitForPhase(env, 'nowhere', ['Failed'], 60_000);
    expect(failed.status!.reason).toBe('StartDeadlineExceeded');
    expect(failed.status!.message).toMatch(
      new RegExp(`did not start within ${START_DEADLINE_SECONDS}s of when it was created \\(evaluations\\.startDeadlineSeconds\\), so its pod rle-nowhere was stopped: the scheduler last said Unschedulable: 0/\\d+ nodes are available:.*didn't match Pod's node affinity/selector`),
    );
    // with --waiting-retry-seconds=120, only the requeue at the deadline fails it this soon
    expect(secondsToFail(failed)).toBeGreaterThanOrEqual(START_DEADLINE_SECONDS - 1);
    expect(secondsToFail(failed)).toBeLessThan(START_DEADLINE_SECONDS + 30);
    await until('its pod to go', async () => {
      const pod = await getPod(env, 'rle-nowhere');
      return !pod || !!pod.metadata?.deletionTimestamp;
    });
    const warned = await until('the StartDeadlineExceeded event', async () => ((await eventsFor(env, 'nowhere')).some((e) => e.type === 'Warning' && e.reason === 'StartDeadlineExceeded') ? true : undefined), { timeoutMs: 10_000 }).catch(() => false);
    expect(warned).toBe(true);
  });

  it('fails an evaluation the ResourceQuota keeps out, quoting the quota; no pod ever existed', async () => {
    apply([{ apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'gpus', namespace: env.runs }, spec: { hard: { 'requests.nvidia.com/gpu': '1' } } }]);
    await until('the quota controller to fill in status.used', () => {
      const used = kubectl(['-n', env.runs, 'get', 'resourcequota', 'gpus', '-o', 'jsonpath={.status.used}']).stdout;
      return used.includes('requests.nvidia.com/gpu') || undefined;
    });
    try {
      await createEvaluation(env, evaluation('over-quota', { resources: { gpu: { count: 2, vendor: 'nvidia' } } }));
      const waiting = await waitForPhase(env, 'over-quota', ['Waiting']);
      expect(waiting.status!.reason).toBe('QuotaExceeded');
      const failed = await waitForPhase(env, 'over-quota', ['Failed'], 60_000);
      expect(failed.status!.reason).toBe('StartDeadlineExceeded');
      expect(failed.status!.message).toMatch(
        /the API server's ResourceQuota admission last said QuotaExceeded: .*forbidden: exceeded quota: gpus, requested: requests\.nvidia\.com\/gpu=2.*Raise the quota \(evaluations\.resourceQuota\.hard\)/,
      );
      expect(secondsToFail(failed)).toBeLessThan(START_DEADLINE_SECONDS + 30);
      expect(await getPod(env, 'rle-over-quota')).toBeUndefined();
    } finally {
      kubectl(['-n', env.runs, 'delete', 'resourcequota', 'gpus', '--ignore-not-found']);
    }
  });

  it('leaves alone an evaluation that started in time, however long it then runs', async () => {
    await createEvaluation(env, evaluation('in-time', {}, { duration: `${START_DEADLINE_SECONDS + 6}s` }));
    const done = await waitForPhase(env, 'in-time', ['Succeeded', 'Failed'], 90_000);
    expect(done.status).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
  });
});
