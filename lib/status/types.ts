// What every status check returns (the preflight's CheckResult: id, verdict,
// what it found, what to do) and what it is given: the operator's kube context
// and the namespaces of the release. Each check reads what it needs (reads.ts)
// and judges it with a pure function the unit tests call directly.
import type * as k8s from '@kubernetes/client-node';
import type { CheckResult } from '../preflight/types.ts';

export type { CheckResult, Verdict } from '../preflight/types.ts';

export type StatusContext = {
  kc: k8s.KubeConfig;
  /** release namespace (rlmesh-system) */
  namespace: string;
  /** the CLI's own version */
  cliVersion: string;
  now: () => number;
};

export type StatusCheck = (ctx: StatusContext) => Promise<CheckResult>;

/** "42s", "5m", "3h 10m", "2d 4h" */
export function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}
