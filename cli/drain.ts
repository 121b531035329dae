// rlmesh drain: the operator drains the cluster on its own side, without the
// platform. It writes ConfigMap rlmesh-operator-drain (lib/operator-drain.ts),
// which the agent watches: while it exists the agent refuses every new
// assignment (reported to the platform as OperatorDrain) and lets what runs
// finish. `--undo` deletes it. Both wait for the agent to confirm, through the
// state it publishes (ConfigMap rlmesh-agent-status), and say what still runs.
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { AGENT_STATUS_CONFIGMAP, parseAgentStatus, STALE_AFTER_SECONDS, type AgentStatus } from '../lib/agent-status.ts';
import { errorMessage, statusCode } from '../lib/error-fields.ts';
import { OPERATOR_DRAIN_CONFIGMAP, operatorDrainConfigMap, parseOperatorDrain, UNDO_DRAIN, type OperatorDrain } from '../lib/operator-drain.ts';
import { CLUSTER_OPTIONS, loadKubeConfig } from './preflight.ts';
import { UsageError } from './usage-error.ts';
import type { Io } from './clusters-join.ts';

export const DRAIN_HELP = `Usage: rlmesh drain [--undo] [--wait-seconds <n>] [--kubeconfig <file>] [--context <name>] [-n <namespace>]

Drains the cluster on its own side, whatever the platform does: the agent
refuses every new assignment (the platform is told, evaluation by evaluation,
with reason OperatorDrain) and evaluations already here run to their end.
Writes ConfigMap ${OPERATOR_DRAIN_CONFIGMAP} in the release namespace, which
the agent watches; --undo deletes it and the cluster takes new evaluations
again. Waits for the agent to confirm and prints what still runs; rlmesh status
shows the drain too.

The ConfigMap is owned by the agent's Deployment: helm upgrade keeps the drain,
helm uninstall removes it.

Rights, all in the release namespace: get on deployments/rlmesh-cluster-agent
and create on configmaps (drain), delete on configmaps/${OPERATOR_DRAIN_CONFIGMAP}
(--undo), get on configmaps/${AGENT_STATUS_CONFIGMAP} (the agent's confirmation).

Options:
  --undo                end the drain
  --wait-seconds <n>    how long to wait for the agent to confirm (default 60; 0: do not wait)
  --kubeconfig <file>   kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)
  --context <name>      context to use (default: the current context)
  -n, --namespace <ns>  the release namespace (default rlmesh-system)
  -h, --help            this help
`;

export async function drain(argv: string[], io: Pick<Io, 'stdout' | 'stderr'>): Promise<number> {
  try {
    const { values: opts } = parseArgs({
      args: argv,
      options: { kubeconfig: CLUSTER_OPTIONS.kubeconfig, context: CLUSTER_OPTIONS.context, namespace: CLUSTER_OPTIONS.namespace, help: CLUSTER_OPTIONS.help, undo: { type: 'boolean', default: false }, 'wait-seconds': { type: 'string', default: '60' } },
      strict: true,
      allowPositionals: false,
    });
    if (opts.help) {
      io.stdout.write(DRAIN_HELP);
      return 0;
    }
    const waitSeconds = Number(opts['wait-seconds']);
    if (!Number.isInteger(waitSeconds) || waitSeconds < 0) throw new UsageError(`--wait-seconds must be a whole number of seconds, 0 or more, not "${opts['wait-seconds']}"`);
    const kc = loadKubeConfig(opts.kubeconfig, opts.context);
    const ns = opts.namespace;
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const lines = opts.undo ? await undoDrain(core, ns) : await startDrain(kc, core, ns);
    io.stdout.write(lines.join('\n') + '\n');
    if (waitSeconds === 0) return 0;
    const want = !opts.undo;
    const confirmed = await agentConfirms(core, ns, want, waitSeconds * 1000);
    if (confirmed.ok) {
      io.stdout.write(`${confirmedLine(confirmed.status, want)}\n`);
      return 0;
    }
    io.stderr.write(`rlmesh drain: ${notConfirmed(ns, want, waitSeconds, confirmed.problem)}\n`);
    return 1;
  } catch (err) {
    const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    io.stderr.write(`rlmesh drain: ${errorMessage(err)}${usage ? '; run rlmesh drain --help' : ''}\n`);
    return usage ? 2 : 1;
  }
}

