// Informers from @kubernetes/client-node, kept alive: a failed list or watch is
// restarted with backoff, a 410 Gone relists (ListWatch clears its resourceVersion),
// and a watchdog relists when the watch has been silent for too long, because a
// half-open connection otherwise looks exactly like a quiet resource.
import { makeInformer, type Informer, type KubeConfig, type KubernetesListObject, type KubernetesObject, type ObjectCache } from '@kubernetes/client-node';
import type { Logger } from 'pino';

export type KeptInformer<T extends KubernetesObject> = {
  cache: ObjectCache<T>;
  synced: Promise<void>;
  stop: () => Promise<void>;
  relist: (why: string) => void;
};

export type InformerOptions<T extends KubernetesObject> = {
  kc: KubeConfig;
  name: string;
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  onChange: (obj: T, verb: 'add' | 'update' | 'delete') => void;
  log: Logger;
  watchdogMs?: number;
  maxBackoffMs?: number;
  onRelist?: () => void;
};

// ListWatch keeps these private; the watchdog needs them to force a relist.
type ListWatchInternals = { resourceVersion: string; request?: unknown; _stop: () => void };

export function startInformer<T extends KubernetesObject>(opts: InformerOptions<T>): KeptInformer<T> {
  const watchdogMs = opts.watchdogMs ?? 300_000;
  const maxBackoffMs = opts.maxBackoffMs ?? 30_000;
  let lastActivity = Date.now();
  let failures = 0;
  let stopped = false;
  let restartTimer: NodeJS.Timeout | undefined;
  let markSynced: () => void = () => {};
  const synced = new Promise<void>((resolve) => (markSynced = resolve));

  const list = async (): Promise<KubernetesListObject<T>> => {
    const result = await opts.list();
    lastActivity = Date.now();
    failures = 0;
    opts.onRelist?.();
    markSynced();
    return result;
  };
  const informer: Informer<T> & ObjectCache<T> = makeInformer(opts.kc, opts.path, list, opts.labelSelector);
  const internals = informer as unknown as ListWatchInternals;

  const touch = (verb: 'add' | 'update' | 'delete') => (obj: T) => {
    lastActivity = Date.now();
    opts.onChange(obj, verb);
  };
  informer.on('add', touch('add'));
  informer.on('update', touch('update'));
  informer.on('delete', touch('delete'));
  informer.on('connect', () => {
    lastActivity = Date.now();
  });
  informer.on('error', (err: unknown) => {
    if (stopped) return;
    failures++;
    const delay = Math.min(maxBackoffMs, 500 * 2 ** Math.min(failures - 1, 10));
    const e = err as { message?: string; name?: string };
    if (e?.name !== 'AbortError') {
      opts.log.warn({ informer: opts.name, err: e?.message ?? String(err), retryInMs: delay }, 'list/watch failed; restarting with backoff');
    }
    clearTimeout(restartTimer);
    restartTimer = setTimeout(() => {
      if (!stopped) void informer.start();
    }, delay);
  });

  const relist = (why: string): void => {
    if (stopped) return;
    if (!internals.request) {
      // the watch is still connecting; aborting now would abort nothing
      setTimeout(() => relist(why), 500).unref();
      return;
    }
    opts.log.info({ informer: opts.name, why }, 'relisting');
    lastActivity = Date.now();
    internals.resourceVersion = '';
    // aborting the watch reports an AbortError, and the error handler restarts it: with
    // an empty resourceVersion, the restart lists first
    internals._stop();
  };

  const watchdog = setInterval(() => {
    const silentMs = Date.now() - lastActivity;
    if (silentMs > watchdogMs) relist(`watch silent for ${Math.round(silentMs / 1000)}s`);
  }, Math.max(250, Math.min(watchdogMs / 4, 10_000)));
  watchdog.unref();

  void informer.start();
  return {
    cache: informer,
    synced,
    relist,
    stop: async () => {
      stopped = true;
      clearInterval(watchdog);
      clearTimeout(restartTimer);
      await informer.stop();
    },
  };
}
