// The agent's preflight: the checks at start and every hour, published to
// ConfigMap rlmesh-preflight and handed to the session to send upstream.
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { PreflightReport } from '../gen/rlmesh/v1/session_pb.ts';
import type { RuntimeConfig } from '../runtime-config.ts';
import { summaryLine } from './format.ts';
import { preflightReportMessage, publishConfigMap } from './publish.ts';
import { runPreflight, type PreflightReportData } from './run.ts';
import { settingsFromRuntimeConfig } from './settings.ts';
import { errorFields } from '../error-fields.ts';

export const PREFLIGHT_INTERVAL_MS = 3600_000;

export type AgentPreflightOptions = {
  kc: k8s.KubeConfig;
  config: RuntimeConfig;
  log: Logger;
  /** hands the report to the session (spooled and sent as AgentMessage.preflight_report) */
  send: (report: PreflightReport) => void | Promise<void>;
  intervalMs?: number;
  /** the first run waits for this (at most 30 s): the agent's own initial lists go first, so the two never peak together */
  firstRunAfter?: Promise<unknown>;
};

export async function agentPreflightOnce(opts: AgentPreflightOptions): Promise<PreflightReportData> {
  const report = await runPreflight({ mode: 'agent', kc: opts.kc, settings: settingsFromRuntimeConfig(opts.config) });
  const summary = summaryLine(report);
  const failed = report.checks.filter((c) => c.verdict === 'fail');
  if (failed.length) opts.log.warn({ summary, failed: failed.map((c) => ({ id: c.id, found: c.found, fix: c.fix })) }, 'preflight found problems');
  else opts.log.info({ summary }, 'preflight');
  try {
    await publishConfigMap(opts.kc, report, opts.config.namespace);
  } catch (err) {
    opts.log.warn(errorFields(err), 'cannot write ConfigMap rlmesh-preflight; the report still goes to the control plane');
  }
  await opts.send(preflightReportMessage(report));
  return report;
}

const FIRST_RUN_MAX_WAIT_MS = 30_000;

/**
 * Runs once `firstRunAfter` settles (or after 30 s), then every interval (never two at once);
 * returns stop(), after which nothing more is sent.
 */
export function startAgentPreflight(opts: AgentPreflightOptions): () => void {
  let stopped = false;
  let running = false;
  const guarded: AgentPreflightOptions = { ...opts, send: (r) => (stopped ? undefined : opts.send(r)) };
  const tick = (): void => {
    if (stopped || running) return;
    running = true;
    agentPreflightOnce(guarded)
      .catch((err: unknown) => opts.log.error(errorFields(err), 'preflight run failed; next try in an hour'))
      .finally(() => (running = false));
  };
  let waited: NodeJS.Timeout | undefined;
  void Promise.race([opts.firstRunAfter, new Promise((r) => (waited = setTimeout(r, FIRST_RUN_MAX_WAIT_MS)))]).then(() => {
    clearTimeout(waited);
    tick();
  });
  const timer = setInterval(tick, opts.intervalMs ?? PREFLIGHT_INTERVAL_MS);
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(waited);
    clearInterval(timer);
  };
}