async function startDrain(kc: k8s.KubeConfig, core: k8s.CoreV1Api, ns: string): Promise<string[]> {
  const agent = await agentDeployment(kc, ns);
  const by = await whoAmI(kc);
  const wanted: OperatorDrain = { since: new Date().toISOString(), ...(by ? { by } : {}) };
  // owned by the agent's Deployment: helm uninstall takes the drain with it, and an upgrade keeps it
  const body = operatorDrainConfigMap(wanted, ns);
  body.metadata!.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'Deployment', name: AGENT_DEPLOYMENT, uid: agent.metadata!.uid! }];
  try {
    await core.createNamespacedConfigMap({ namespace: ns, body });
    return [`drained: ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP} written at ${wanted.since}${by ? ` by ${by}` : ''}; the agent refuses new assignments from now on and evaluations already here run to their end`];
  } catch (err) {
    if (statusCode(err) === 409) {
      const held = parseOperatorDrain(await core.readNamespacedConfigMap({ name: OPERATOR_DRAIN_CONFIGMAP, namespace: ns }));
      return [`already drained by the operator since ${held.since}${held.by ? ` (by ${held.by})` : ''}: ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP} exists; nothing changed`];
    }
    throw explain(err, ns, 'create');
  }
}

async function undoDrain(core: k8s.CoreV1Api, ns: string): Promise<string[]> {
  try {
    await core.deleteNamespacedConfigMap({ name: OPERATOR_DRAIN_CONFIGMAP, namespace: ns });
    return [`drain ended: ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP} deleted; the agent takes new evaluations again`];
  } catch (err) {
    if (statusCode(err) === 404) return [`not drained by the operator (no ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP}); nothing to undo`];
    throw explain(err, ns, 'delete');
  }
}

const AGENT_DEPLOYMENT = 'rlmesh-cluster-agent';

async function agentDeployment(kc: k8s.KubeConfig, ns: string): Promise<k8s.V1Deployment> {
  try {
    return await kc.makeApiClient(k8s.AppsV1Api).readNamespacedDeployment({ name: AGENT_DEPLOYMENT, namespace: ns });
  } catch (err) {
    const code = statusCode(err);
    if (code === 404) throw new Error(`there is no Deployment ${AGENT_DEPLOYMENT} in ${ns}: the runtime is not installed there, so there is nothing to drain; pass -n <the release namespace>`);
    if (code === 403) throw new Error(`the Kubernetes API refused to read Deployment ${ns}/${AGENT_DEPLOYMENT} (403 Forbidden): rlmesh drain needs get on it (the drain's owner, so that helm uninstall removes the drain); use a context that has it (a cluster admin), or ask for that right`);
    throw new Error(`could not read Deployment ${ns}/${AGENT_DEPLOYMENT}: ${errorMessage(err)}; check that the Kubernetes API is reachable from here and run the command again`);
  }
}

/** The user this kube context authenticates as (SelfSubjectReview, which every user may ask), or undefined when the API will not say. */
async function whoAmI(kc: k8s.KubeConfig): Promise<string | undefined> {
  try {
    const r = await kc.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } });
    return r.status?.userInfo?.username || undefined;
  } catch {
    return undefined;
  }
}

