// Credentials: where the control credential came from (a join, or a Secret
// delivered out of band), when its Secret was last written, a rotation the
// agent is storing or refused, and whether the registry takes the pull
// Secret (a runtime pod refused its image says it does not). Read from the
// Secrets' metadata only and the agent's published state: never a value. A kube
// context that may not read Secrets (the chart's role rlmesh-status) gets the
// metadata the agent published.
import type * as k8s from '@kubernetes/client-node';
import { TOKEN_HASH_ANNOTATION } from '../../credential-secret.ts';
import type { AgentStatus } from '../../agent-status.ts';
import { agentStatus, pods, runtimeFacts, secretMetadata, PART_OF } from '../reads.ts';
import { lastWritten } from '../../secret-metadata.ts';
import { NAMES } from '../../fixed-names.ts';
import { isForbidden } from '../../kube-errors.ts';
import { ago, type CheckResult, type StatusContext } from '../types.ts';

export type PullRefusal = { namespace: string; pod: string; reason: string; message: string };

export type CredentialFacts = {
  namespace: string;
  runsNamespace: string;
  controlSecret: string;
  pullSecret: string;
  control: k8s.V1ObjectMeta | undefined;
  /** the pull Secret in the release and in the runs namespace */
  pull: { namespace: string; meta: k8s.V1ObjectMeta | undefined }[];
  agent: AgentStatus | undefined;
  pullRefusals: PullRefusal[];
  now: number;
  /** the Secrets' metadata came from the agent's published state: this kube context may not read Secrets */
  fromAgent?: boolean;
};

const AUTH_REFUSED = /401|403|unauthori[sz]ed|denied|forbidden|authenticat/i;
const SHOWN = 240;

/** At most SHOWN characters of a kubelet message, around what `re` finds: its image reference alone can take 200. */
export function excerpt(message: string, re?: RegExp): string {
  if (message.length <= SHOWN) return message;
  const at = re ? message.search(re) : -1;
  const start = at < 0 ? 0 : Math.max(0, Math.min(at - 120, message.length - SHOWN));
  return `${start > 0 ? '…' : ''}${message.slice(start, start + SHOWN)}${start + SHOWN < message.length ? '…' : ''}`;
}

export function credentialsVerdict(f: CredentialFacts): CheckResult {
  const id = 'credentials';
  if (!f.control) return { id, verdict: 'fail', found: `Secret ${f.namespace}/${f.controlSecret} (the control credential) does not exist`, fix: 'Run the install command again with a new join token (dashboard: New install command), or deliver the Secret as the GitOps install describes.' };
  const missingPull = f.pull.filter((p) => !p.meta).map((p) => `${p.namespace}/${f.pullSecret}`);
  if (missingPull.length) return { id, verdict: 'fail', found: `pull Secret ${missingPull.join(' and ')} does not exist`, fix: 'The runtime images cannot be pulled without it: run a New install command, or deliver the Secret as the GitOps install describes.' };
  const source = f.control.annotations?.[TOKEN_HASH_ANNOTATION] ? 'written by the join' : 'delivered out of band';
  const written = lastWritten(f.control);
  const age = written ? `, written ${ago(f.now - written.getTime())} ago` : '';
  const inUse = f.agent ? `, in use by the agent since ${f.agent.credentials.inUseSince}` : '';
  const found = `control Secret ${f.controlSecret} ${source}${age}${inUse}; pull Secret ${f.pullSecret} in ${f.pull.map((p) => p.namespace).join(' and ')}${f.fromAgent ? ' (as the agent published their metadata)' : ''}`;

  const auth = f.pullRefusals.filter((r) => AUTH_REFUSED.test(r.message));
  if (auth.length) {
    const r = auth[0]!;
    return {
      id,
      verdict: 'fail',
      found: `${found}; the registry refuses it: pod ${r.namespace}/${r.pod} ${r.reason}: ${excerpt(r.message, AUTH_REFUSED)}`,
      fix: `Put the pull credential the join wrote back into Secret ${r.namespace}/${f.pullSecret} (or run a New install command for fresh ones); kubectl -n ${r.namespace} describe pod ${r.pod} shows the refusal.`,
    };
  }
  const refused = f.agent?.credentials.rotations.filter((r) => r.state === 'refused') ?? [];
  if (refused.length)
    return {
      id,
      verdict: 'fail',
      found: `${found}; the agent refused a ${refused.map((r) => r.purpose).join(', ')} rotation since ${refused[0]!.since}: ${refused[0]!.problem ?? ''}`,
      fix: 'Rotate that credential again from the dashboard; the credential in use works until its overlap ends. If refused again, report it to the platform.',
    };
  const awaiting = f.agent?.credentials.rotations.filter((r) => r.state === 'awaiting-secret') ?? [];
  if (awaiting.length) {
    const where = (r: (typeof awaiting)[number]) => `${(r.secrets ?? []).join(' and ')} key "${r.key ?? ''}"`;
    const by = (r: (typeof awaiting)[number]) => (r.until ? ` by ${r.until}` : ' before the overlap ends');
    const expired = awaiting.find((r) => r.until && Date.parse(r.until) <= f.now);
    return {
      id,
      verdict: expired ? 'fail' : 'warn',
      found: `${found}; rotation pending: ${awaiting.map((r) => `write the new ${r.purpose} value into ${where(r)}${by(r)}`).join('; ')} (rotated since ${awaiting[0]!.since}; the agent does not write Secrets you deliver)`,
      fix: expired
        ? `The overlap of the ${expired.purpose} rotation ended at ${expired.until}, so the value in ${where(expired)} no longer works: write the value the rotation issued into it, or rotate again from the cluster's Settings.`
        : 'Write the value the rotation issued (the cluster\'s Settings) into that Secret through your GitOps repository or secret manager; the agent follows it without a restart, and the old value keeps working until then.',
    };
  }
  const storing = f.agent?.credentials.rotations.filter((r) => r.state === 'storing') ?? [];
  if (storing.length)
    return {
      id,
      verdict: 'warn',
      found: `${found}; a ${storing.map((r) => r.purpose).join(', ')} rotation is pending since ${storing[0]!.since} (the agent is writing it to its Secret)`,
      fix: `If it stays pending, the agent cannot write its Secrets: kubectl -n ${f.namespace} logs deployment/rlmesh-cluster-agent.`,
    };
  const other = f.pullRefusals[0];
  if (other) return { id, verdict: 'warn', found: `${found}; pod ${other.namespace}/${other.pod} ${other.reason}: ${excerpt(other.message)}`, fix: `kubectl -n ${other.namespace} describe pod ${other.pod} says why the image cannot be pulled.` };
  return { id, verdict: 'pass', found, fix: 'Nothing to do; rotate from the dashboard when your policy asks.' };
}

