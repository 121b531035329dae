// The cache-filler role, once it leads: the cache directory on the PVC, the
// fetcher, informers on evaluations and caches, and one work queue filling each
// evaluation's artifacts; housekeeping (eviction) every 30 s and on release.
import { isFinished } from '../lib/crds/types.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { ArtifactFetcher } from './cache/fetch.ts';
import { ArtifactStore } from './cache/store.ts';
import { CacheFiller } from './cache-filler.ts';
import { keyOf } from './informers.ts';
import { meteredQueue, type RoleContext } from './role-context.ts';

export async function startFillerRole(c: RoleContext): Promise<void> {
  const { custom, config, log, metrics, flags } = c;
  const runs = config.runsNamespace;
  const store = new ArtifactStore(flags['cache-dir']);
  try {
    await store.init();
  } catch (err) {
    log.fatal({ cacheDir: flags['cache-dir'] }, `cannot use the artifact cache directory: ${errorMessage(err)}; mount the cache PVC read-write there (or pass --cache-dir)`);
    process.exit(1);
  }
  const fetcher = new ArtifactFetcher(store, log, metrics, {
    attempts: flags['fetch-attempts'],
    baseDelayMs: flags['fetch-retry-ms'],
    chunkBytes: flags['chunk-bytes'],
    rangedThresholdBytes: flags['ranged-threshold-bytes'],
  });
  let filler: CacheFiller | undefined = undefined;
  const q = meteredQueue(c, 'artifacts', (key) => filler!.reconcile(key));
  const evaluations = c.informers.evaluations((ev, verb) => {
    q.add(keyOf(ev));
    if (verb === 'delete') filler?.forget(ev);
    // a finished or deleted evaluation releases its artifacts for eviction
    if (verb === 'delete' || isFinished(ev.status?.phase)) filler?.scheduleHousekeeping();
  });
  const caches = c.informers.caches(() => filler?.scheduleHousekeeping());
  c.onStop(() => evaluations.stop(), () => caches.stop(), () => q.stop());
  await Promise.all([evaluations.synced, caches.synced]);
  filler = new CacheFiller({
    custom,
    evaluations: evaluations.cache,
    caches: caches.cache,
    store,
    fetcher,
    metrics,
    log,
    settings: {
      namespace: runs,
      cacheName: config.artifactCache.cacheName,
      pvcName: config.artifactCache.pvcName,
      accessModes: config.artifactCache.accessModes,
      ...(c.nodeName ? { nodeName: c.nodeName } : {}),
      sourcesDir: flags['sources-dir'],
      secretGraceMs: flags['secret-grace-seconds'] * 1000,
      commonLabels: config.pods?.commonLabels,
    },
  });
  await filler.ensureCacheObject();
  await filler.housekeeping();
  const tick = setInterval(() => filler!.scheduleHousekeeping(0), 30_000);
  tick.unref();
  c.onStop(() => clearInterval(tick));
  q.start();
  for (const ev of evaluations.cache.list(runs)) q.add(keyOf(ev));
  log.info({ namespace: runs, cacheDir: store.root, nodeName: c.nodeName }, 'artifact cache filler started');
}
