import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { CoreV1Api, V1Node } from '@kubernetes/client-node';
import { CacheNodeReader } from './cache-node-reader.ts';

function reader(answer: () => V1Node | Error) {
  let now = 0;
  const reads: string[] = [];
  const warnings: string[] = [];
  const core = {
    readNode: async ({ name }: { name: string }) => {
      reads.push(name);
      const a = answer();
      if (a instanceof Error) throw a;
      return a;
    },
  } as unknown as CoreV1Api;
  const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(String(JSON.parse(line).msg)) });
  const r = new CacheNodeReader({ core, log, ttlMs: 1000, now: () => now });
  return { r, reads, warnings, advance: (ms: number) => void (now += ms) };
}

describe('CacheNodeReader', () => {
  it('reads a node once per TTL, however many evaluations ask', async () => {
    const w = reader(() => ({ metadata: { name: 'real-0' } }));
    await Promise.all([w.r.get('real-0'), w.r.get('real-0'), w.r.get('real-0')]);
    expect(w.reads).toEqual(['real-0']);
    w.advance(1000);
    expect((await w.r.get('real-0'))?.metadata?.name).toBe('real-0');
    expect(w.reads).toEqual(['real-0', 'real-0']);
  });

  it('answers unknown for a node that is gone, and for one it may not read, saying once what to do', async () => {
    expect(await reader(() => Object.assign(new Error('not found'), { code: 404 })).r.get('gone')).toBeUndefined();
    const w = reader(() => Object.assign(new Error('nodes "real-0" is forbidden: User "system:serviceaccount:rlmesh-system:rlmesh-cluster-controller" cannot get resource "nodes"'), { code: 403 }));
    expect(await w.r.get('real-0')).toBeUndefined();
    w.advance(1000);
    expect(await w.r.get('real-0')).toBeUndefined();
    expect(w.warnings).toHaveLength(1);
    expect(w.warnings[0]).toMatch(/may not read node real-0: .*forbidden.*grants get on nodes: reinstall or upgrade the chart/);
  });

  it('reads again at once after any other failure', async () => {
    let fail = true;
    const w = reader(() => (fail ? Object.assign(new Error('connection reset'), { code: 503 }) : { metadata: { name: 'real-0' } }));
    expect(await w.r.get('real-0')).toBeUndefined();
    fail = false;
    expect((await w.r.get('real-0'))?.metadata?.name).toBe('real-0');
  });
});
