import * as k8s from '@kubernetes/client-node';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { EvaluationUpdate } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { EvaluationStatus, trimEvaluation } from './evaluation-updates.ts';
import { Spool } from './spool.ts';
import { tempDir } from '../test/support/temp.ts';

async function tracker(maxBytes = 1 << 20) {
  const spool = await Spool.open(tempDir('evst-'), { maxBytes, log: pino({ level: 'silent' }) });
  const sent: EvaluationUpdate[] = [];
  const status = new EvaluationStatus({ kc: new k8s.KubeConfig(), namespace: 'rlmesh-runs', spool, log: pino({ level: 'silent' }), watchSilenceMs: 1000, send: (u) => sent.push(u) });
  const see = (st: Record<string, unknown>) => status.observe('ev-1', trimEvaluation({ metadata: { name: 'ev-1', namespace: 'rlmesh-runs' }, spec: { evaluationId: 'ev-1' }, status: st }).status!);
  const settle = () => new Promise((r) => setTimeout(r, 50));
  return { spool, sent, see, settle };
}

describe('evaluation status → updates', () => {
  it('reports a Running it never saw before the final phase, dated from status.startTime', async () => {
    const { sent, see, settle } = await tracker();
    see({ phase: 'Pending', reason: 'PodCreated', podName: 'p' });
    // the watch was down while the pod ran: the next thing seen is the end
    see({ phase: 'Succeeded', reason: 'Completed', exitCode: 0, podName: 'p', nodeName: 'n1', startTime: '2026-01-01T00:00:05Z' });
    await settle();
    expect(sent.map((u) => u.phase)).toEqual(['Pending', 'Running', 'Succeeded']);
    expect(sent[1]!.sequence).toBeGreaterThan(sent[0]!.sequence);
    expect(sent[2]!.sequence).toBeGreaterThan(sent[1]!.sequence);
    expect(sent[1]).toMatchObject({ reason: 'Started', pod: 'p', node: 'n1' });
    expect(timestampDate(sent[1]!.observedAt!).toISOString()).toBe('2026-01-01T00:00:05.000Z');
  });

  it("sends a controller's refusal as it is: CacheNodeCannotRun reaches the platform with its message", async () => {
    const { sent, see, settle } = await tracker();
    const message = 'the artifact cache rlmesh-artifact-cache is ReadWriteOnce, … node real-0 can never run this one: no nvidia.com/gpu (1 asked). To run …';
    see({ phase: 'Failed', reason: 'CacheNodeCannotRun', message });
    await settle();
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ phase: 'Failed', reason: 'CacheNodeCannotRun', message });
  });

  it('adds nothing when Running was seen, or when the evaluation never started', async () => {
    const seen = await tracker();
    seen.see({ phase: 'Running', reason: 'Started', podName: 'p', nodeName: 'n1', startTime: '2026-01-01T00:00:05Z' });
    seen.see({ phase: 'Failed', reason: 'NonZeroExit', exitCode: 2, podName: 'p', nodeName: 'n1', startTime: '2026-01-01T00:00:05Z' });
    seen.see({ phase: 'Failed', reason: 'NonZeroExit', exitCode: 2, podName: 'p', nodeName: 'n1', startTime: '2026-01-01T00:00:05Z' });
    await seen.settle();
    expect(seen.sent.map((u) => u.phase)).toEqual(['Running', 'Failed']);

    const never = await tracker();
    never.see({ phase: 'Pending', reason: 'ErrImagePull', podName: 'p' });
    never.see({ phase: 'Failed', reason: 'DeadlineExceeded', podName: 'p' });
    await never.settle();
    expect(never.sent.map((u) => u.phase)).toEqual(['Pending', 'Failed']);
  });
});

describe('controller startTime feeds the rule', () => {
  it('is when a container started, not when the kubelet accepted the pod', async () => {
    const { observePod } = await import('../controller/evaluation-phase.ts');
    const ev = { metadata: { name: 'ev-1' }, spec: { evaluationId: 'ev-1', image: 'i', deadlineSeconds: 60 } } as Parameters<typeof observePod>[1];
    const pulling = observePod({ metadata: { name: 'p' }, spec: { nodeName: 'n', containers: [] }, status: { phase: 'Pending', startTime: new Date('2026-01-01T00:00:00Z'), containerStatuses: [{ name: 'c', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImagePull' } } }] } }, ev);
    expect(pulling.startTime).toBeUndefined();
    const done = observePod({ metadata: { name: 'p' }, spec: { nodeName: 'n', containers: [] }, status: { phase: 'Succeeded', startTime: new Date('2026-01-01T00:00:00Z'), containerStatuses: [{ name: 'c', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0, startedAt: new Date('2026-01-01T00:00:07Z') } } }] } }, ev);
    expect(done.startTime).toBe('2026-01-01T00:00:07.000Z');
  });
});
