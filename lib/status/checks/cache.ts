// The artifact cache: each RLMeshCache's phase and use, as its filler wrote them
// (`namespace`: the runs namespace, where its filler and PVC live).
import * as k8s from '@kubernetes/client-node';
import { CACHE, GROUP, VERSION, type RLMeshCache } from '../../crds/types.ts';
import { runsNamespace } from '../reads.ts';
import type { CheckResult, StatusContext } from '../types.ts';

export function cacheVerdict(namespace: string, caches: RLMeshCache[]): CheckResult {
  const id = 'cache';
  if (!caches.length) return { id, verdict: 'warn', found: 'no RLMeshCache', fix: 'Evaluations with artifacts need the cache: helm upgrade the release so the chart puts it back.' };
  const text = caches.map((c) => {
    const s = c.status ?? {};
    const use = s.usedBytes !== undefined && s.capacityBytes ? ` ${s.used ?? s.usedBytes} of ${s.capacity ?? s.capacityBytes} (${Math.round((100 * s.usedBytes) / s.capacityBytes)}%)` : '';
    const hits = s.hitRatio ? `, hit ratio ${s.hitRatio}` : '';
    return `${c.metadata.name}: ${s.phase ?? 'no status yet'}${use}, ${s.entries ?? 0} artifact(s)${hits}${s.message && s.phase !== 'Ready' ? ` (${s.message})` : ''}`;
  });
  const found = text.join('; ');
  const phases = caches.map((c) => c.status?.phase);
  if (phases.includes('Failed')) return { id, verdict: 'fail', found, fix: `The cache volume is unusable: kubectl -n ${namespace} describe rlmeshcache and the filler's log (kubectl -n ${namespace} logs deployment/rlmesh-artifact-cache-filler) say why.` };
  if (phases.includes('Full')) return { id, verdict: 'warn', found, fix: 'Nothing is evictable: new artifacts wait. Raise artifactCache.size (helm upgrade --reuse-values) or let running evaluations finish.' };
  if (phases.some((p) => p !== 'Ready')) return { id, verdict: 'warn', found, fix: `The filler has not made the volume ready yet: kubectl -n ${namespace} get pods,pvc.` };
  return { id, verdict: 'pass', found, fix: 'Nothing to do.' };
}

export async function checkCache(ctx: StatusContext): Promise<CheckResult> {
  const namespace = await runsNamespace(ctx);
  // cluster-scoped
  const list = (await ctx.kc.makeApiClient(k8s.CustomObjectsApi).listClusterCustomObject({ group: GROUP, version: VERSION, plural: CACHE.plural })) as { items: RLMeshCache[] };
  return cacheVerdict(namespace, list.items);
}
