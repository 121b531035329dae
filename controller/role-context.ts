// What main hands each role once it leads: the clients, the runtime config and
// flags, metrics, the informers, a work queue that reports to the metrics, and
// a place to register what must stop on shutdown.
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { RuntimeConfig } from '../lib/runtime-config.ts';
import type { ControllerFlags } from './flags.ts';
import type { ControllerInformers } from './informers.ts';
import type { Metrics } from './metrics.ts';
import { WorkQueue } from './work-queue.ts';

export type RoleContext = {
  kc: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  custom: k8s.CustomObjectsApi;
  config: RuntimeConfig;
  flags: ControllerFlags;
  metrics: Metrics;
  log: Logger;
  identity: string;
  nodeName: string | undefined;
  informers: ControllerInformers;
  metricsPort: number;
  /** whether this process still holds its Lease */
  leading: () => boolean;
  onStop: (...stop: (() => Promise<void> | void)[]) => void;
};

/** A work queue at the flags' concurrency whose every reconcile is counted and timed. */
export function meteredQueue(c: Pick<RoleContext, 'flags' | 'log' | 'metrics'>, name: string, worker: (key: string) => Promise<void | { requeueAfterMs?: number }>): WorkQueue {
  return new WorkQueue({
    worker,
    concurrency: c.flags.concurrency,
    log: c.log,
    metrics: c.metrics.workQueue(name),
    onProcessed: (_key, ok, ms) => {
      c.metrics.reconciles.inc({ queue: name, outcome: ok ? 'ok' : 'error' });
      c.metrics.reconcileSeconds.observe({ queue: name }, ms / 1000);
    },
  });
}
