// The agent's preflight: the checks at start and every hour, published to
// ConfigMap rlmesh-preflight and handed to the session to send upstream.
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { PreflightReport } from '../gen/rlmesh/v1/session_pb.ts';
import type { RuntimeConfig } from '../runtime-config.ts';
import { summaryLine } from './format.ts';
import { evaluationsBlocked, preflightReportMessage, publishConfigMap } from './publish.ts';
import { runPreflight, type PreflightReportData } from './run.ts';
import { settingsFromRuntimeConfig } from './settings.ts';
import { errorFields } from '../error-fields.ts';
import { readStoredProbe } from './checks/network-policy.ts';

export const PREFLIGHT_INTERVAL_MS = 3600_000;
/** While evaluations are blocked, the checks run this often, so the platform hears soon once they are not. */
export const BLOCKED_INTERVAL_MS = 60_000;
/** How often the agent reads the controller's probe verdict (one GET), to report a change without waiting for the next run. */
const PROBE_POLL_MS = 15_000;

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

export async function agentPreflightOnce(opts: AgentPreflightOptions): Promise<PreflightReportData & { blocked: string | undefined }> {
  const report = await runPreflight({ mode: 'agent', kc: opts.kc, settings: settingsFromRuntimeConfig(opts.config) });
  const summary = summaryLine(report);
  const failed = report.checks.filter((c) => c.verdict === 'fail');
  if (failed.length) opts.log.warn({ summary, failed: failed.map((c) => ({ id: c.id, found: c.found, fix: c.fix })) }, 'preflight found problems');
  else opts.log.info({ summary }, 'preflight');
  try {
    await publishConfigMap(opts.kc, report, opts.config.namespace, opts.config.pods?.commonLabels);
  } catch (err) {
    opts.log.warn(errorFields(err), 'cannot write ConfigMap rlmesh-preflight; the report still goes to the control plane');
  }
  const blocked = evaluationsBlocked(report, opts.config.evaluations?.runWithoutNetworkPolicyEnforcement ?? false);
  if (blocked) opts.log.warn({ fix: 'make NetworkPolicy enforced (see the network-policy check above)' }, `this cluster cannot run evaluations: ${blocked}`);
  await opts.send(preflightReportMessage(report, blocked));
  return { ...report, blocked };
}

const FIRST_RUN_MAX_WAIT_MS = 30_000;

/**
 * Runs once `firstRunAfter` settles (or after 30 s), then every interval, or every minute while
 * evaluations are blocked (never two at once); returns stop(), after which nothing more is sent.
 */
export function startAgentPreflight(opts: AgentPreflightOptions & { blockedIntervalMs?: number; probePollMs?: number }): () => void {
  let stopped = false;
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  const guarded: AgentPreflightOptions = { ...opts, send: (r) => (stopped ? undefined : opts.send(r)) };
  const interval = opts.intervalMs ?? PREFLIGHT_INTERVAL_MS;
  const blockedInterval = Math.min(opts.blockedIntervalMs ?? BLOCKED_INTERVAL_MS, interval);
  const next = (ms: number): void => {
    if (stopped) return;
    timer = setTimeout(tick, ms);
    timer.unref();
  };
  // the probe verdict the latest run saw: the poll below reruns when the stored one differs from it
  const probeEnabled = !!opts.config.preflight?.networkPolicyProbe.enabled;
  let lastVerdict: string | undefined;
  const readProbeVerdict = (): Promise<string> => readStoredProbe(opts.kc, opts.config.namespace).then((p) => p?.verdict ?? 'none');
  function tick(): void {
    if (stopped || running) return;
    running = true;
    clearTimeout(timer);
    // read before the run, so that a probe written during it differs at the next poll instead of going unseen for an hour
    (probeEnabled ? readProbeVerdict().then((v) => void (lastVerdict = v), () => undefined) : Promise.resolve())
      .then(() => agentPreflightOnce(guarded))
      .then((r) => next(r.blocked ? blockedInterval : interval))
      .catch((err: unknown) => {
        opts.log.error(errorFields(err), `preflight run failed; next try in ${Math.round(blockedInterval / 1000)} s`);
        next(blockedInterval);
      })
      .finally(() => (running = false));
  }
  // the controller's probe verdict decides whether evaluations can run: a change is reported at once, not within the hour
  const poll = probeEnabled
    ? setInterval(() => {
        if (running || lastVerdict === undefined) return;
        readProbeVerdict()
          .then((verdict) => {
            if (verdict !== lastVerdict) tick();
          })
          .catch(() => undefined);
      }, opts.probePollMs ?? PROBE_POLL_MS)
    : undefined;
  poll?.unref();
  void Promise.race([opts.firstRunAfter, new Promise((r) => (timer = setTimeout(r, FIRST_RUN_MAX_WAIT_MS)))]).then(() => {
    clearTimeout(timer);
    tick();
  });
  return () => {
    stopped = true;
    clearTimeout(timer);
    clearInterval(poll);
  };
}
