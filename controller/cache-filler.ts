// Keeps the shared artifact cache filled for the evaluations that need it and
// within its water marks. For each evaluation that has not finished it fetches
// the missing artifacts (once each, whoever else wants them), writes the
// outcome into status.artifacts, and it keeps the RLMeshCache status current:
// capacity, bytes used, entries, hits and misses, the last eviction and the
// node that holds the volume.
import { readFile, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import type { CustomObjectsApi, ObjectCache } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  CACHE,
  EVALUATION,
  GROUP,
  VERSION,
  API_VERSION,
  isFinished,
  type Artifact,
  type CacheStatus,
  type EvaluationStatus,
  type RLMeshCache,
  type RLMeshEvaluation,
} from '../lib/crds/types.ts';
import { planEviction } from './cache/evict.ts';
import { FetchError, type ArtifactFetcher, type ResolvedSource } from './cache/fetch.ts';
import type { ArtifactStore } from './cache/store.ts';
import { MERGE_PATCH, isNotFound } from '../lib/kube-errors.ts';
import type { Metrics } from './metrics.ts';
import type { WorkResult } from './work-queue.ts';
import { errorFields } from '../lib/error-fields.ts';
import { withCommonLabels } from '../lib/common-labels.ts';

export type FillerSettings = {
  namespace: string;
  cacheName: string;
  pvcName: string;
  accessModes: readonly string[];
  nodeName?: string;
  /** the artifact-sources Secrets as the kubelet projects them (MOUNTS.artifactSourcesDir): one file per evaluation's entry */
  sourcesDir: string;
  /** how long an evaluation's credentials may take to appear there before the evaluation fails */
  secretGraceMs: number;
  /** the chart's commonLabels (runtime config pods.commonLabels), on the RLMeshCache it creates */
  commonLabels?: Readonly<Record<string, string>>;
};

export type FillerDeps = {
  custom: CustomObjectsApi;
  evaluations: ObjectCache<RLMeshEvaluation>;
  caches: ObjectCache<RLMeshCache>;
  store: ArtifactStore;
  fetcher: ArtifactFetcher;
  metrics: Metrics;
  log: Logger;
  settings: FillerSettings;
};

type ArtifactsState = NonNullable<EvaluationStatus['artifacts']>;


