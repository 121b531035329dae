import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { RLMeshEvaluation } from '../lib/crds/types.ts';
import { msUntilDeadline, msUntilStartDeadline, nextStatus, observePod, podHoldup, startDeadlineExceeded, statusHoldup, worthWriting } from './evaluation-phase.ts';

const ev: RLMeshEvaluation = {
  apiVersion: 'rlmesh.dev/v1alpha1',
  kind: 'RLMeshEvaluation',
  metadata: { name: 'e', namespace: 'rlmesh-runs', generation: 2 },
  spec: { evaluationId: 'x', image: 'img', deadlineSeconds: 30, cancelled: false },
};
const pod = (status: V1Pod['status'], nodeName?: string): V1Pod => ({ metadata: { name: 'rle-e' }, spec: { containers: [], ...(nodeName ? { nodeName } : {}) }, status });

describe('observePod', () => {
  it('reports the scheduler refusal in its own words as Waiting', () => {
    const o = observePod(
      pod({ phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available: 3 Insufficient nvidia.com/gpu.' }] }),
      ev,
    );
    expect(o).toMatchObject({ phase: 'Waiting', reason: 'Unschedulable', message: '0/3 nodes are available: 3 Insufficient nvidia.com/gpu.' });
  });

  it('an evaluation held by its network-ready init container fails as NetworkNotReady, quoting the probe', () => {
    const o = observePod(
      pod({ phase: 'Failed', initContainerStatuses: [{ name: 'network-ready', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 10, message: 'forbidden 10.96.0.1:443: connected; allowed p:3128: connected' } } }] }, 'n1'),
      ev,
    );
    expect(o).toMatchObject({ phase: 'Failed', reason: 'NetworkNotReady' });
    expect(o.message).toMatch(/did not start: its pod's NetworkPolicies were not in force in time \(forbidden 10\.96\.0\.1:443: connected; .*\).*rlmesh preflight/);
  });
  it('maps exit codes and the deadline', () => {
    const ok = observePod(pod({ phase: 'Succeeded', containerStatuses: [{ name: 'evaluation', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } }] }, 'n1'), ev);
    expect(ok).toMatchObject({ phase: 'Succeeded', exitCode: 0, nodeName: 'n1' });
    const failed = observePod(pod({ phase: 'Failed', containerStatuses: [{ name: 'evaluation', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 3, reason: 'Error' } } }] }, 'n1'), ev);
    expect(failed).toMatchObject({ phase: 'Failed', reason: 'NonZeroExit', exitCode: 3, message: 'the evaluation container exited with code 3 (Error)' });
    const late = observePod(pod({ phase: 'Failed', reason: 'DeadlineExceeded' }, 'n1'), ev);
    expect(late).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(late.message).toContain('deadline of 30s');
  });

  it('computes the time left before the deadline from the pod start', () => {
    const started = new Date(Date.now() - 10_000);
    const left = msUntilDeadline(pod({ phase: 'Running', startTime: started }), ev)!;
    expect(left).toBeGreaterThan(19_000);
    expect(left).toBeLessThanOrEqual(20_000);
  });
});

