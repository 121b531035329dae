import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { AckSchema, AssignmentSchema, ClusterStateSchema, ControlMessageSchema, CredentialRotationSchema, OutputHostsSchema, type ControlMessage } from '../lib/gen/rlmesh/v1/session_pb.ts';
import { dockerConfigJson } from '../lib/credential-secret.ts';
import type { OperatorDrain } from '../lib/operator-drain.ts';
import type { DrainRefusal } from './assignments.ts';
import { controlMessageHandler, type ControlMessageParts } from './control-messages.ts';

const flush = () => new Promise((r) => setTimeout(r, 10));
const REGISTRY = 'registry.rlmesh.dev';
const NEW_CONTROL = `rlm_cc_${'N'.repeat(40)}`;
const NEW_PULL = `rlm_rp_${'P'.repeat(40)}`;

function parts(overrides: Partial<ControlMessageParts> = {}) {
  const sent: unknown[] = [];
  const logLines: Record<string, unknown>[] = [];
  const p = {
    log: pino({ level: 'debug' }, { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) }),
    session: { acked: vi.fn(), send: vi.fn((m: unknown) => (sent.push(m), true)) },
    spool: { ack: vi.fn(async (ids: string[]) => ids.filter((i) => i !== 'unknown')) },
    evaluations: { reported: vi.fn(async () => undefined) },
    assignments: { assign: vi.fn(async () => undefined), cancel: vi.fn(async () => undefined) },
    store: { writeRotation: vi.fn(async () => undefined), operatorSecret: vi.fn(async () => undefined) },
    credWatch: { credentials: { control: 'old', clusterId: 'c1' }, use: vi.fn() },
    metrics: { updatesAcked: { inc: vi.fn() }, assignments: { inc: vi.fn() }, draining: { set: vi.fn() }, credentialValidUntil: { set: vi.fn() } },
    retrying: vi.fn(async (_what: string, fn: () => Promise<void>) => fn()),
    registryHost: REGISTRY,
    ...overrides,
  };
  return { p, sent, logLines, handle: controlMessageHandler(p as unknown as ControlMessageParts) };
}
const rotation = (purpose: string, value: string, oldValidUntil?: Date) =>
  msg({ case: 'credentialRotation', value: create(CredentialRotationSchema, { purpose, value, ...(oldValidUntil ? { oldValidUntil: timestampFromDate(oldValidUntil) } : {}) }) });

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

  it("hands the platform's output hosts to the publisher for the egress proxy, the whole list each time", () => {
    const publish = vi.fn();
    const { handle } = parts({ outputHosts: { publish } });
    handle(msg({ case: 'outputHosts', value: create(OutputHostsSchema, { hosts: ['outputs.rlmesh.dev', '*.evil.example'] }) }));
    handle(msg({ case: 'outputHosts', value: create(OutputHostsSchema, { hosts: [] }) }));
    expect(publish.mock.calls).toEqual([[['outputs.rlmesh.dev', '*.evil.example'], 'the session'], [[], 'the session']]);
  });

  it('shows a drain: the gauge follows the cluster state, and one log line names each change', () => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l).msg as string) });
    const set = vi.fn();
    const { handle } = parts({ log, metrics: { updatesAcked: { inc: vi.fn() }, assignments: { inc: vi.fn() }, draining: { set }, credentialValidUntil: { set: vi.fn() } } as unknown as ControlMessageParts['metrics'] });
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

  it('judges each new assignment by the drain as it stood when the assignment arrived: the platform\'s, and the operator\'s over it', async () => {
    const judged: (DrainRefusal | undefined)[] = [];
    const assign = vi.fn(async (_a: unknown, drained?: () => DrainRefusal | undefined) => void judged.push(drained?.()));
    let operator: OperatorDrain | null = null;
    const { handle } = parts({
      assignments: { assign, cancel: vi.fn(async () => undefined) } as unknown as ControlMessageParts['assignments'],
      operatorDrain: () => operator,
      namespace: 'rlmesh-system',
    });
    const assignment = (id: string) => msg({ case: 'assignment', value: create(AssignmentSchema, { evaluationId: id, image: 'registry.rlmesh.dev/e:1' }) });
    const state = (draining: boolean) => msg({ case: 'clusterState', value: create(ClusterStateSchema, { draining, ...(draining ? { drainingSince: timestampFromDate(new Date('2026-12-01T08:00:00Z')) } : {}) }) });
    handle(assignment('before'));
    handle(state(true));
    handle(assignment('while-platform-drains'));
    handle(state(false));
    handle(assignment('after'));
    operator = { since: '2026-12-02T09:00:00.000Z', by: 'alice' };
    handle(assignment('while-operator-drains'));
    // the platform cannot end the operator's drain
    handle(state(false));
    handle(assignment('platform-says-go'));
    await flush();
    expect(judged.map((j) => j?.reason)).toEqual([undefined, 'ClusterDraining', undefined, 'OperatorDrain', 'OperatorDrain']);
    expect(judged[1]!.message).toMatch(/^refused: the platform drains this cluster \(since 2026-12-01T08:00:00\.000Z\) and still sent this new evaluation; .*submit to another cluster, or end the drain on the platform first/);
    expect(judged[3]!.message).toMatch(/^refused: the cluster's operator drained this cluster at 2026-12-02T09:00:00\.000Z \(rlmesh drain, ConfigMap rlmesh-system\/rlmesh-operator-drain\), so it takes no new evaluations while those it holds run to their end; submit to another cluster, or ask the cluster's operator to run rlmesh drain --undo$/);
    // the operator's user stays in the cluster
    expect(judged[3]!.message).not.toContain('alice');
  });

  it('an operator drain not read yet: the assignment waits (its judging throws, so it is retried), never slips through', async () => {
    const seen: unknown[] = [];
    const assign = vi.fn(async (_a: unknown, drained?: () => DrainRefusal | undefined) => {
      try {
        drained?.();
      } catch (err) {
        seen.push(err);
        throw err;
      }
    });
    const { p, handle } = parts({
      assignments: { assign, cancel: vi.fn(async () => undefined) } as unknown as ControlMessageParts['assignments'],
      operatorDrain: () => {
        throw new Error('not read yet');
      },
    });
    handle(msg({ case: 'assignment', value: create(AssignmentSchema, { evaluationId: 'ev-1', image: 'registry.rlmesh.dev/e:1' }) }));
    await flush();
    expect(seen).toHaveLength(1);
    expect(p.metrics.assignments.inc).toHaveBeenCalledWith({ outcome: 'failed' });
  });

  it('writes a rotation once while the control plane resends it, then uses and confirms it', async () => {
    let release: () => void = () => {};
    const written = new Promise<void>((r) => (release = r));
    const { p, sent, handle } = parts({ store: { writeRotation: vi.fn(() => written), operatorSecret: vi.fn(async () => undefined) } as unknown as ControlMessageParts['store'] });
    const until = new Date('2026-12-05T10:00:00Z');
    const control = rotation('control', NEW_CONTROL, until);
    handle(control);
    handle(control);
    await flush();
    expect(p.store.writeRotation).toHaveBeenCalledTimes(1);
    // pending: the value in use stops being valid at the end of the overlap (the near-expiry alert's gauge)
    expect(p.metrics.credentialValidUntil.set).toHaveBeenLastCalledWith({ purpose: 'control' }, until.getTime() / 1000);
    release();
    await flush();
    expect(p.metrics.credentialValidUntil.set).toHaveBeenLastCalledWith({ purpose: 'control' }, 0);
    expect(p.credWatch.use).toHaveBeenCalledWith({ control: NEW_CONTROL, clusterId: 'c1' });
    expect(sent).toEqual([{ case: 'credentialRotated', value: expect.objectContaining({ purpose: 'control' }) }]);
    // confirmed: a later resend is written again (the Secret may have been replaced since)
    handle(control);
    await flush();
    expect(p.store.writeRotation).toHaveBeenCalledTimes(2);
  });

  it('never writes a Secret the operator delivers: one warning names the Secret, key and deadline (never the value), the status says awaiting-secret, and the rotation is confirmed once the Secret holds it', async () => {
    const theirs = { secrets: ['rlmesh-system/rlmesh-secrets'], key: 'control', holds: false };
    const operatorSecret = vi.fn(async () => ({ ...theirs }));
    const rotations = { storing: vi.fn(), stored: vi.fn(), refused: vi.fn(), awaitingSecret: vi.fn() };
    const { p, sent, logLines, handle } = parts({ store: { writeRotation: vi.fn(async () => undefined), operatorSecret } as unknown as ControlMessageParts['store'], rotations });
    const until = new Date('2026-12-05T10:00:00Z');
    const control = rotation('control', NEW_CONTROL, until);
    // the control plane re-sends it every minute while unconfirmed
    for (let i = 0; i < 3; i++) {
      handle(control);
      await flush();
    }
    expect(operatorSecret).toHaveBeenCalledTimes(3);
    expect(operatorSecret).toHaveBeenCalledWith('control', NEW_CONTROL);
    expect(p.store.writeRotation).not.toHaveBeenCalled();
    expect(p.credWatch.use).not.toHaveBeenCalled();
    // storing while the Secret is read, then awaiting the operator's write
    expect(rotations.storing.mock.invocationCallOrder[0]).toBeLessThan(rotations.awaitingSecret.mock.invocationCallOrder[0]!);
    expect(rotations.awaitingSecret).toHaveBeenCalledWith('control', { secrets: theirs.secrets, key: 'control', until: until.toISOString() }, expect.stringMatching(/^[0-9a-f]{64}$/));
    expect(sent).toEqual([]);
    expect(p.metrics.credentialValidUntil.set).toHaveBeenLastCalledWith({ purpose: 'control' }, until.getTime() / 1000);
    const warnings = logLines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toBe(
      'rotation pending: the control plane rotated the control credential, and rlmesh-system/rlmesh-secrets is delivered out of band (GitOps, a secret manager), so the agent does not write it. ' +
        'Write the new value (the cluster\'s Settings, or the rotate call\'s answer) into key "control" before 2026-12-05T10:00:00.000Z, when the value in it now stops working; the agent follows the control Secret without a restart',
    );
    expect(JSON.stringify(logLines)).not.toContain(NEW_CONTROL);

    // the operator's GitOps wrote it: the next resend finds it there and confirms
    operatorSecret.mockResolvedValue({ ...theirs, holds: true });
    handle(control);
    await flush();
    expect(p.store.writeRotation).not.toHaveBeenCalled();
    expect(sent).toEqual([{ case: 'credentialRotated', value: expect.objectContaining({ purpose: 'control' }) }]);
    expect(rotations.stored).toHaveBeenCalledWith('control');
    expect(p.metrics.credentialValidUntil.set).toHaveBeenLastCalledWith({ purpose: 'control' }, 0);
    expect(JSON.stringify(logLines)).not.toContain(NEW_CONTROL);
  });

  it('writes and confirms a rotated pull credential: the dockerconfigjson for the registry the cluster pulls from', async () => {
    const { p, sent, handle } = parts();
    const value = dockerConfigJson(REGISTRY, 'c1', NEW_PULL);
    handle(rotation('pull', value));
    await flush();
    expect(p.store.writeRotation).toHaveBeenCalledWith('pull', value);
    expect(sent).toEqual([{ case: 'credentialRotated', value: expect.objectContaining({ purpose: 'pull' }) }]);
  });

  const invalid: [string, string, string, RegExp][] = [
    ['an unknown purpose', 'webhook', NEW_CONTROL, /refused a credential rotation for purpose "webhook" from the control plane: the purpose is not one this agent stores \(control, pull, relay\).*upgrade the chart/],
    ['a pull value that is no dockerconfigjson', 'pull', NEW_PULL, /refused the rotated pull credential from the control plane: the value is not JSON/],
    ['a pull value for another registry', 'pull', dockerConfigJson('evil.example', 'c1', NEW_PULL), /must name exactly one registry, registry\.rlmesh\.dev/],
    ['a control value of another form', 'control', 'not a credential', /refused the rotated control credential from the control plane: the value is not a control credential/],
  ];
  for (const [name, purpose, value, why] of invalid) {
    it(`refuses ${name} once: nothing written or retried, not confirmed, one error line that says why and what to do, without the value`, async () => {
      const { p, sent, logLines, handle } = parts();
      const until = new Date('2026-12-05T10:00:00Z');
      handle(rotation(purpose, value, until));
      // the control plane re-sends an unconfirmed rotation every minute
      handle(rotation(purpose, value, until));
      handle(rotation(purpose, value, until));
      await flush();
      expect(p.store.writeRotation).not.toHaveBeenCalled();
      expect(p.retrying).not.toHaveBeenCalled();
      expect(p.credWatch.use).not.toHaveBeenCalled();
      expect(sent).toEqual([]);
      // the value in use still ends with its overlap: the near-expiry alert's gauge says when (a purpose it does not know is no label)
      if (purpose === 'webhook') expect(p.metrics.credentialValidUntil.set).not.toHaveBeenCalled();
      else expect(p.metrics.credentialValidUntil.set).toHaveBeenCalledExactlyOnceWith({ purpose }, until.getTime() / 1000);
      const errors = logLines.filter((l) => l.level === 50);
      expect(errors).toHaveLength(1);
      expect(errors[0]!.msg).toMatch(why);
      expect(errors[0]!.msg).toMatch(/Nothing was written and it is not confirmed; the credential in use stays valid until 2026-12-05T10:00:00\.000Z\. To fix: /);
      expect(JSON.stringify(logLines)).not.toContain(value);
      if (purpose === 'pull') expect(JSON.stringify(logLines)).not.toContain(NEW_PULL);

      // a valid rotation afterwards goes through
      handle(purpose === 'control' ? rotation('control', NEW_CONTROL) : rotation('pull', dockerConfigJson(REGISTRY, 'c1', NEW_PULL)));
      await flush();
      expect(p.store.writeRotation).toHaveBeenCalledTimes(1);
      expect(sent).toHaveLength(1);
    });
  }
});
