// What client-go's reflector exports, for our informers: complete lists
// (relists) and re-opened watches. Names carry the component
// (rlmesh_controller_informer_relists_total).
import { Counter, type Registry } from 'prom-client';

export type InformerMetrics = {
  relisted(): void;
  /** the watch was re-opened: after an error, a failed start, or a silent stream */
  restarted(reason: 'error' | 'start-failed' | 'watchdog'): void;
};

/** The metrics of the informer with this name. */
export type InformerMetricsFor = (informer: string) => InformerMetrics;

export function createInformerMetrics(registry: Registry, component: string): InformerMetricsFor {
  const p = `rlmesh_${component}_informer`;
  const relists = new Counter({ name: `${p}_relists_total`, help: 'Complete lists of the watched resource (the first one and every relist)', labelNames: ['informer'], registers: [registry] });
  const restarts = new Counter({ name: `${p}_watch_restarts_total`, help: 'Watches re-opened, by reason (error, start-failed, watchdog: silent for too long)', labelNames: ['informer', 'reason'], registers: [registry] });
  return (informer: string): InformerMetrics => ({
    relisted: () => relists.inc({ informer }),
    restarted: (reason) => restarts.inc({ informer, reason }),
  });
}