export function humanBytes(n: number): string {
  const units = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n}` : `${v.toFixed(v >= 100 ? 0 : 1).replace(/\.0$/, '')}${units[i]}`;
}

export class CacheFiller {
  readonly #d: FillerDeps;
  readonly #counted = new Set<string>();
  #hits = 0;
  #misses = 0;
  #lastEviction: CacheStatus['lastEviction'];
  #lastStatus = '';

  constructor(deps: FillerDeps) {
    this.#d = deps;
  }

  /** Creates the RLMeshCache object from the runtime config when the chart did not. */
  async ensureCacheObject(): Promise<void> {
    const s = this.#d.settings;
    const spec = { pvcName: s.pvcName, namespace: s.namespace, accessModes: [...s.accessModes] };
    try {
      const kept = (await this.#d.custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: CACHE.plural, name: s.cacheName })) as RLMeshCache;
      // Kept on uninstall, the object may describe an earlier install's PVC: helm adopts it at the next
      // install without applying the new values to it (it patches custom resources two-way, from the
      // rendered object to itself). Placement follows this spec, so it is made to say what this install says.
      const was = { pvcName: kept.spec?.pvcName, namespace: kept.spec?.namespace, accessModes: kept.spec?.accessModes };
      if (JSON.stringify(was) !== JSON.stringify(spec)) {
        await this.#d.custom.patchClusterCustomObject({ group: GROUP, version: VERSION, plural: CACHE.plural, name: s.cacheName, body: { spec } }, MERGE_PATCH);
        this.#d.log.info({ cache: s.cacheName, was, now: spec }, 'the RLMeshCache object described another install of the cache; set to this one');
      }
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await this.#d.custom
        .createClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: CACHE.plural,
          body: {
            apiVersion: API_VERSION,
            kind: CACHE.kind,
            metadata: { name: s.cacheName, labels: withCommonLabels({ 'app.kubernetes.io/part-of': 'rlmesh-runtime' }, s.commonLabels) },
            spec: { pvcName: s.pvcName, namespace: s.namespace, accessModes: [...s.accessModes] },
          },
        })
        .catch((e: unknown) => {
          if ((e as { code?: number }).code !== 409) throw e;
        });
      this.#d.log.info({ cache: s.cacheName }, 'created the RLMeshCache object');
    }
  }

  /** Forgets a deleted evaluation's hit/miss bookkeeping. */
  forget(ev: RLMeshEvaluation): void {
    for (const a of ev.spec.artifacts ?? []) this.#counted.delete(`${ev.metadata.uid}/${a.sha256}`);
  }

  #cache(): RLMeshCache | undefined {
    return this.#d.caches.get(this.#d.settings.cacheName);
  }

  async capacityBytes(): Promise<number> {
    const spec = this.#cache()?.spec;
    if (spec?.capacityBytes) return spec.capacityBytes;
    const fs = await statfs(this.#d.store.root);
    return fs.blocks * fs.bsize;
  }

  #policy(): { high: number; low: number } {
    const spec = this.#cache()?.spec;
    return { high: spec?.highWaterMarkPercent ?? 90, low: spec?.lowWaterMarkPercent ?? 75 };
  }

  /** Digests that an evaluation which has not finished still needs: never evicted. */
  inUse(): Set<string> {
    const out = new Set<string>();
    for (const ev of this.#d.evaluations.list(this.#d.settings.namespace)) {
      if (isFinished(ev.status?.phase) || ev.metadata.deletionTimestamp) continue;
      for (const a of ev.spec.artifacts ?? []) out.add(a.sha256);
    }
    return out;
  }

  reconcile = async (key: string): Promise<WorkResult> => {
    const [namespace, name] = key.split('/') as [string, string];
    const ev = this.#d.evaluations.get(name, namespace);
    if (!ev || ev.metadata.deletionTimestamp || ev.spec.cancelled || isFinished(ev.status?.phase)) return;
    const artifacts = ev.spec.artifacts ?? [];
    if (artifacts.length === 0 || ev.status?.artifacts?.state === 'Failed') return;

    const capacity = await this.capacityBytes();
    const tooLarge = artifacts.find((a) => a.sizeBytes > capacity);
    if (tooLarge) {
      return this.#writeState(ev, {
        state: 'Failed',
        reason: 'TooLarge',
        message: `artifact ${tooLarge.name} is ${humanBytes(tooLarge.sizeBytes)} (${tooLarge.sizeBytes} bytes), larger than the whole artifact cache (${humanBytes(capacity)}); enlarge the cache PVC (artifactCache.storage.sharedPvc) or use a smaller artifact`,
      });
    }

    const missing: Artifact[] = [];
    for (const a of artifacts) {
      const present = await this.#d.store.has(a.sha256);
      const counted = `${ev.metadata.uid}/${a.sha256}`;
      if (!this.#counted.has(counted)) {
        this.#counted.add(counted);
        this.scheduleHousekeeping(1000);
        if (present) {
          this.#hits++;
          this.#d.metrics.cacheHits.inc();
        } else {
          this.#misses++;
          this.#d.metrics.cacheMisses.inc();
        }
      }
      if (present) await this.#d.store.touch(a.sha256);
      else missing.push(a);
    }
    if (missing.length > 0) {
      await this.#writeState(ev, { state: 'Fetching', reason: 'Fetching', message: `fetching ${missing.map((a) => a.name).join(', ')} into the artifact cache` });
      await this.#makeRoom(missing.reduce((n, a) => n + a.sizeBytes, 0));
      try {
        await Promise.all(missing.map(async (a) => this.#d.fetcher.fetch(a, await this.#resolve(ev, a))));
      } catch (err) {
        if (err instanceof FetchError) return this.#writeState(ev, { state: 'Failed', reason: err.reason, message: err.message });
        throw err;
      }
      this.scheduleHousekeeping();
    }
    return this.#writeState(ev, { state: 'Ready', reason: 'Cached', message: `${artifacts.length} artifact(s) in the cache` });
  };

  async #resolve(ev: RLMeshEvaluation, a: Artifact): Promise<ResolvedSource> {
    const urlRef = a.source.httpsUrlSecretRef;
    if (urlRef) {
      const data = await this.#sourceSecret(ev, a, urlRef.name);
      const url = data?.get(urlRef.key);
      if (!url?.startsWith('https://')) {
        const what = !data ? 'does not exist' : url === undefined ? `has no key ${urlRef.key}` : `holds in ${urlRef.key} a URL that is not https://`;
        throw new FetchError(
          'CredentialsMissing',
          `the credentials entry ${urlRef.name} (artifact-sources Secrets in ${this.#namespace(ev)}) named by artifact ${a.name} ${what}; the agent writes the presigned URL there from the assignment, so the assignment must be delivered again`,
        );
      }
      return { kind: 'https', url };
    }
    const s3 = a.source.s3!;
    const base = { kind: 's3' as const, region: s3.region ?? 'us-east-1', bucket: s3.bucket, key: s3.key, ...(s3.endpoint ? { endpoint: s3.endpoint } : {}) };
    const ref = s3.credentialsSecretRef?.name;
    if (!ref) {
      throw new FetchError(
        'CredentialsMissing',
        `artifact ${a.name} is an S3 object without source.s3.credentialsSecretRef; the assignment's temporary credentials must reach the cache filler through the artifact-sources Secrets the agent writes, never from values or the controller's own environment`,
      );
    }
    const data = await this.#sourceSecret(ev, a, ref);
    const accessKeyId = data?.get('accessKeyId');
    const secretAccessKey = data?.get('secretAccessKey');
    if (!accessKeyId || !secretAccessKey) {
      throw new FetchError(
        'CredentialsMissing',
        `the credentials entry ${ref} (artifact-sources Secrets in ${this.#namespace(ev)}) named by artifact ${a.name} ${data ? 'lacks the keys accessKeyId and secretAccessKey' : 'does not exist'}; the agent writes it from the assignment before it creates the evaluation, so the assignment must be delivered again`,
      );
    }
    const sessionToken = data?.get('sessionToken');
    return { ...base, credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } };
  }

  #namespace(ev: RLMeshEvaluation): string {
    return ev.metadata.namespace ?? this.#d.settings.namespace;
  }

  /**
   * The keys of the entry an artifact's source names, from the artifact-sources Secrets the
   * kubelet projects into this pod (agent/artifact-sources.ts), or undefined when it is not
   * there. The agent writes it before the evaluation, and the kubelet refreshes the volume
   * within its sync period (a minute by default), so while the evaluation is young its
   * absence is retried.
   */
  async #sourceSecret(ev: RLMeshEvaluation, a: Artifact, name: string): Promise<Map<string, string> | undefined> {
    const namespace = this.#namespace(ev);
    // a Secret key, so a name that is not one (or that reaches the volume's own ..data links) names nothing
    let data: Record<string, string> | undefined;
    if (/^[-._a-zA-Z0-9]+$/.test(name) && !name.startsWith('..')) {
      try {
        data = (JSON.parse(await readFile(join(this.#d.settings.sourcesDir, name), 'utf8')) as { data?: Record<string, string> }).data ?? {};
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read the credentials ${name} for artifact ${a.name} from ${this.#d.settings.sourcesDir}: ${(err as Error).message}`);
      }
    }
    const ageMs = Date.now() - new Date(ev.metadata.creationTimestamp ?? Date.now()).getTime();
    if (!data && ageMs < this.#d.settings.secretGraceMs) {
      throw new Error(`the credentials ${name} for artifact ${a.name} are not in ${this.#d.settings.sourcesDir} yet (artifact-sources Secrets in ${namespace}); waiting for the agent to write them and the kubelet to project them`);
    }
    return data && new Map(Object.entries(data));
  }

  async #writeState(ev: RLMeshEvaluation, next: Omit<ArtifactsState, 'updatedAt'>): Promise<WorkResult> {
    const cur = ev.status?.artifacts;
    if (cur && cur.state === next.state && cur.reason === next.reason && cur.message === next.message) return;
    const artifacts: ArtifactsState = { ...next, updatedAt: new Date().toISOString() };
    try {
      // status.artifacts belongs to the filler; a merge patch leaves the reconciler's fields alone
      await this.#d.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: ev.metadata.namespace!, plural: EVALUATION.plural, name: ev.metadata.name, body: { status: { artifacts } } },
        MERGE_PATCH,
      );
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    ev.status = { ...ev.status, artifacts };
    if (next.state === 'Failed') this.#d.log.warn({ evaluation: ev.metadata.name, reason: next.reason }, next.message ?? '');
    return;
  }

  async #makeRoom(incomingBytes: number): Promise<void> {
    await this.housekeeping(incomingBytes);
  }

  #housekeepingTimer: NodeJS.Timeout | undefined;
  scheduleHousekeeping(delayMs = 200): void {
    if (this.#housekeepingTimer) return;
    this.#housekeepingTimer = setTimeout(() => {
      this.#housekeepingTimer = undefined;
      this.housekeeping().catch((err: unknown) => this.#d.log.warn(errorFields(err), 'cache housekeeping failed; retrying on the next pass'));
    }, delayMs);
  }

  #running: Promise<void> = Promise.resolve();
  /** Evicts above the high-water mark (never in-use artifacts) and writes the RLMeshCache status. Serialized. */
  housekeeping(incomingBytes = 0): Promise<void> {
    const run = this.#running.then(() => this.#housekeep(incomingBytes));
    this.#running = run.catch(() => {});
    return run;
  }

  async #housekeep(incomingBytes: number): Promise<void> {
    const capacity = await this.capacityBytes();
    const { high, low } = this.#policy();
    let entries = await this.#d.store.entries();
    const plan = planEviction(entries, { capacityBytes: capacity, highWaterMarkPercent: high, lowWaterMarkPercent: low, inUse: this.inUse(), incomingBytes });
    if (plan.victims.length > 0) {
      let freed = 0;
      for (const v of plan.victims) {
        await this.#d.store.remove(v.digest);
        freed += v.size;
      }
      this.#d.metrics.cacheEvictions.inc(plan.victims.length);
      this.#d.metrics.cacheEvictedBytes.inc(freed);
      this.#lastEviction = { time: new Date().toISOString(), evicted: plan.victims.length, freedBytes: freed };
      this.#d.log.info({ evicted: plan.victims.map((v) => v.digest), freedBytes: freed, capacity, high, low }, 'evicted least recently used artifacts');
      entries = await this.#d.store.entries();
    }
    const used = entries.reduce((n, e) => n + e.size, 0);
    this.#d.metrics.cacheBytes.set(used);
    this.#d.metrics.cacheCapacityBytes.set(capacity);
    this.#d.metrics.cacheEntries.set(entries.length);
    const total = this.#hits + this.#misses;
    const status: CacheStatus = {
      phase: plan.full ? 'Full' : 'Ready',
      capacity: humanBytes(capacity),
      used: humanBytes(used),
      capacityBytes: capacity,
      usedBytes: used,
      entries: entries.length,
      hits: this.#hits,
      misses: this.#misses,
      hitRatio: total === 0 ? '0.00' : (this.#hits / total).toFixed(2),
      ...(this.#lastEviction ? { lastEviction: this.#lastEviction } : {}),
      ...(this.#d.settings.nodeName ? { nodeName: this.#d.settings.nodeName } : {}),
      message: plan.full
        ? `above the ${high}% high-water mark and every remaining artifact is used by an evaluation that has not finished; new artifacts wait for those evaluations or a larger PVC`
        : `${entries.length} artifact(s), ${humanBytes(used)} of ${humanBytes(capacity)}`,
    };
    const fingerprint = JSON.stringify(status);
    if (fingerprint === this.#lastStatus) return;
    await this.#d.custom.patchClusterCustomObjectStatus(
      { group: GROUP, version: VERSION, plural: CACHE.plural, name: this.#d.settings.cacheName, body: { status: { ...status, updatedAt: new Date().toISOString() } } },
      MERGE_PATCH,
    );
    this.#lastStatus = fingerprint;
  }
}
