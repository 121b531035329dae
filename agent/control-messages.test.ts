import { create } from '@bufbuild/protobuf';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { AckSchema, ClusterStateSchema, ControlMessageSchema, CredentialRotationSchema, type ControlMessage } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { controlMessageHandler, type ControlMessageParts } from './control-messages.ts';

const flush = () => new Promise((r) => setTimeout(r, 10));

function parts(overrides: Partial<ControlMessageParts> = {}) {
  const sent: unknown[] = [];
  const p = {
    log: pino({ level: 'silent' }),
    session: { acked: vi.fn(), send: vi.fn((m: unknown) => (sent.push(m), true)) },
    spool: { ack: vi.fn(async (ids: string[]) => ids.filter((i) => i !== 'unknown')) },
    evaluations: { reported: vi.fn(async () => undefined) },
    assignments: { assign: vi.fn(async () => undefined), cancel: vi.fn(async () => undefined) },
    store: { writeRotation: vi.fn(async () => undefined) },
    credWatch: { credentials: { control: 'old', clusterId: 'c1' }, use: vi.fn() },
    metrics: { updatesAcked: { inc: vi.fn() }, assignments: { inc: vi.fn() }, draining: { set: vi.fn() } },
    retrying: async (_what: string, fn: () => Promise<void>) => fn(),
    ...overrides,
  };
  return { p, sent, handle: controlMessageHandler(p as unknown as ControlMessageParts) };
}

const msg = (m: ControlMessage['msg']): ControlMessage => create(ControlMessageSchema, { msg: m });

describe('controlMessageHandler', () => {
  it('releases acked updates from the spool and tells the status tracker which were reported', async () => {
    const { p, handle } = parts();
    handle(msg({ case: 'ack', value: create(AckSchema, { ids: ['u1', 'unknown'] }) }));
    await flush();
    expect(p.session.acked).toHaveBeenCalledWith(['u1', 'unknown']);
    expect(p.metrics.updatesAcked.inc).toHaveBeenCalledWith(1);
    expect(p.evaluations.reported).toHaveBeenCalledWith(['u1']);
  });

  it('shows a drain: the gauge follows the cluster state, and one log line names each change', () => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l).msg as string) });
    const set = vi.fn();
    const { handle } = parts({ log, metrics: { updatesAcked: { inc: vi.fn() }, assignments: { inc: vi.fn() }, draining: { set } } as unknown as ControlMessageParts['metrics'] });
    const state = (draining: boolean) => msg({ case: 'clusterState', value: create(ClusterStateSchema, { draining }) });
    handle(state(false));
    handle(state(true));
    handle(state(true));
    handle(state(false));
    expect(set.mock.calls.map((c: unknown[]) => c[0])).toEqual([0, 1, 1, 0]);
    expect(lines).toEqual([
      'the platform is draining this cluster: no new evaluations arrive, those running finish; once GET /v1/clusters shows none unfinished, helm uninstall is safe',
      'the platform ended the drain: this cluster takes new evaluations again',
    ]);
  });

  it('writes a rotation once while the control plane resends it, then uses and confirms it', async () => {
    let release: () => void = () => {};
    const written = new Promise<void>((r) => (release = r));
    const { p, sent, handle } = parts({ store: { writeRotation: vi.fn(() => written) } as unknown as ControlMessageParts['store'] });
    const rotation = msg({ case: 'credentialRotation', value: create(CredentialRotationSchema, { purpose: 'control', value: 'new-control' }) });
    handle(rotation);
    handle(rotation);
    expect(p.store.writeRotation).toHaveBeenCalledTimes(1);
    release();
    await flush();
    expect(p.credWatch.use).toHaveBeenCalledWith({ control: 'new-control', clusterId: 'c1' });
    expect(sent).toEqual([{ case: 'credentialRotated', value: expect.objectContaining({ purpose: 'control' }) }]);
    // confirmed: a later resend is written again (the Secret may have been replaced since)
    handle(rotation);
    expect(p.store.writeRotation).toHaveBeenCalledTimes(2);
  });
});
