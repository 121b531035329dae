// Keeps ConfigMap rlmesh-agent-status (lib/agent-status.ts) current: every
// PUBLISH_INTERVAL_SECONDS, and soon after the session connects or drops, the
// agent writes what `rlmesh status` shows about it, its credential Secrets' metadata
// among it. A failed write is logged
// once until one succeeds again; the agent's work never waits on it.
import { hostname } from 'node:os';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { agentStatusConfigMap, MAX_UNFINISHED_NAMES, PUBLISH_INTERVAL_SECONDS, type AgentStatus } from '../lib/agent-status.ts';
import { errorFields } from '../lib/error-fields.ts';
import { isNotFound } from '../lib/kube-errors.ts';
import { TOKEN_HASH_ANNOTATION } from '../lib/credential-secret.ts';
import { lastWritten, readSecretMetadata } from '../lib/secret-metadata.ts';

type Rotation = AgentStatus['credentials']['rotations'][number];

/**
 * The rotations the control plane sent that are not stored yet, wait for the operator to write them into a Secret
 * they deliver, or were refused: purpose, where and problem, never the value.
 */
export class RotationLog {
  readonly #byPurpose = new Map<string, Rotation>();
  /** the SHA-256 of the value each awaiting-secret rotation waits for (never published) */
  readonly #awaited = new Map<string, string>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  storing(purpose: string): void {
    this.#byPurpose.set(purpose, { purpose, state: 'storing', since: new Date(this.#now()).toISOString() });
  }

  stored(purpose: string): void {
    this.#byPurpose.delete(purpose);
    this.#awaited.delete(purpose);
  }

  /** a rotation for a Secret the operator delivered: the agent does not write it; the operator must, before `until` */
  awaitingSecret(purpose: string, where: { secrets: string[]; key: string; until?: string }, valueHash: string): void {
    if (this.#byPurpose.get(purpose)?.state === 'awaiting-secret' && this.#awaited.get(purpose) === valueHash) return;
    this.#awaited.set(purpose, valueHash);
    this.#byPurpose.set(purpose, { purpose, state: 'awaiting-secret', since: new Date(this.#now()).toISOString(), secrets: where.secrets, key: where.key, ...(where.until ? { until: where.until } : {}) });
  }

  /** the Secret of `purpose` now holds the value with this SHA-256 (the control Secret, as the agent watches it) */
  secretHolds(purpose: string, valueHash: string): void {
    if (this.#awaited.get(purpose) !== valueHash) return;
    this.#awaited.delete(purpose);
    this.#byPurpose.delete(purpose);
  }

  refused(purpose: string, problem: string): void {
    const p = purpose.slice(0, 40);
    if (this.#byPurpose.get(p)?.state === 'refused') return;
    this.#byPurpose.set(p, { purpose: p, state: 'refused', since: new Date(this.#now()).toISOString(), problem });
  }

  get list(): Rotation[] {
    return [...this.#byPurpose.values()];
  }
}

export type StatusSources = {
  agentVersion: string;
  session: { currentState: string; connectedAt: number; disconnectedAt: number; lastHeardAt: number; versionSkew?: { controlPlaneVersion: string; verdict: 'supported' | 'oldest' | 'unsupported'; line: string } | undefined };
  credentials: { credentials: { clusterId: string; tokenHash: string | undefined }; ageSeconds: number };
  rotations: RotationLog;
  spool: { records: number; bytes: number };
  spoolMaxBytes: number;
  draining: () => boolean;
  /** who drains the cluster: the platform (since when, if it said) and the operator (rlmesh drain) */
  drains?: () => NonNullable<AgentStatus['drain']>;
  /** the names of the evaluations not finished yet */
  unfinished?: () => string[];
};

const iso = (ms: number): string | undefined => (ms > 0 ? new Date(ms).toISOString() : undefined);

type SecretFacts = NonNullable<AgentStatus['credentials']['secrets']>;

/** The credential Secrets by their metadata (never their data), or undefined when one cannot be read. */
export async function describeSecrets(core: k8s.CoreV1Api, secrets: readonly { namespace: string; name: string }[]): Promise<SecretFacts | undefined> {
  try {
    return await Promise.all(
      secrets.map(async ({ namespace, name }) => {
        const meta = await readSecretMetadata(core, namespace, name);
        if (!meta) return { namespace, name, exists: false };
        const writtenAt = lastWritten(meta)?.toISOString();
        return { namespace, name, exists: true, fromJoin: meta.annotations?.[TOKEN_HASH_ANNOTATION] !== undefined, ...(writtenAt ? { writtenAt } : {}) };
      }),
    );
  } catch {
    return undefined;
  }
}

/** The status as it is now; `secrets`: what describeSecrets found. */
export function agentStatus(s: StatusSources, now = Date.now(), secrets?: SecretFacts): AgentStatus {
  const connected = s.session.currentState === 'connected';
  const connectedSince = connected ? iso(s.session.connectedAt) : undefined;
  const lastHeardAt = iso(s.session.lastHeardAt);
  const disconnectedSince = connected ? undefined : iso(s.session.disconnectedAt);
  const skew = s.session.versionSkew;
  return {
    agentVersion: s.agentVersion,
    pod: process.env.POD_NAME ?? hostname(),
    updatedAt: new Date(now).toISOString(),
    session: {
      state: s.session.currentState,
      clusterId: s.credentials.credentials.clusterId,
      ...(connectedSince ? { connectedSince } : {}),
      ...(lastHeardAt ? { lastHeardAt } : {}),
      ...(disconnectedSince ? { disconnectedSince } : {}),
      ...(skew ? { versionSkew: { controlPlaneVersion: skew.controlPlaneVersion, verdict: skew.verdict, line: skew.line } } : {}),
    },
    credentials: {
      source: s.credentials.credentials.tokenHash ? 'join' : 'secret',
      inUseSince: new Date(now - s.credentials.ageSeconds * 1000).toISOString(),
      rotations: s.rotations.list,
      ...(secrets ? { secrets } : {}),
    },
    spool: { records: s.spool.records, bytes: s.spool.bytes, maxBytes: s.spoolMaxBytes },
    draining: s.draining(),
    ...(s.drains ? { drain: s.drains() } : {}),
    ...(s.unfinished ? { unfinished: unfinishedOf(s.unfinished()) } : {}),
  };
}

function unfinishedOf(names: string[]): NonNullable<AgentStatus['unfinished']> {
  return { count: names.length, names: [...names].sort().slice(0, MAX_UNFINISHED_NAMES) };
}

export function startStatusPublisher(o: {
  kc: k8s.KubeConfig;
  namespace: string;
  /** the chart's commonLabels (runtime config pods.commonLabels) */
  commonLabels?: Readonly<Record<string, string>>;
  log: Logger;
  sources: StatusSources;
  /** the credential Secrets whose metadata it publishes (for rlmesh status under a role that may not read Secrets) */
  secrets?: readonly { namespace: string; name: string }[];
}): { stop(): void; soon(): void } {
  const core = o.kc.makeApiClient(k8s.CoreV1Api);
  let failing = false;
  let running: Promise<void> | undefined;
  let again = false;
  const publish = async (): Promise<void> => {
    const secrets = o.secrets ? await describeSecrets(core, o.secrets) : undefined;
    const body = agentStatusConfigMap(agentStatus(o.sources, Date.now(), secrets), o.namespace, o.commonLabels);
    try {
      try {
        await core.replaceNamespacedConfigMap({ name: body.metadata!.name!, namespace: o.namespace, body });
      } catch (err) {
        if (!isNotFound(err)) throw err;
        await core.createNamespacedConfigMap({ namespace: o.namespace, body });
      }
      if (failing) o.log.info(`ConfigMap ${body.metadata!.name} is written again`);
      failing = false;
    } catch (err) {
      if (!failing) o.log.warn(errorFields(err), `could not write ConfigMap ${body.metadata!.name} (what rlmesh status shows of the agent); trying again every ${PUBLISH_INTERVAL_SECONDS} s`);
      failing = true;
    }
  };
  // one write at a time; a request during a write runs once after it
  const tick = (): void => {
    if (running) {
      again = true;
      return;
    }
    running = publish().finally(() => {
      running = undefined;
      if (again) {
        again = false;
        tick();
      }
    });
  };
  let soonTimer: NodeJS.Timeout | undefined;
  const timer = setInterval(tick, PUBLISH_INTERVAL_SECONDS * 1000);
  timer.unref();
  tick();
  return {
    stop: () => {
      clearInterval(timer);
      clearTimeout(soonTimer);
    },
    // a state change: written within a second, several changes at once in one write
    soon: () => {
      soonTimer ??= setTimeout(() => {
        soonTimer = undefined;
        tick();
      }, 1000);
      soonTimer.unref();
    },
  };
}
