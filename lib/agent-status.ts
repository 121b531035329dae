// What the agent says about itself where a cluster operator can read it with
// nothing but a kube context: ConfigMap rlmesh-agent-status in the release
// namespace (key status.json), rewritten every PUBLISH_INTERVAL_SECONDS. The
// agent writes it (agent/status-publisher.ts), `rlmesh status` reads it
// (lib/status/). It holds no secret: the session's state and times, where the
// control credential came from and since when it is in use, its credential
// Secrets' metadata (whether they exist, when written), the rotations the agent
// is storing, waits for the operator to write, or refused (purpose and where only), the spool's backlog, who drains the
// cluster (the platform, the operator) and which evaluations still run.
import type * as k8s from '@kubernetes/client-node';
import { z } from 'zod';
import { NAMES } from './fixed-names.ts';
import { withCommonLabels } from './common-labels.ts';

export const AGENT_STATUS_CONFIGMAP = NAMES.agentStatusConfigMap;
export const AGENT_STATUS_KEY = 'status.json';
/** How often the agent rewrites the ConfigMap; a reader takes three missed writes for an agent that is not running. */
export const PUBLISH_INTERVAL_SECONDS = 15;
export const STALE_AFTER_SECONDS = 3 * PUBLISH_INTERVAL_SECONDS;
/** How many names of unfinished evaluations the status carries (the count is always whole). */
export const MAX_UNFINISHED_NAMES = 20;

const time = z.string().describe('RFC 3339');

export const agentStatusSchema = z.object({
  agentVersion: z.string(),
  pod: z.string(),
  updatedAt: time,
  session: z.object({
    /** connecting, connected, backoff, unauthenticated, unsupported (the control plane refused this agent's version) or stopped */
    state: z.string(),
    clusterId: z.string(),
    /** when the current session reached Connected (absent while not connected) */
    connectedSince: time.optional(),
    /** when the control plane last spoke on the session (its pings, acks, anything) */
    lastHeardAt: time.optional(),
    /** since when the agent has been without a session (absent while connected) */
    disconnectedSince: time.optional(),
    /** what the control plane last said of this agent's version: its version, the verdict, its line (empty when supported) */
    versionSkew: z.object({ controlPlaneVersion: z.string(), verdict: z.enum(['supported', 'oldest', 'unsupported']), line: z.string() }).optional(),
  }),
  credentials: z.object({
    /** join: written by the agent from a join token; secret: delivered into the Secret out of band (GitOps, a secret manager) */
    source: z.enum(['join', 'secret']),
    /** when the control credential in use last changed, as this agent saw it (its start, at the latest) */
    inUseSince: time,
    /**
     * rotations sent by the control plane and not yet stored, waiting for the operator to write them into a Secret
     * they deliver (awaiting-secret: which Secrets, which key, and until when the value in use works), or refused;
     * never the value
     */
    rotations: z.array(
      z.object({
        purpose: z.string(),
        state: z.enum(['storing', 'awaiting-secret', 'refused']),
        since: time,
        problem: z.string().optional(),
        secrets: z.array(z.string()).optional(),
        key: z.string().optional(),
        until: time.optional(),
      }),
    ),
    /**
     * its credential Secrets as their metadata shows them (the agent may read them; `rlmesh status` under the
     * chart's least-privilege role may not): whether each exists, whether a join wrote it, when it was last written
     */
    secrets: z.array(z.object({ namespace: z.string(), name: z.string(), exists: z.boolean(), fromJoin: z.boolean().optional(), writtenAt: time.optional() })).optional(),
  }),
  spool: z.object({ records: z.number().int(), bytes: z.number().int(), maxBytes: z.number().int() }),
  /** the platform drains this cluster: no new assignments */
  draining: z.boolean(),
  /** who drains the cluster and since when: the platform (its ClusterState) and the operator (rlmesh drain); absent from older agents */
  drain: z
    .object({
      platform: z.object({ since: time.optional() }).optional(),
      operator: z.object({ since: time, by: z.string().optional() }).optional(),
    })
    .optional(),
  /** the evaluations not finished yet (what a drain waits for): how many, and the names of the first MAX_UNFINISHED_NAMES; absent from older agents */
  unfinished: z.object({ count: z.number().int(), names: z.array(z.string()) }).optional(),
});
export type AgentStatus = z.infer<typeof agentStatusSchema>;

export function agentStatusConfigMap(status: AgentStatus, namespace: string, commonLabels?: Readonly<Record<string, string>>): k8s.V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: AGENT_STATUS_CONFIGMAP,
      namespace,
      labels: withCommonLabels({ 'app.kubernetes.io/name': AGENT_STATUS_CONFIGMAP, 'app.kubernetes.io/part-of': 'rlmesh-runtime', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' }, commonLabels),
    },
    data: { [AGENT_STATUS_KEY]: JSON.stringify(status, null, 2) },
  };
}

/** The status in a ConfigMap, or why it cannot be read. */
export function parseAgentStatus(cm: k8s.V1ConfigMap | undefined): { ok: true; status: AgentStatus } | { ok: false; problem: string } {
  const raw = cm?.data?.[AGENT_STATUS_KEY];
  if (raw === undefined) return { ok: false, problem: `ConfigMap ${AGENT_STATUS_CONFIGMAP} has no key ${AGENT_STATUS_KEY}` };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return { ok: false, problem: `ConfigMap ${AGENT_STATUS_CONFIGMAP} key ${AGENT_STATUS_KEY} is not JSON` };
  }
  const r = agentStatusSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    return { ok: false, problem: `ConfigMap ${AGENT_STATUS_CONFIGMAP} key ${AGENT_STATUS_KEY}: ${issue.path.join('.')}: ${issue.message}` };
  }
  return { ok: true, status: r.data };
}
