// The proxy's Prometheus metrics. Labels are bounded: decision and rule come
// from fixed sets; the destination host is deliberately not a label.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LAST_REFUSAL_METRIC, minuteWindow, RECENT_MINUTES, RECENT_REFUSALS_METRIC } from '../lib/egress-recent-refusals.ts';

export type EgressMetrics = ReturnType<typeof createMetrics>;

export function createMetrics() {
  const registry = new Registry();
  let bufferedBytes = (): number => 0;
  collectDefaultMetrics({ register: registry, prefix: 'rlmesh_egress_' });
  const decisions = new Counter({
    name: 'rlmesh_egress_decisions_total',
    help: 'Egress decisions by outcome (allowed, refused, dns-failure, connect-failure, connect-timeout, limited) and rule',
    labelNames: ['outcome', 'rule'] as const,
    registers: [registry],
  });
  const recent = minuteWindow();
  const lastRefusal = new Gauge({ name: LAST_REFUSAL_METRIC, help: 'When the proxy last refused a destination (Unix seconds; 0 before the first refusal)', registers: [registry] });
  new Gauge({
    name: RECENT_REFUSALS_METRIC,
    help: `Refusals in the last ${RECENT_MINUTES} minutes, counted by the minute (for a reader of one scrape; Prometheus takes a rate of rlmesh_egress_decisions_total)`,
    registers: [registry],
    collect() {
      this.set(recent.count(Date.now()));
    },
  });
  return {
    registry,
    decisions,
    /** Counts one decision; a refusal also in the recent window and as the last one. */
    decide(outcome: string, rule: string, nowMs = Date.now()): void {
      decisions.inc({ outcome, rule });
      if (outcome !== 'refused') return;
      recent.add(nowMs);
      lastRefusal.set(nowMs / 1000);
    },
    activeTunnels: new Gauge({
      name: 'rlmesh_egress_active_tunnels',
      help: 'Client connections being served (CONNECT tunnels and forwarded requests)',
      registers: [registry],
    }),
    openConnections: new Gauge({
      name: 'rlmesh_egress_open_connections',
      help: 'Client connections accepted and open, counted from accept (idle, sending headers, or served)',
      registers: [registry],
    }),
    bufferedBytes: new Gauge({
      name: 'rlmesh_egress_buffered_bytes',
      help: 'Bytes the proxy holds in relay buffers for its clients, against its buffer budget (a quarter of its memory limit)',
      registers: [registry],
      collect() {
        this.set(bufferedBytes());
      },
    }),
    /** Where rlmesh_egress_buffered_bytes is read at each scrape (the proxy's buffer budget). */
    readBufferedBytesFrom(read: () => number): void {
      bufferedBytes = read;
    },
    bytes: new Counter({
      name: 'rlmesh_egress_bytes_total',
      help: 'Bytes relayed, by direction (upstream = client to destination)',
      labelNames: ['direction'] as const,
      registers: [registry],
    }),
    parentConnections: new Counter({
      name: 'rlmesh_egress_parent_connections_total',
      help: 'Connections opened through the parent (corporate) proxy, by what it was asked for: the checked address (checked-address), or the name (name: a name the cluster\'s DNS did not resolve, with controlPlane.proxy.passUnresolvedNames)',
      labelNames: ['target'] as const,
      registers: [registry],
    }),
    connectSeconds: new Histogram({
      name: 'rlmesh_egress_upstream_connect_seconds',
      help: 'Time to open the TCP connection to the checked destination address, or the tunnel (or connection) through the parent proxy',
      buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
      registers: [registry],
    }),
    dnsSeconds: new Histogram({
      name: 'rlmesh_egress_dns_seconds',
      help: 'Time to resolve A and AAAA for a destination name',
      buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers: [registry],
    }),
  };
}
