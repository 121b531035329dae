import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ARTIFACT_SOURCES_SECRETS } from '../lib/fixed-names.ts';
import { ArtifactSources, ORPHAN_AFTER_MS, sourcesSecretFor, type SourcesEntry } from './artifact-sources.ts';

/** An API server's Secrets of one namespace, as merge patches and creates change them. */
function server() {
  const secrets = new Map<string, V1Secret>();
  const calls: string[] = [];
  const notFound = () => Object.assign(new Error('HTTP 404'), { code: 404 });
  const core = {
    readNamespacedSecret: async ({ name }: { name: string }) => {
      calls.push(`get ${name}`);
      const s = secrets.get(name);
      if (!s) throw notFound();
      return structuredClone(s);
    },
    createNamespacedSecret: async ({ body }: { body: V1Secret }) => {
      calls.push(`create ${body.metadata!.name}`);
      if (secrets.has(body.metadata!.name!)) throw Object.assign(new Error('HTTP 409'), { code: 409 });
      secrets.set(body.metadata!.name!, structuredClone(body));
    },
    patchNamespacedSecret: async ({ name, body }: { name: string; body: { data: Record<string, string | null> } }) => {
      calls.push(`patch ${name}`);
      const s = secrets.get(name);
      if (!s) throw notFound();
      for (const [k, v] of Object.entries(body.data)) {
        if (v === null) delete s.data![k];
        else s.data = { ...s.data, [k]: v };
      }
    },
  } as unknown as CoreV1Api;
  const entry = (name: string): SourcesEntry | undefined => {
    const v = secrets.get(sourcesSecretFor(name))?.data?.[name];
    return v === undefined ? undefined : (JSON.parse(Buffer.from(v, 'base64').toString('utf8')) as SourcesEntry);
  };
  return { core, secrets, calls, entry };
}

describe('the artifact-sources Secrets', () => {
  it('spreads entries over the fixed Secrets by a hash of the name, the same every time', () => {
    const names = Array.from({ length: 200 }, (_, i) => `ev-${i}-sources`);
    const used = new Set(names.map(sourcesSecretFor));
    expect([...used].every((n) => ARTIFACT_SOURCES_SECRETS.includes(n))).toBe(true);
    expect(used.size).toBe(ARTIFACT_SOURCES_SECRETS.length);
    expect(sourcesSecretFor('ev-1-sources')).toBe(sourcesSecretFor('ev-1-sources'));
  });

  it('writes an entry, creating its Secret (Opaque, labelled, owned by the agent\'s ClusterRole, which helm uninstall removes) the first time and patching it after', async () => {
    const s = server();
    const owner = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'rlmesh-cluster-agent', uid: 'u-1' };
    const sources = new ArtifactSources({ core: s.core, namespace: 'rlmesh-runs', commonLabels: { team: 'ml' }, log: pino({ level: 'silent' }), now: () => Date.parse('2026-01-01T00:00:00Z'), owner: async () => owner });
    await sources.put('ev-1-sources', { accessKeyId: 'AK', secretAccessKey: 'sk' });
    const name = sourcesSecretFor('ev-1-sources');
    expect(s.calls).toEqual([`patch ${name}`, `create ${name}`]);
    expect(s.secrets.get(name)).toMatchObject({ type: 'Opaque', metadata: { labels: { team: 'ml', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' }, ownerReferences: [owner] } });
    expect(s.entry('ev-1-sources')).toEqual({ writtenAt: '2026-01-01T00:00:00.000Z', data: { accessKeyId: 'AK', secretAccessKey: 'sk' } });
    await sources.put('ev-1-sources', { 'url.a': 'https://x/y' });
    expect(s.entry('ev-1-sources')?.data).toEqual({ 'url.a': 'https://x/y' });
    expect(s.calls.at(-1)).toBe(`patch ${name}`);
  });

  it('removes an entry once its evaluation has finished, and asks nothing for one it never wrote', async () => {
    const s = server();
    const sources = new ArtifactSources({ core: s.core, namespace: 'rlmesh-runs', log: pino({ level: 'silent' }) });
    await sources.put('ev-1-sources', { accessKeyId: 'AK', secretAccessKey: 'sk' });
    const before = s.calls.length;
    await sources.remove('ev-2-sources');
    expect(s.calls.length).toBe(before);
    await sources.remove('ev-1-sources');
    expect(s.entry('ev-1-sources')).toBeUndefined();
  });

  it('sweeps the entries of finished evaluations and, once old, of evaluations that do not exist', async () => {
    const s = server();
    let now = Date.parse('2026-01-01T00:00:00Z');
    const sources = new ArtifactSources({ core: s.core, namespace: 'rlmesh-runs', log: pino({ level: 'silent' }), now: () => now });
    for (const e of ['running', 'finished', 'orphan']) await sources.put(`${e}-sources`, { accessKeyId: 'AK', secretAccessKey: 'sk' });
    const phaseOf = (entry: string) => ({ 'running-sources': 'running', 'finished-sources': 'finished' } as const)[entry] ?? 'absent';
    // a fresh sweep (a restarted agent) knows them from the Secrets
    const restarted = new ArtifactSources({ core: s.core, namespace: 'rlmesh-runs', log: pino({ level: 'silent' }), now: () => now });
    await restarted.sweep(phaseOf);
    expect(s.entry('finished-sources')).toBeUndefined();
    // an entry with no evaluation may be one written just before its evaluation is created
    expect(s.entry('orphan-sources')).toBeDefined();
    expect(s.entry('running-sources')).toBeDefined();
    now += ORPHAN_AFTER_MS;
    await restarted.sweep(phaseOf);
    expect(s.entry('orphan-sources')).toBeUndefined();
    expect(s.entry('running-sources')).toBeDefined();
    // and one it learnt of by sweeping, it removes on the event
    await restarted.remove('running-sources');
    expect(s.entry('running-sources')).toBeUndefined();
  });
});