describe('the start deadline', () => {
  const status = (name: string, state: object) => ({ name, image: 'i', imageID: '', ready: false, restartCount: 0, state });

  it('counts from creation, and with artifacts from when the cache held them: fetching is not counted', () => {
    const now = Date.parse('2026-01-01T01:00:00Z');
    const created = { ...ev, metadata: { ...ev.metadata, creationTimestamp: '2026-01-01T00:00:00Z' } };
    expect(msUntilStartDeadline(created, 1800, now)).toBe(-1_800_000);
    const artifact = { name: 'a', sha256: 'a'.repeat(64), sizeBytes: 1, source: { httpsUrlSecretRef: { name: 's', key: 'k' } } };
    const fetched: RLMeshEvaluation = {
      ...created,
      spec: { ...created.spec, artifacts: [artifact] },
      status: { artifacts: { state: 'Ready', reason: 'Cached', updatedAt: '2026-01-01T00:50:00Z' } },
    };
    expect(msUntilStartDeadline(fetched, 1800, now)).toBe(1_200_000);
    expect(startDeadlineExceeded(fetched, undefined, 1800).message).toContain('within 1800s of when its artifacts were cached');
    // still fetching: the clock has not started, but nothing fires before Ready either
    expect(msUntilStartDeadline({ ...fetched, status: { artifacts: { state: 'Fetching' } } }, 1800, now)).toBe(-1_800_000);
  });

  it('names what held a pod back: an init container that does not pull or has not finished, a container that cannot be created', () => {
    expect(podHoldup(pod({ phase: 'Pending', initContainerStatuses: [status('network-ready', { waiting: { reason: 'ErrImagePull', message: 'manifest unknown' } })], containerStatuses: [status('evaluation', { waiting: { reason: 'PodInitializing' } })] }, 'n1'))).toEqual({
      by: 'kubelet',
      reason: 'ErrImagePull',
      message: 'manifest unknown',
      container: 'network-ready',
    });
    expect(podHoldup(pod({ phase: 'Pending', initContainerStatuses: [status('network-ready', { running: {} })], containerStatuses: [status('evaluation', { waiting: { reason: 'PodInitializing' } })] }, 'n1'))).toMatchObject({
      reason: 'Initializing',
      container: 'network-ready',
    });
    expect(podHoldup(pod({ phase: 'Pending', containerStatuses: [status('evaluation', { waiting: { reason: 'CreateContainerConfigError', message: 'secret "x" not found' } })] }, 'n1'))).toMatchObject({
      by: 'kubelet',
      reason: 'CreateContainerConfigError',
    });
    expect(podHoldup(pod({ phase: 'Pending' }))).toBeUndefined();
    // without a pod, the status holds the last word: the quota's refusal, or a wait of the controller's own
    expect(statusHoldup({ phase: 'Waiting', reason: 'QuotaExceeded', message: 'exceeded quota' })).toMatchObject({ by: 'quota' });
    expect(statusHoldup({ phase: 'Waiting', reason: 'ConcurrencyLimit', message: 'limit' })).toMatchObject({ by: 'controller' });
    expect(statusHoldup({ phase: 'Pending', reason: 'PodCreated', message: 'created pod rle-e' })).toBeUndefined();
  });

  it('a pod the kubelet stopped at the run deadline before its container started says so, with the kubelet\'s last word', () => {
    const late = observePod(pod({ phase: 'Failed', reason: 'DeadlineExceeded', containerStatuses: [status('evaluation', { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "img"' } })] }, 'n1'), ev);
    expect(late).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(late.message).toBe('the evaluation\'s pod reached its deadline of 30s before its container started, and was stopped; the kubelet last said ImagePullBackOff (container evaluation): Back-off pulling image "img"');
  });
});

describe('nextStatus', () => {
  it('keeps a condition transition time while its status holds, and never leaves a finished phase', () => {
    const t0 = new Date('2026-01-01T00:00:00Z');
    const s1 = nextStatus(undefined, { phase: 'Waiting', reason: 'QuotaExceeded', message: 'q', conditions: [{ type: 'Scheduled', status: 'False', reason: 'QuotaExceeded', message: 'q' }] }, 2, t0);
    const s2 = nextStatus(s1, { phase: 'Waiting', reason: 'Unschedulable', message: 'u', conditions: [{ type: 'Scheduled', status: 'False', reason: 'Unschedulable', message: 'u' }] }, 2, new Date('2026-01-01T00:01:00Z'));
    expect(s2.conditions![0]!.lastTransitionTime).toBe(t0.toISOString());
    expect(s2.conditions![0]!.reason).toBe('Unschedulable');
    expect(s2.observedGeneration).toBe(2);
    const done = nextStatus(s2, { phase: 'Succeeded', reason: 'Completed', message: 'ok', exitCode: 0 }, 2);
    expect(done.finishTime).toBeDefined();
    expect(nextStatus(done, { phase: 'Running', reason: 'Started', message: '' }, 2)).toBe(done);
  });
});

describe('worthWriting', () => {
  const running = { name: 'evaluation', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: new Date('2026-01-01T00:00:05Z') } } };
  const step = (current: ReturnType<typeof nextStatus> | undefined, p: V1Pod) => nextStatus(current, observePod(p, ev), 2);

  it('writes once per phase: the scheduled step waits for Running, which carries the node', () => {
    const created = step(undefined, pod({ phase: 'Pending' }));
    expect(worthWriting(undefined, created)).toBe(true);
    const scheduled = step(created, pod({ phase: 'Pending' }, 'n1'));
    expect(scheduled).toMatchObject({ phase: 'Pending', reason: 'Scheduled', nodeName: 'n1' });
    expect(worthWriting(created, scheduled)).toBe(false);
    const started = step(created, pod({ phase: 'Running', containerStatuses: [running] }, 'n1'));
    expect(worthWriting(created, started)).toBe(true);
    expect(started).toMatchObject({ phase: 'Running', podName: 'rle-e', nodeName: 'n1', startTime: '2026-01-01T00:00:05.000Z' });
    expect(worthWriting(started, step(started, pod({ phase: 'Running', containerStatuses: [running] }, 'n1')))).toBe(false);
  });

  it('writes what a user must act on at once, and its resolution, within Pending too', () => {
    const created = step(undefined, pod({ phase: 'Pending' }));
    const pulling = { name: 'evaluation', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImagePull', message: 'not found' } } };
    const stuck = step(created, pod({ phase: 'Pending', containerStatuses: [pulling] }, 'n1'));
    expect(stuck.reason).toBe('ErrImagePull');
    expect(worthWriting(created, stuck)).toBe(true);
    const pulled = step(stuck, pod({ phase: 'Pending' }, 'n1'));
    expect(pulled.reason).toBe('Scheduled');
    expect(worthWriting(stuck, pulled)).toBe(true);
  });

  it('writes the pod name when the status does not hold it yet, whatever the step', () => {
    const waiting = nextStatus(undefined, { phase: 'Pending', reason: 'PodCreated', message: 'created pod rle-e' }, 2);
    expect(worthWriting(waiting, step(waiting, pod({ phase: 'Pending' }, 'n1')))).toBe(true);
  });
});
