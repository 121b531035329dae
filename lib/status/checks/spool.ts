// The spool's backlog: updates the control plane has not acknowledged yet,
// against the size at which the spool refuses new ones (agent-published).
import { agentStatus } from '../reads.ts';
import type { AgentStatus } from '../../agent-status.ts';
import type { CheckResult, StatusContext } from '../types.ts';

export const SPOOL_WARN = 0.5;
export const SPOOL_FAIL = 0.8;

const mib = (b: number): string => (b >= 1024 * 1024 ? `${(b / 1024 / 1024).toFixed(1)} MiB` : `${(b / 1024).toFixed(1)} KiB`);

export function spoolVerdict(namespace: string, s: AgentStatus | undefined): CheckResult {
  const id = 'spool';
  if (!s) return { id, verdict: 'fail', found: 'unknown: the agent has not published its state', fix: 'See the agent check above.' };
  const { records, bytes, maxBytes } = s.spool;
  const share = maxBytes > 0 ? bytes / maxBytes : 0;
  const found = `${records} update(s) not yet acknowledged, ${mib(bytes)} of ${mib(maxBytes)} (${Math.round(share * 100)}%)`;
  const why = s.session.state === 'connected' ? 'the control plane acknowledges slower than the cluster reports' : 'the agent has no session to the control plane (see the agent check)';
  if (share >= SPOOL_FAIL)
    return {
      id,
      verdict: 'fail',
      found: `${found}: ${share >= 1 ? 'full, new updates wait' : 'nearly full'}; ${why}`,
      fix: `Restore the session to the control plane so the spool drains (kubectl -n ${namespace} logs deployment/rlmesh-cluster-agent), or give it room: helm upgrade --reuse-values --set agent.spool.size=<larger> on a StorageClass that can expand.`,
    };
  if (share >= SPOOL_WARN) return { id, verdict: 'warn', found: `${found}; ${why}`, fix: 'Watch it: past 80% status fails, when full new updates wait until the control plane acknowledges the old.' };
  return { id, verdict: 'pass', found, fix: 'Nothing to do.' };
}

export async function checkSpool(ctx: StatusContext): Promise<CheckResult> {
  const a = await agentStatus(ctx);
  return spoolVerdict(ctx.namespace, a.kind === 'ok' ? a.status : undefined);
}
