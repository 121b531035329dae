import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { CacheFiller, type FillerDeps } from './cache-filler.ts';

describe('the RLMeshCache object the filler creates when the chart did not', () => {
  const filler = (commonLabels?: Record<string, string>) => {
    const created: { metadata: { labels: Record<string, string> } }[] = [];
    const custom = {
      getClusterCustomObject: async () => {
        throw Object.assign(new Error('not found'), { code: 404 });
      },
      createClusterCustomObject: async ({ body }: { body: (typeof created)[number] }) => void created.push(body),
    } as unknown as CustomObjectsApi;
    const settings = { namespace: 'rlmesh-runs', cacheName: 'default', pvcName: 'rlmesh-artifact-cache', accessModes: ['ReadWriteOnce'], secretGraceMs: 1000, ...(commonLabels ? { commonLabels } : {}) };
    return { created, filler: new CacheFiller({ custom, log: pino({ level: 'silent' }), settings } as unknown as FillerDeps) };
  };

  it("carries the chart's commonLabels beneath its own label", async () => {
    const f = filler({ team: 'ml', 'app.kubernetes.io/part-of': 'spoofed' });
    await f.filler.ensureCacheObject();
    expect(f.created.map((c) => c.metadata.labels)).toEqual([{ team: 'ml', 'app.kubernetes.io/part-of': 'rlmesh-runtime' }]);
    const plain = filler();
    await plain.filler.ensureCacheObject();
    expect(plain.created.map((c) => c.metadata.labels)).toEqual([{ 'app.kubernetes.io/part-of': 'rlmesh-runtime' }]);
  });
});