function explain(err: unknown, ns: string, verb: 'create' | 'delete'): Error {
  const code = statusCode(err);
  if (code === 403) {
    const right = verb === 'create' ? `create on configmaps in ${ns}` : `delete on configmaps/${OPERATOR_DRAIN_CONFIGMAP} in ${ns}`;
    return new Error(`the Kubernetes API refused to ${verb} ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP} (403 Forbidden): your kube context lacks ${right}; use a context that has it (a cluster admin), or ask for that right`);
  }
  if (code === 404) return new Error(`there is no namespace ${ns}: the runtime is not installed there; pass -n <the release namespace>`);
  return new Error(`could not ${verb} ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP}: ${errorMessage(err)}; check that the Kubernetes API is reachable from here and run the command again`);
}

type Confirmation = { ok: true; status: AgentStatus } | { ok: false; problem: string };

/** Waits until the agent's published state shows the operator's drain (`want`) or no longer does. */
async function agentConfirms(core: k8s.CoreV1Api, ns: string, want: boolean, timeoutMs: number): Promise<Confirmation> {
  const deadline = Date.now() + timeoutMs;
  let problem = 'the agent has not published its state';
  for (;;) {
    try {
      const r = parseAgentStatus(await core.readNamespacedConfigMap({ name: AGENT_STATUS_CONFIGMAP, namespace: ns }));
      if (!r.ok) problem = r.problem;
      else if (Date.now() - Date.parse(r.status.updatedAt) > STALE_AFTER_SECONDS * 1000) problem = `the agent last published its state at ${r.status.updatedAt}, so it is not running or cannot reach the Kubernetes API`;
      else if (!r.status.drain) problem = `the agent (version ${r.status.agentVersion}) does not report drains: upgrade the chart to this CLI's version`;
      else if (Boolean(r.status.drain.operator) === want) return { ok: true, status: r.status };
      else problem = `the agent last published its state at ${r.status.updatedAt} and it shows the cluster ${want ? 'not drained' : 'still drained'}`;
    } catch (err) {
      const code = statusCode(err);
      problem = code === 404 ? `there is no ConfigMap ${ns}/${AGENT_STATUS_CONFIGMAP}: the agent has not published its state` : code === 403 ? `your kube context may not read ConfigMap ${ns}/${AGENT_STATUS_CONFIGMAP}` : errorMessage(err);
      if (code === 403) return { ok: false, problem };
    }
    if (Date.now() >= deadline) return { ok: false, problem };
    await sleep(Math.min(2000, Math.max(0, deadline - Date.now())));
  }
}

function confirmedLine(s: AgentStatus, drained: boolean): string {
  const u = s.unfinished;
  const runs = !u ? '' : u.count === 0 ? '; no evaluation runs here' : `; ${u.count} evaluation${u.count === 1 ? '' : 's'} still run${u.count === 1 ? 's' : ''}: ${u.names.join(', ')}${u.count > u.names.length ? ', …' : ''}`;
  if (!drained) {
    const platform = s.drain?.platform ? '; the platform still drains this cluster itself, so new evaluations arrive only once it ends its drain' : '';
    return `the agent confirmed at ${s.updatedAt}: it takes new evaluations again${platform}${runs}`;
  }
  const done = u && u.count === 0 ? ' (helm uninstall loses nothing now)' : ' (once none runs, helm uninstall loses nothing)';
  return `the agent confirmed at ${s.updatedAt}: it refuses new assignments and has told the platform${runs}${done}; ${UNDO_DRAIN} takes new ones again`;
}

function notConfirmed(ns: string, drained: boolean, seconds: number, problem: string): string {
  const agent = `kubectl -n ${ns} get pods -l app.kubernetes.io/name=rlmesh-cluster-agent`;
  return drained
    ? `the drain is recorded (ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP}), but the agent did not confirm it within ${seconds} s: ${problem}. An agent that runs refuses new assignments as soon as it has read the ConfigMap, and takes none before; check the agent (${agent}) and run rlmesh status`
    : `the drain is ended (ConfigMap ${ns}/${OPERATOR_DRAIN_CONFIGMAP} deleted), but the agent did not confirm it within ${seconds} s: ${problem}. Check the agent (${agent}) and run rlmesh status`;
}
