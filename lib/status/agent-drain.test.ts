// rlmesh status on a drained cluster: the agent check says who drains (the
// platform, the operator with rlmesh drain), since when, and what still runs.
import { describe, expect, it } from 'vitest';
import type { AgentStatus } from '../agent-status.ts';
import { agentVerdict } from './checks/agent.ts';

const NOW = Date.parse('2026-05-01T12:00:00Z');
const at = (msAgo: number): string => new Date(NOW - msAgo).toISOString();

function agent(o: Partial<Pick<AgentStatus, 'draining' | 'drain' | 'unfinished'>> & { state?: string } = {}): AgentStatus {
  const connected = (o.state ?? 'connected') === 'connected';
  return {
    agentVersion: '0.1.0',
    pod: 'rlmesh-cluster-agent-1',
    updatedAt: at(5_000),
    session: { state: o.state ?? 'connected', clusterId: 'c-1', lastHeardAt: at(3_000), ...(connected ? { connectedSince: at(600_000) } : { disconnectedSince: at(90_000) }) },
    credentials: { source: 'join', inUseSince: at(7200_000), rotations: [] },
    spool: { records: 0, bytes: 0, maxBytes: 10_000 },
    draining: o.draining ?? false,
    ...(o.drain ? { drain: o.drain } : {}),
    ...(o.unfinished ? { unfinished: o.unfinished } : {}),
  };
}
const v = (s: AgentStatus) => agentVerdict({ namespace: 'rlmesh-system', published: { kind: 'ok', status: s }, apiHost: 'api.rlmesh.dev', now: NOW });

describe('rlmesh status: the drain', () => {
  it("the operator's drain: who, since when, the running evaluations by name, and rlmesh drain --undo", () => {
    const r = v(agent({ drain: { operator: { since: at(300_000), by: 'alice@example.com' } }, unfinished: { count: 2, names: ['ev-a', 'ev-b'] } }));
    expect(r.verdict).toBe('warn');
    expect(r.found).toMatch(/connected since .*; drained by the cluster's operator \(rlmesh drain\) since 2026-05-01T11:55:00\.000Z \(5m\), by alice@example\.com; 2 evaluations still run: ev-a, ev-b$/);
    expect(r.fix).toBe('New assignments are refused (the platform is told of each) while running evaluations finish; run rlmesh drain --undo to take new ones.');
  });

  it("the platform's drain, with its time; nothing left running says uninstall is safe", () => {
    const r = v(agent({ draining: true, drain: { platform: { since: at(60_000) } }, unfinished: { count: 0, names: [] } }));
    expect(r.found).toMatch(/; the platform drains this cluster since 2026-05-01T11:59:00\.000Z \(60s\); no evaluation runs \(helm uninstall loses nothing\)$/);
    expect(r.fix).toMatch(/end the drain from the dashboard/);
  });

  it('both at once name both; more running than named says how many more', () => {
    const r = v(agent({ draining: true, drain: { platform: {}, operator: { since: at(0) } }, unfinished: { count: 22, names: Array.from({ length: 20 }, (_, i) => `ev-${i}`) } }));
    expect(r.found).toMatch(/drained by the cluster's operator \(rlmesh drain\) since .*, and the platform drains this cluster; 22 evaluations still run: ev-0, .*ev-19, and 2 more$/);
    expect(r.fix).toMatch(/rlmesh drain --undo.*dashboard/);
  });

  it('an agent from before drain reports (only draining) still warns; nobody draining passes; a disconnected agent still shows the drain', () => {
    expect(v(agent({ draining: true }))).toMatchObject({ verdict: 'warn', found: expect.stringMatching(/; the platform drains this cluster$/) });
    expect(v(agent({ drain: {}, unfinished: { count: 1, names: ['ev-a'] } })).verdict).toBe('pass');
    expect(v(agent({ state: 'backoff', drain: { operator: { since: at(0) } } }))).toMatchObject({ verdict: 'fail', found: expect.stringContaining("drained by the cluster's operator") });
  });
});
