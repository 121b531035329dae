import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { agentStatusConfigMap, parseAgentStatus } from '../lib/agent-status.ts';
import { agentStatus, RotationLog, startStatusPublisher, type StatusSources } from './status-publisher.ts';

const NOW = Date.parse('2026-05-01T12:00:00Z');

function sources(o: { state?: string; tokenHash?: string; rotations?: RotationLog; versionSkew?: StatusSources['session']['versionSkew'] } = {}): StatusSources {
  return {
    agentVersion: '0.1.0',
    session: { currentState: o.state ?? 'connected', connectedAt: NOW - 60_000, disconnectedAt: NOW - 120_000, lastHeardAt: NOW - 2_000, versionSkew: o.versionSkew },
    credentials: { credentials: { clusterId: 'c-1', tokenHash: o.tokenHash }, ageSeconds: 3600 },
    rotations: o.rotations ?? new RotationLog(() => NOW),
    spool: { records: 3, bytes: 900 },
    spoolMaxBytes: 9000,
    draining: () => false,
  };
}

describe('agent status', () => {
  it('a connected agent: since when, last heard, no disconnection; the credential source from the token hash', () => {
    const s = agentStatus(sources({ tokenHash: 'ab' }), NOW);
    expect(s.session).toEqual({ state: 'connected', clusterId: 'c-1', connectedSince: '2026-05-01T11:59:00.000Z', lastHeardAt: '2026-05-01T11:59:58.000Z' });
    expect(s.credentials.source).toBe('join');
    expect(s.credentials.inUseSince).toBe('2026-05-01T11:00:00.000Z');
    expect(s.spool).toEqual({ records: 3, bytes: 900, maxBytes: 9000 });
  });

  it('a disconnected agent says since when; out-of-band Secrets are source "secret"', () => {
    const s = agentStatus(sources({ state: 'backoff' }), NOW);
    expect(s.session.connectedSince).toBeUndefined();
    expect(s.session.disconnectedSince).toBe('2026-05-01T11:58:00.000Z');
    expect(s.credentials.source).toBe('secret');
  });

  it('carries what the control plane said of the agent\'s version, once it said it', () => {
    const line = 'agent 0.1.0 is older than this control plane accepts';
    expect(agentStatus(sources({ state: 'unsupported', versionSkew: { controlPlaneVersion: '0.4.0', verdict: 'unsupported', line } }), NOW).session.versionSkew)
      .toEqual({ controlPlaneVersion: '0.4.0', verdict: 'unsupported', line });
    expect(agentStatus(sources(), NOW).session).not.toHaveProperty('versionSkew');
  });

  it('rotations: storing until stored, a refusal kept with its problem and first time', () => {
    let t = NOW;
    const log = new RotationLog(() => t);
    log.storing('control');
    log.refused('pull', 'the value is not JSON');
    t += 60_000;
    log.refused('pull', 'the value is not JSON');
    expect(log.list).toEqual([
      { purpose: 'control', state: 'storing', since: '2026-05-01T12:00:00.000Z' },
      { purpose: 'pull', state: 'refused', since: '2026-05-01T12:00:00.000Z', problem: 'the value is not JSON' },
    ]);
    log.stored('control');
    expect(log.list.map((r) => r.purpose)).toEqual(['pull']);
  });

  it('rotations awaiting a Secret the operator delivers: where, key and deadline (no value), kept from the first time, gone once the Secret holds that value', () => {
    let t = NOW;
    const log = new RotationLog(() => t);
    const where = { secrets: ['rlmesh-system/rlmesh-secrets'], key: 'control', until: '2026-05-02T12:00:00.000Z' };
    log.storing('control');
    log.awaitingSecret('control', where, 'hash-new');
    t += 60_000;
    log.awaitingSecret('control', where, 'hash-new'); // the resend a minute later
    expect(log.list).toEqual([{ purpose: 'control', state: 'awaiting-secret', since: '2026-05-01T12:00:00.000Z', ...where }]);
    log.secretHolds('control', 'hash-old'); // a sync wrote the old value back: still awaited
    expect(log.list).toHaveLength(1);
    log.secretHolds('control', 'hash-new');
    expect(log.list).toEqual([]);
  });

  it('round-trips through the ConfigMap; a broken one names what is wrong', () => {
    const s = agentStatus(sources(), NOW);
    const cm = agentStatusConfigMap(s, 'rlmesh-system');
    expect(cm.metadata?.name).toBe('rlmesh-agent-status');
    expect(parseAgentStatus(cm)).toEqual({ ok: true, status: s });
    expect(parseAgentStatus({ data: { 'status.json': '{' } })).toEqual({ ok: false, problem: 'ConfigMap rlmesh-agent-status key status.json is not JSON' });
    expect(parseAgentStatus(undefined).ok).toBe(false);
  });

  it('who drains and since when, and what has not finished: a count and the first names, sorted; round-trips', () => {
    const names = Array.from({ length: 25 }, (_, i) => `ev-${String(i).padStart(2, '0')}`).reverse();
    const s = agentStatus({ ...sources(), draining: () => true, drains: () => ({ platform: { since: '2026-05-01T10:00:00.000Z' }, operator: { since: '2026-05-01T11:00:00.000Z', by: 'alice' } }), unfinished: () => names }, NOW);
    expect(s.drain).toEqual({ platform: { since: '2026-05-01T10:00:00.000Z' }, operator: { since: '2026-05-01T11:00:00.000Z', by: 'alice' } });
    expect(s.unfinished?.count).toBe(25);
    expect(s.unfinished?.names).toEqual(names.slice().sort().slice(0, 20));
    expect(parseAgentStatus(agentStatusConfigMap(s, 'rlmesh-system'))).toEqual({ ok: true, status: s });
  });

  it("the ConfigMap carries the chart's commonLabels beneath its own labels", async () => {
    const written: k8s.V1ConfigMap[] = [];
    const core = { replaceNamespacedConfigMap: async ({ body }: { body: k8s.V1ConfigMap }) => void written.push(body) };
    const kc = { makeApiClient: () => core } as unknown as k8s.KubeConfig;
    const publisher = startStatusPublisher({ kc, namespace: 'rlmesh-system', commonLabels: { team: 'ml', 'app.kubernetes.io/name': 'spoofed' }, log: pino({ level: 'silent' }), sources: sources() });
    await vi.waitFor(() => expect(written).toHaveLength(1));
    publisher.stop();
    expect(written[0]!.metadata!.labels).toEqual({ ...agentStatusConfigMap(agentStatus(sources()), 'rlmesh-system').metadata!.labels, team: 'ml' });
    expect(written[0]!.metadata!.labels!['app.kubernetes.io/name']).toBe('rlmesh-agent-status');
  });
});
