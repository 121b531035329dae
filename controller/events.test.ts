import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { RLMeshEvaluation } from '../lib/crds/types.ts';
import { EventRecorder, type EventsApi } from './events.ts';

type Call = { verb: 'create' | 'patch'; name: string; count: number; lastTimestamp: Date };

/** The Events API as far as the recorder uses it: what it holds, each call, and how many were in flight at most. */
function fakeApi(opts: { delayMs?: number; failPatchWith?: number } = {}) {
  const stored = new Map<string, CoreV1Event>();
  const calls: Call[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const call = async <T>(fn: () => T): Promise<T> => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((r) => setTimeout(r, opts.delayMs ?? 1));
    inFlight--;
    return fn();
  };
  const api = {
    createNamespacedEvent: ({ body }: { namespace: string; body: CoreV1Event }) =>
      call(() => {
        const name = body.metadata!.name!;
        calls.push({ verb: 'create', name, count: body.count!, lastTimestamp: body.lastTimestamp! });
        stored.set(name, structuredClone(body));
        return body;
      }),
    patchNamespacedEvent: ({ name, body }: { name: string; namespace: string; body: { count: number; lastTimestamp: Date } }) =>
      call(() => {
        const held = stored.get(name);
        if (!held || opts.failPatchWith) throw Object.assign(new Error(`events "${name}" not found`), { code: opts.failPatchWith ?? 404 });
        calls.push({ verb: 'patch', name, count: body.count, lastTimestamp: body.lastTimestamp });
        Object.assign(held, body);
        return held;
      }),
  } as unknown as EventsApi;
  return { api, stored, calls, maxInFlight: () => maxInFlight, expire: () => stored.clear() };
}

const ev = (name: string, uid = `uid-${name}`): RLMeshEvaluation => ({ apiVersion: 'rlmesh.dev/v1alpha1', kind: 'RLMeshEvaluation', metadata: { name, namespace: 'runs', uid } }) as RLMeshEvaluation;
const silent = pino({ level: 'silent' });

describe('EventRecorder', () => {
  it('turns identical repeats into one Event whose count and lastTimestamp rise, never a new one', async () => {
    const f = fakeApi();
    let now = 1_000_000;
    const r = new EventRecorder(f.api, 'test', 'test-0', silent, { now: () => now });
    const e = ev('a');
    await r.record(e, 'Warning', 'ErrImagePull', 'cannot pull x');
    now += 5000;
    await r.record(e, 'Warning', 'ErrImagePull', 'cannot pull x');
    now += 5000;
    await r.record(e, 'Warning', 'ErrImagePull', 'cannot pull x');
    expect(f.calls.map((c) => [c.verb, c.count])).toEqual([['create', 1], ['patch', 2], ['patch', 3]]);
    expect(f.stored.size).toBe(1);
    const [held] = [...f.stored.values()];
    expect(held).toMatchObject({ count: 3, reason: 'ErrImagePull', type: 'Warning', message: 'cannot pull x', involvedObject: { name: 'a', uid: 'uid-a', kind: 'RLMeshEvaluation' } });
    expect(new Date(held!.firstTimestamp!).getTime()).toBe(1_000_000);
    expect(new Date(held!.lastTimestamp!).getTime()).toBe(1_010_000);
  });

  it("gives each Event the chart's commonLabels, and none without them", async () => {
    const f = fakeApi();
    await new EventRecorder(f.api, 'test', 'test-0', silent, { commonLabels: { team: 'ml' } }).record(ev('a'), 'Normal', 'PodCreated', 'created pod rle-a');
    await new EventRecorder(f.api, 'test', 'test-0', silent).record(ev('b'), 'Normal', 'PodCreated', 'created pod rle-b');
    expect([...f.stored.values()].map((e) => [e.involvedObject.name, e.metadata.labels])).toEqual([['a', { team: 'ml' }], ['b', undefined]]);
  });

  it('writes a new Event for another message, reason, type or object, and for a repeat after the window', async () => {
    const f = fakeApi();
    let now = 1_000_000;
    const r = new EventRecorder(f.api, 'test', 'test-0', silent, { now: () => now });
    await r.record(ev('a'), 'Warning', 'Unschedulable', '0/3 nodes are available: 3 Insufficient cpu.');
    await r.record(ev('a'), 'Warning', 'Unschedulable', '0/3 nodes are available: 3 Insufficient memory.');
    await r.record(ev('a'), 'Warning', 'QuotaExceeded', '0/3 nodes are available: 3 Insufficient cpu.');
    await r.record(ev('a'), 'Normal', 'Unschedulable', '0/3 nodes are available: 3 Insufficient cpu.');
    await r.record(ev('b'), 'Warning', 'Unschedulable', '0/3 nodes are available: 3 Insufficient cpu.');
    // the same name, another object (recreated)
    await r.record(ev('a', 'uid-a2'), 'Warning', 'Unschedulable', '0/3 nodes are available: 3 Insufficient cpu.');
    now += EventRecorder.REPEAT_WINDOW_MS;
    await r.record(ev('a'), 'Warning', 'Unschedulable', '0/3 nodes are available: 3 Insufficient cpu.');
    expect(f.calls.map((c) => c.verb)).toEqual(Array(7).fill('create'));
    expect(new Set(f.calls.map((c) => c.name)).size).toBe(7);
  });

  it('folds repeats that arrive while the first is still being written into one patch after it, so the count never goes backwards', async () => {
    const f = fakeApi({ delayMs: 5 });
    const r = new EventRecorder(f.api, 'test', 'test-0', silent);
    const e = ev('a');
    const all = Array.from({ length: 10 }, () => r.record(e, 'Normal', 'Started', 'running on node n'));
    await Promise.all(all);
    expect(f.calls.map((c) => [c.verb, c.count])).toEqual([['create', 1], ['patch', 10]]);
    expect([...f.stored.values()][0]!.count).toBe(10);
  });

  it('writes the Event anew, count and all, when the one it would raise has expired', async () => {
    const f = fakeApi();
    const r = new EventRecorder(f.api, 'test', 'test-0', silent);
    const e = ev('a');
    await r.record(e, 'Warning', 'ImagePullBackOff', 'back-off');
    await r.record(e, 'Warning', 'ImagePullBackOff', 'back-off');
    f.expire();
    await r.record(e, 'Warning', 'ImagePullBackOff', 'back-off');
    expect(f.calls.map((c) => [c.verb, c.count])).toEqual([['create', 1], ['patch', 2], ['create', 3]]);
    expect([...f.stored.values()].map((x) => x.count)).toEqual([3]);
  });

  it('keeps at most MAX_IN_FLIGHT writes in flight, and every record resolves', async () => {
    const f = fakeApi({ delayMs: 2 });
    const r = new EventRecorder(f.api, 'test', 'test-0', silent);
    await Promise.all(Array.from({ length: 100 }, (_, i) => r.record(ev(`e${i}`), 'Normal', 'PodCreated', `created pod rle-e${i}`)));
    expect(f.stored.size).toBe(100);
    expect(f.maxInFlight()).toBe(EventRecorder.MAX_IN_FLIGHT);
  });

  it('logs and goes on when the API refuses a patch, and the next repeat carries the count', async () => {
    const f = fakeApi({ failPatchWith: 500 });
    const r = new EventRecorder(f.api, 'test', 'test-0', silent);
    const e = ev('a');
    await r.record(e, 'Normal', 'Started', 'x');
    await r.record(e, 'Normal', 'Started', 'x');
    expect(f.calls.map((c) => [c.verb, c.count])).toEqual([['create', 1]]);
    expect([...f.stored.values()][0]!.count).toBe(1);
  });
});
