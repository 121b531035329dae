// Informers that survive what a long-lived agent or controller meets.
// client-node's ListWatch relists on 410 Gone by itself; this adds a restart
// with jittered backoff after errors (an apiserver restart, a refused list), a
// watchdog that re-opens a watch that went silent (a half-open connection
// looks exactly like a quiet resource; the watch resumes from the last
// resourceVersion, and the API server answers 410, hence a relist, when that
// is too old), paginated lists, and optional trimming of each object to the
// fields its user reads, so that 50,000 pods do not cost 50,000 full pod
// objects in memory.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { listPages, type Page } from './list-pages.ts';
import { createBackoff } from './backoff.ts';
import type { InformerMetricsFor } from './informer-metrics.ts';
import { errorFields, errorMessage } from './error-fields.ts';

export type InformerOptions<T> = {
  name: string;
  kc: k8s.KubeConfig;
  /** watch path, e.g. /api/v1/pods */
  path: string;
  /** one page of the list; called with limit and (client-node's name for) continue */
  list: (page: { limit: number; _continue?: string }) => Promise<Page<unknown>>;
  labelSelector?: string;
  fieldSelector?: string;
  /** what is kept of each listed or watched object; the whole object by default */
  trim?: (obj: unknown) => T;
  log: Logger;
  watchSilenceMs: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  metrics?: InformerMetricsFor;
};

export type Informer<T> = {
  on(verb: 'add' | 'update' | 'delete', cb: (obj: T) => void): void;
  /** the objects as last listed and watched, by name and namespace */
  cache: k8s.ObjectCache<T>;
  /** resolves after the first complete list */
  synced: Promise<void>;
  /** complete lists so far: 1 after the first, one more for each relist */
  readonly relists: number;
  stop(): Promise<void>;
};

/** A Watch that trims every object before ListWatch caches it, and notes when the stream last spoke. */
class TrimmingWatch extends k8s.Watch {
  lastActivity = Date.now();
  private readonly trim: (o: unknown) => unknown;
  constructor(kc: k8s.KubeConfig, trim: (o: unknown) => unknown) {
    super(kc);
    this.trim = trim;
  }
  override watch(
    path: string,
    params: Record<string, string | number | boolean | undefined>,
    cb: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    this.lastActivity = Date.now();
    // bookmarks keep a quiet watch talking, so the watchdog only fires on a dead one
    return super.watch(path, { ...params, allowWatchBookmarks: true }, (phase, obj, w) => {
      this.lastActivity = Date.now();
      cb(phase, phase === 'ERROR' || phase === 'BOOKMARK' ? obj : this.trim(obj), w);
    }, done);
  }
}

/**
 * The trimmed object keeps metadata.resourceVersion: ListWatch resumes its watch
 * from the last event's version (without it every reconnect would relist) and
 * skips relisted objects whose version did not change.
 */
function keepingVersion<T>(trim: (o: unknown) => T): (o: unknown) => T {
  return (o) => {
    const t = trim(o) as { metadata?: { resourceVersion?: string } };
    const rv = (o as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    if (t.metadata && rv !== undefined) t.metadata.resourceVersion = rv;
    return t as T;
  };
}

export function startInformer<T extends { metadata?: { name?: string; namespace?: string } }>(opts: InformerOptions<T>): Informer<T> {
  const { log } = opts;
  const metrics = opts.metrics?.(opts.name);
  const trim = opts.trim ? keepingVersion(opts.trim) : (o: unknown) => o as T;
  const watch = new TrimmingWatch(opts.kc, trim as (o: unknown) => unknown);
  let relists = 0;
  let resolveSynced!: () => void;
  const synced = new Promise<void>((r) => (resolveSynced = r));
  const listAll = async (): Promise<k8s.KubernetesListObject<k8s.KubernetesObject>> => {
    const { items, resourceVersion } = await listPages(opts.list, trim);
    watch.lastActivity = Date.now();
    relists++;
    metrics?.relisted();
    // ListWatch adds the listed items right after this promise settles
    setImmediate(() => {
      resolveSynced();
      if (relists > 1) log.info({ informer: opts.name, objects: items.length }, 'informer relisted');
    });
    return { items: items as k8s.KubernetesObject[], metadata: { resourceVersion } };
  };
  const lw = new k8s.ListWatch<k8s.KubernetesObject>(opts.path, watch, listAll, false, opts.labelSelector, opts.fieldSelector);
  const backoff = createBackoff(opts.backoffBaseMs ?? 500, opts.backoffMaxMs ?? 30_000);
  let stopped = false;
  let restarting = false;
  let timer: NodeJS.Timeout | undefined;

  const restart = (why: 'error' | 'start-failed' | 'watchdog', delayMs: number, detail?: string) => {
    if (stopped || restarting) return;
    restarting = true;
    metrics?.restarted(why);
    void lw.stop();
    clearTimeout(timer);
    timer = setTimeout(() => {
      restarting = false;
      if (stopped) return;
      watch.lastActivity = Date.now();
      lw.start().catch((err: unknown) => restart('start-failed', backoff.next(), errorMessage(err)));
    }, delayMs);
    log.debug({ informer: opts.name, why, ...(detail ? { err: detail } : {}), delayMs }, 'informer restarting');
  };

  lw.on('error', (err: unknown) => {
    if (restarting || stopped) return;
    const delay = backoff.next();
    log.warn({ informer: opts.name, ...errorFields(err), retryInMs: delay }, 'watch failed; restarting the informer');
    restart('error', delay);
  });
  lw.on('connect', () => {
    watch.lastActivity = Date.now();
  });
  // a successful list or event proves the connection works again
  const healthy = () => backoff.reset();
  lw.on('add', healthy);
  lw.on('update', healthy);

  const watchdog = setInterval(() => {
    if (Date.now() - watch.lastActivity > opts.watchSilenceMs) {
      log.warn({ informer: opts.name, silentMs: Date.now() - watch.lastActivity }, 'watch silent for too long; re-opening it');
      restart('watchdog', 100);
    }
  }, Math.min(opts.watchSilenceMs / 2, 10_000));
  watchdog.unref();

  lw.start().catch((err: unknown) => restart('start-failed', backoff.next(), errorMessage(err)));

  return {
    on(verb, cb) {
      lw.on(verb, cb as (o: k8s.KubernetesObject) => void);
    },
    cache: lw as unknown as k8s.ObjectCache<T>,
    synced,
    get relists() {
      return relists;
    },
    async stop() {
      stopped = true;
      clearInterval(watchdog);
      clearTimeout(timer);
      await lw.stop();
    },
  };
}
