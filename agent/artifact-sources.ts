// The credentials an evaluation's artifacts are fetched with (temporary S3
// keys, presigned URLs): one entry `<evaluation>-sources` per evaluation, in one
// of the Secrets ARTIFACT_SOURCES_SECRETS of the runs namespace, which the chart
// projects into the cache filler's pod. The kubelet reads them for the filler,
// so its ServiceAccount holds no Secret rights at all, and no pod in the runs
// namespace can read a Secret that is not its own. The agent writes an entry
// before it creates the evaluation and removes it once the evaluation has
// finished or is gone; what a missed event leaves is swept. The Secrets are
// owned by the agent's ClusterRole, so helm uninstall removes them with it.
import { createHash } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { withCommonLabels } from '../lib/common-labels.ts';
import { errorFields } from '../lib/error-fields.ts';
import { ARTIFACT_SOURCES_SECRETS } from '../lib/fixed-names.ts';
import { isConflict, isNotFound, MERGE_PATCH } from '../lib/kube-errors.ts';

/** What an entry holds (JSON): the Secret keys the filler reads (accessKeyId, secretAccessKey, sessionToken, url.<artifact>) and when it was written. */
export type SourcesEntry = { writtenAt: string; data: Record<string, string> };

/** An entry absent from the evaluations for this long was written for an evaluation that was never created, or is gone. */
export const ORPHAN_AFTER_MS = 10 * 60_000;

/** The Secret an entry lives in, by a hash of its name: the agent and a reader agree without a lookup. */
export function sourcesSecretFor(entry: string): string {
  const n = createHash('sha256').update(entry).digest().readUInt32BE(0) % ARTIFACT_SOURCES_SECRETS.length;
  return ARTIFACT_SOURCES_SECRETS[n]!;
}

const LABELS = { 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent', 'app.kubernetes.io/component': 'rlmesh-artifact-sources' };

export class ArtifactSources {
  readonly #core: k8s.CoreV1Api;
  readonly #namespace: string;
  readonly #commonLabels: Readonly<Record<string, string>> | undefined;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #owner: (() => Promise<k8s.V1OwnerReference>) | undefined;
  /** entries this agent knows to be written (by it, or seen by a sweep): only those are removed on an event */
  readonly #known = new Set<string>();

  constructor(o: { core: k8s.CoreV1Api; namespace: string; commonLabels?: Readonly<Record<string, string>>; log: Logger; now?: () => number; owner?: () => Promise<k8s.V1OwnerReference> }) {
    this.#owner = o.owner;
    this.#core = o.core;
    this.#namespace = o.namespace;
    this.#commonLabels = o.commonLabels;
    this.#log = o.log;
    this.#now = o.now ?? Date.now;
  }

  /** Writes (or rewrites) an entry; creates its Secret when it does not exist yet. */
  async put(entry: string, data: Record<string, string>): Promise<void> {
    const name = sourcesSecretFor(entry);
    const value = Buffer.from(JSON.stringify({ writtenAt: new Date(this.#now()).toISOString(), data } satisfies SourcesEntry)).toString('base64');
    for (;;) {
      try {
        await this.#core.patchNamespacedSecret({ name, namespace: this.#namespace, body: { data: { [entry]: value } } }, MERGE_PATCH);
        break;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      try {
        await this.#core.createNamespacedSecret({
          namespace: this.#namespace,
          body: {
            metadata: { name, namespace: this.#namespace, labels: withCommonLabels(LABELS, this.#commonLabels), ...(this.#owner ? { ownerReferences: [await this.#owner()] } : {}) },
            type: 'Opaque',
            data: { [entry]: value },
          },
        });
        break;
      } catch (err) {
        // another write created it first: patch it
        if (!isConflict(err)) throw err;
      }
    }
    this.#known.add(entry);
  }

  /** Removes an entry this agent knows of; a failure is left to the next sweep. */
  async remove(entry: string): Promise<void> {
    if (!this.#known.has(entry)) return;
    try {
      await this.#core.patchNamespacedSecret({ name: sourcesSecretFor(entry), namespace: this.#namespace, body: { data: { [entry]: null } } }, MERGE_PATCH);
      this.#known.delete(entry);
    } catch (err) {
      if (isNotFound(err)) this.#known.delete(entry);
      else this.#log.warn({ ...errorFields(err), entry }, 'could not remove the artifact credentials of a finished evaluation; the next sweep tries again');
    }
  }

  /**
   * Reads every Secret and removes the entries of evaluations that have finished, and of
   * those the informer does not hold (never created, or deleted) once ORPHAN_AFTER_MS old.
   * `phaseOf` answers from the agent's evaluation informer, by entry name.
   */
  async sweep(phaseOf: (entry: string) => 'running' | 'finished' | 'absent'): Promise<void> {
    for (const name of ARTIFACT_SOURCES_SECRETS) {
      let secret: k8s.V1Secret;
      try {
        secret = await this.#core.readNamespacedSecret({ name, namespace: this.#namespace });
      } catch (err) {
        if (isNotFound(err)) continue;
        throw err;
      }
      const stale: Record<string, null> = {};
      for (const [entry, value] of Object.entries(secret.data ?? {})) {
        this.#known.add(entry);
        const phase = phaseOf(entry);
        if (phase === 'finished' || (phase === 'absent' && this.#now() - writtenAt(value) >= ORPHAN_AFTER_MS)) stale[entry] = null;
      }
      if (Object.keys(stale).length === 0) continue;
      await this.#core.patchNamespacedSecret({ name, namespace: this.#namespace, body: { data: stale } }, MERGE_PATCH);
      for (const entry of Object.keys(stale)) this.#known.delete(entry);
      this.#log.info({ secret: name, removed: Object.keys(stale).length }, 'removed the artifact credentials of evaluations that have finished or are gone');
    }
  }
}

/** When an entry was written (ms); one that cannot be read counts as written long ago. */
function writtenAt(base64: string): number {
  try {
    const at = Date.parse((JSON.parse(Buffer.from(base64, 'base64').toString('utf8')) as SourcesEntry).writtenAt);
    return Number.isNaN(at) ? 0 : at;
  } catch {
    return 0;
  }
}
