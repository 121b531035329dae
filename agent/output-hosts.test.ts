import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import type * as k8s from '@kubernetes/client-node';
import { OutputHostsPublisher } from './output-hosts.ts';
import type { Retrying } from './retrying.ts';

/** A ConfigMap API holding one ConfigMap; `failures` replaces fail first (a conflict, the API away). */
function fakeCore(failures = 0) {
  const state = { data: undefined as Record<string, string> | undefined, version: 1, replaces: 0, failures };
  const core = {
    readNamespacedConfigMap: async () => ({ metadata: { name: 'rlmesh-output-hosts', resourceVersion: String(state.version) }, ...(state.data ? { data: state.data } : {}) }),
    replaceNamespacedConfigMap: async ({ body }: { body: k8s.V1ConfigMap }) => {
      state.replaces++;
      if (state.failures-- > 0) throw new Error('Conflict');
      if (body.metadata?.resourceVersion !== String(state.version)) throw new Error('Conflict');
      state.data = body.data;
      state.version++;
      return body;
    },
  };
  return { state, core: core as unknown as k8s.CoreV1Api };
}

const retrying: Retrying = async (_what, fn) => {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= 9) throw err;
    }
  }
};

function publisher(core: k8s.CoreV1Api) {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
  return { lines, p: new OutputHostsPublisher({ core, namespace: 'rlmesh-system', log, retrying }) };
}

describe('OutputHostsPublisher', () => {
  it('creates the ConfigMap when it is missing (deleted by hand)', async () => {
    const created: k8s.V1ConfigMap[] = [];
    const core = {
      readNamespacedConfigMap: async () => {
        throw Object.assign(new Error('configmaps "rlmesh-output-hosts" not found'), { code: 404 });
      },
      createNamespacedConfigMap: async ({ body }: { body: k8s.V1ConfigMap }) => (created.push(body), body),
    } as unknown as k8s.CoreV1Api;
    const { p } = publisher(core);
    p.publish(['outputs.rlmesh.dev'], 'GET /v1/info');
    await vi.waitFor(() => expect(created).toEqual([{ metadata: { name: 'rlmesh-output-hosts', namespace: 'rlmesh-system' }, data: { hosts: 'outputs.rlmesh.dev' } }]));
  });

  it('writes the checked list to ConfigMap rlmesh-output-hosts, and logs what it left out', async () => {
    const { state, core } = fakeCore();
    const { p, lines } = publisher(core);
    p.publish(['outputs.rlmesh.dev', '10.0.0.1', 'Checkpoints.RLMesh.dev'], 'GET /v1/info');
    await vi.waitFor(() => expect(state.data?.hosts).toBeDefined());
    expect(state.data).toEqual({ hosts: 'checkpoints.rlmesh.dev\noutputs.rlmesh.dev' });
    expect(lines[0]).toMatchObject({ level: 40, from: 'GET /v1/info', refused: [{ host: '10.0.0.1', why: expect.stringMatching(/IP address/) }] });
    expect(lines.at(-1)).toMatchObject({ outputHosts: ['checkpoints.rlmesh.dev', 'outputs.rlmesh.dev'], msg: expect.stringMatching(/egress proxy allows them/) });
  });

  it('the latest list wins; a list already written is not written again', async () => {
    const { state, core } = fakeCore(2);
    const { p } = publisher(core);
    p.publish(['a.rlmesh.dev'], 'GET /v1/info');
    p.publish(['b.rlmesh.dev'], 'the session');
    p.publish(['c.rlmesh.dev'], 'the session');
    await vi.waitFor(() => expect(state.data?.hosts).toBe('c.rlmesh.dev'));
    const replaces = state.replaces;
    p.publish(['c.rlmesh.dev'], 'the session');
    await new Promise((r) => setTimeout(r, 50));
    expect(state.replaces).toBe(replaces);
    expect(state.data).toEqual({ hosts: 'c.rlmesh.dev' });
  });
});
