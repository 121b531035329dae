import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { acquireJoinLease, JOIN_LEASE } from './join-lease.ts';

describe('the join Lease', () => {
  it("carries the chart's commonLabels", async () => {
    const created: k8s.V1Lease[] = [];
    const coordination = {
      readNamespacedLease: async () => {
        throw Object.assign(new Error('not found'), { code: 404 });
      },
      createNamespacedLease: async ({ body }: { body: k8s.V1Lease }) => void created.push(body),
    };
    const kc = { makeApiClient: () => coordination } as unknown as k8s.KubeConfig;
    await acquireJoinLease({ kc, namespace: 'rlmesh-system', holder: 'agent-0', durationSeconds: 15, commonLabels: { team: 'ml' }, log: pino({ level: 'silent' }) });
    expect(created.map((l) => [l.metadata?.name, l.metadata?.labels])).toEqual([[JOIN_LEASE, { team: 'ml' }]]);
  });
});
