// The agent connected: its cluster id, since when, when the control plane last
// spoke, from what the agent publishes (ConfigMap rlmesh-agent-status). A drain
// (the platform's, or the operator's rlmesh drain) warns, saying who drains,
// since when, and which evaluations still run.
import { STALE_AFTER_SECONDS, type AgentStatus } from '../../agent-status.ts';
import { UNDO_DRAIN } from '../../operator-drain.ts';
import { agentStatus, runtimeFacts, type PublishedAgentStatus } from '../reads.ts';
import { ago, type CheckResult, type StatusContext } from '../types.ts';

export type AgentFacts = { namespace: string; published: PublishedAgentStatus; apiHost: string; now: number };

export function agentVerdict(f: AgentFacts): CheckResult {
  const id = 'agent';
  const logs = `kubectl -n ${f.namespace} logs deployment/rlmesh-cluster-agent`;
  if (f.published.kind === 'missing')
    return { id, verdict: 'fail', found: `the agent has not published its state (no ConfigMap rlmesh-agent-status in ${f.namespace})`, fix: `Check that the agent runs (kubectl -n ${f.namespace} get pods -l app.kubernetes.io/name=rlmesh-cluster-agent) and read its log: ${logs}.` };
  if (f.published.kind === 'unreadable') return { id, verdict: 'fail', found: f.published.problem, fix: 'The agent and this CLI disagree on the status format: use the CLI of the chart\'s version.' };
  const s = f.published.status;
  const updated = Date.parse(s.updatedAt);
  const cp = f.apiHost ? `the control plane (${f.apiHost})` : 'the control plane';
  if (f.now - updated > STALE_AFTER_SECONDS * 1000)
    return {
      id,
      verdict: 'fail',
      found: `cluster ${s.session.clusterId}: the agent last reported ${ago(f.now - updated)} ago (pod ${s.pod}), so it is not running or cannot reach the Kubernetes API`,
      fix: `Check the agent's pod (kubectl -n ${f.namespace} get pods -l app.kubernetes.io/name=rlmesh-cluster-agent) and its log: ${logs}.`,
    };
  const heard = s.session.lastHeardAt ? `last heard from ${cp} ${ago(f.now - Date.parse(s.session.lastHeardAt))} ago` : `never heard from ${cp}`;
  const skew = s.session.versionSkew;
  if (s.session.state === 'unsupported' && skew?.verdict === 'unsupported')
    return {
      id, verdict: 'fail',
      found: `cluster ${s.session.clusterId}: ${cp} refuses agent ${s.agentVersion}${skew.controlPlaneVersion ? ` (control plane ${skew.controlPlaneVersion})` : ''}: ${skew.line}`,
      fix: `Upgrade the chart to a release the control plane accepts (charts/rlmesh-runtime/README.md, "Upgrades and version skew"); the agent keeps retrying rarely and takes no evaluations until then.`,
    };
  if (s.session.state !== 'connected') {
    const since = s.session.disconnectedSince ? ` since ${s.session.disconnectedSince} (${ago(f.now - Date.parse(s.session.disconnectedSince))})` : '';
    const fix =
      s.session.state === 'unauthenticated'
        ? `The control plane refuses the control credential: read why in ${logs}, then write a valid credential into the control Secret or run a New install command from the dashboard.`
        : `The agent cannot hold a session to ${cp}: check that the control plane is up and that the cluster reaches it on 443 (egress firewall, controlPlane.proxy); the agent reconnects on its own. Details: ${logs}.`;
    const drained = drainFound(s, f.now);
    return { id, verdict: 'fail', found: `cluster ${s.session.clusterId} not connected${since}: session ${s.session.state}, ${heard}${drained ? `; ${drained.found}` : ''}`, fix };
  }
  const since = s.session.connectedSince ? ` since ${s.session.connectedSince} (${ago(f.now - Date.parse(s.session.connectedSince))})` : '';
  const found = `cluster ${s.session.clusterId} connected${since}, ${heard}`;
  if (skew?.verdict === 'oldest') return { id, verdict: 'warn', found: `${found}; ${skew.line}`, fix: 'Upgrade the chart soon: the next control plane release will refuse this agent version (the version-skew policy).' };
  const drained = drainFound(s, f.now);
  if (drained) return { id, verdict: 'warn', found: `${found}; ${drained.found}`, fix: drained.fix };
  return { id, verdict: 'pass', found, fix: 'Nothing to do.' };
}

export async function checkAgent(ctx: StatusContext): Promise<CheckResult> {
  const [published, facts] = await Promise.all([agentStatus(ctx), runtimeFacts(ctx)]);
  return agentVerdict({ namespace: ctx.namespace, published, apiHost: facts?.apiHost ?? '', now: ctx.now() });
}

/** Who drains the cluster and since when, and what still runs; undefined when nobody drains it. */
export function drainFound(s: AgentStatus, now: number): { found: string; fix: string } | undefined {
  const operator = s.drain?.operator;
  // an agent from before drain reports sets only draining (the platform's)
  const platform = s.drain ? s.drain.platform : s.draining ? {} : undefined;
  if (!operator && !platform) return undefined;
  const when = (t: string | undefined) => (t ? ` since ${t} (${ago(now - Date.parse(t))})` : '');
  const who = [
    ...(operator ? [`drained by the cluster's operator (rlmesh drain)${when(operator.since)}${operator.by ? `, by ${operator.by}` : ''}`] : []),
    ...(platform ? [`the platform drains this cluster${when(platform.since)}`] : []),
  ].join(', and ');
  const u = s.unfinished;
  const runs = !u
    ? ''
    : u.count === 0
      ? '; no evaluation runs (helm uninstall loses nothing)'
      : `; ${u.count} evaluation${u.count === 1 ? '' : 's'} still run${u.count === 1 ? 's' : ''}: ${u.names.join(', ')}${u.count > u.names.length ? `, and ${u.count - u.names.length} more` : ''}`;
  const fixes = [
    ...(operator ? [`New assignments are refused (the platform is told of each) while running evaluations finish; run ${UNDO_DRAIN} to take new ones.`] : []),
    ...(platform ? ['No new evaluations arrive while the platform drains the cluster; end the drain from the dashboard to take new ones.'] : []),
  ];
  return { found: `${who}${runs}`, fix: fixes.join(' ') };
}
