// rlmesh_agent_* metrics, one registry per process.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { createInformerMetrics } from '../lib/informer-metrics.ts';
import type { SessionState, VersionSkew } from './control-plane-session.ts';

const STATES: SessionState[] = ['connecting', 'connected', 'backoff', 'unauthenticated', 'unsupported', 'stopped'];

export function createMetrics(sources: { spoolBytes: () => number; spoolRecords: () => number; spoolMaxBytes: number; credentialAgeSeconds: () => number }) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'rlmesh_agent_' });
  const versionSkew = new Gauge({
    name: 'rlmesh_agent_version_skew',
    help: "What the control plane said of this agent's version (lib/version-skew.ts): 1 for the latest verdict (supported, oldest: the oldest supported line, unsupported: refused), with both versions",
    labelNames: ['agent_version', 'control_plane_version', 'verdict'],
    registers: [registry],
  });
  const sessionState = new Gauge({ name: 'rlmesh_agent_session_state', help: 'Session state: 1 for the current state, 0 for the others', labelNames: ['state'], registers: [registry] });
  const m = {
    registry,
    sessionState,
    reconnects: new Counter({ name: 'rlmesh_agent_session_reconnects_total', help: 'Sessions re-established after the first one', registers: [registry] }),
    joins: new Counter({ name: 'rlmesh_agent_join_outcomes_total', help: 'Join attempts by outcome (joined, reused, resumed, token_used, token_expired, token_invalid, unreachable, error)', labelNames: ['outcome'], registers: [registry] }),
    reportsSent: new Counter({ name: 'rlmesh_agent_node_reports_sent_total', help: 'Node reports sent to the control plane', registers: [registry] }),
    reportLatency: new Histogram({
      name: 'rlmesh_agent_node_report_latency_seconds',
      help: 'From the first node or pod change to the report that carries it',
      buckets: [0.05, 0.1, 0.25, 0.5, 0.75, 1, 2, 5],
      registers: [registry],
    }),
    updatesSent: new Counter({ name: 'rlmesh_agent_evaluation_updates_sent_total', help: 'Evaluation updates sent (including redeliveries after a reconnect)', registers: [registry] }),
    updatesAcked: new Counter({ name: 'rlmesh_agent_evaluation_updates_acked_total', help: 'Evaluation updates the control plane acknowledged', registers: [registry] }),
    assignments: new Counter({ name: 'rlmesh_agent_assignments_total', help: 'Assignments received, by outcome', labelNames: ['outcome'], registers: [registry] }),
    credentialValidUntil: new Gauge({
      name: 'rlmesh_agent_credential_valid_until_seconds',
      help: 'While a rotated credential of this purpose is not yet stored (still being written, or refused), the Unix time at which the value in use stops being valid (the end of the rotation overlap); 0 when no rotation is pending',
      labelNames: ['purpose'],
      registers: [registry],
    }),
    draining: new Gauge({ name: 'rlmesh_agent_cluster_draining', help: '1 while the platform drains this cluster (no new assignments arrive), else 0', registers: [registry] }),
    informer: createInformerMetrics(registry, 'agent'),
    setVersionSkew(v: VersionSkew) {
      versionSkew.reset();
      versionSkew.set({ agent_version: v.agentVersion, control_plane_version: v.controlPlaneVersion, verdict: v.verdict }, 1);
    },
    setState(s: SessionState) {
      for (const st of STATES) sessionState.set({ state: st }, st === s ? 1 : 0);
    },
  };
  new Gauge({ name: 'rlmesh_agent_spool_bytes', help: 'Bytes in the spool journal', registers: [registry], collect() { this.set(sources.spoolBytes()); } });
  new Gauge({ name: 'rlmesh_agent_spool_records', help: 'Updates in the spool the control plane has not acknowledged', registers: [registry], collect() { this.set(sources.spoolRecords()); } });
  new Gauge({ name: 'rlmesh_agent_spool_max_bytes', help: 'Size at which the spool refuses new records', registers: [registry], collect() { this.set(sources.spoolMaxBytes); } });
  new Gauge({ name: 'rlmesh_agent_credential_age_seconds', help: 'Seconds since the control credential in use last changed', registers: [registry], collect() { this.set(sources.credentialAgeSeconds()); } });
  m.setState('connecting');
  return m;
}

export type Metrics = ReturnType<typeof createMetrics>;