/** Pods waiting for an image they cannot pull, with the kubelet's message. */
export function pullRefusals(list: k8s.V1Pod[]): PullRefusal[] {
  return list.flatMap((p) =>
    [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]
      .map((c) => c.state?.waiting)
      .filter((w): w is k8s.V1ContainerStateWaiting => !!w && /ImagePullBackOff|ErrImagePull/.test(w.reason ?? ''))
      .map((w) => ({ namespace: p.metadata?.namespace ?? '', pod: p.metadata?.name ?? '', reason: w.reason ?? '', message: w.message ?? '' })),
  );
}

export async function checkCredentials(ctx: StatusContext): Promise<CheckResult> {
  const facts = await runtimeFacts(ctx);
  const runs = facts?.runsNamespace ?? NAMES.runsNamespace;
  const controlSecret = facts?.controlSecret ?? NAMES.controlSecret;
  const pullSecret = facts?.pullSecret ?? NAMES.pullSecret;
  const [agent, sysPods, runsPods] = await Promise.all([agentStatus(ctx), pods(ctx, ctx.namespace, PART_OF), pods(ctx, runs, PART_OF)]);
  const wanted = [[ctx.namespace, controlSecret], [ctx.namespace, pullSecret], [runs, pullSecret]] as const;
  let metas: (k8s.V1ObjectMeta | undefined)[];
  let fromAgent = false;
  try {
    metas = await Promise.all(wanted.map(([ns, name]) => secretMetadata(ctx, ns, name)));
  } catch (err) {
    // a kube context that may not read Secrets (the chart's role rlmesh-status): the metadata the agent published
    const published = agent.kind === 'ok' ? publishedMetadata(agent.status, wanted) : undefined;
    if (!isForbidden(err) || !published) throw err;
    metas = published;
    fromAgent = true;
  }
  const [control, pullSys, pullRuns] = metas;
  return credentialsVerdict({
    fromAgent,
    namespace: ctx.namespace,
    runsNamespace: runs,
    controlSecret,
    pullSecret,
    control,
    pull: [{ namespace: ctx.namespace, meta: pullSys }, { namespace: runs, meta: pullRuns }],
    agent: agent.kind === 'ok' ? agent.status : undefined,
    pullRefusals: pullRefusals([...sysPods, ...runsPods]),
    now: ctx.now(),
  });
}

/** The Secrets' metadata as the agent published it (undefined when it published none of one of them). */
export function publishedMetadata(status: AgentStatus, wanted: readonly (readonly [string, string])[]): (k8s.V1ObjectMeta | undefined)[] | undefined {
  const facts = wanted.map(([ns, name]) => status.credentials.secrets?.find((s) => s.namespace === ns && s.name === name));
  if (facts.some((f) => f === undefined)) return undefined;
  return facts.map((f): k8s.V1ObjectMeta | undefined => {
    if (!f!.exists) return undefined;
    const annotations: Record<string, string> = f!.fromJoin ? { [TOKEN_HASH_ANNOTATION]: 'published' } : {};
    return { annotations, ...(f!.writtenAt ? { creationTimestamp: new Date(f!.writtenAt) } : {}) };
  });
}
