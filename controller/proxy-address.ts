// Evaluation pods have no DNS (the runs namespace's NetworkPolicy allows them
// the egress proxy and nothing else, so DNS cannot tunnel past the allow-list):
// they reach the proxy by its Service's ClusterIP. The proxy resolves the
// names they ask for. The ClusterIP never changes for the life of the Service,
// so it is read once, when the controller starts to lead.
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { createBackoff, sleep } from '../lib/backoff.ts';
import { errorFields } from '../lib/error-fields.ts';

/** The Service a proxy URL names (`http://<name>.<namespace>.svc[.cluster.local]:<port>`), or undefined for an address. */
export function proxyService(proxyUrl: string): { name: string; namespace: string } | undefined {
  const m = /^([a-z0-9-]+)\.([a-z0-9-]+)\.svc(\.cluster\.local)?$/.exec(new URL(proxyUrl).hostname);
  return m ? { name: m[1]!, namespace: m[2]! } : undefined;
}

/** `proxyUrl` with its Service name replaced by the Service's ClusterIP. */
export function withClusterIp(proxyUrl: string, clusterIp: string): string {
  const url = new URL(proxyUrl);
  url.hostname = clusterIp.includes(':') ? `[${clusterIp}]` : clusterIp;
  return url.toString().replace(/\/$/, '');
}

/**
 * Reads the proxy Service's ClusterIP, retrying (capped at 30 s) until it can,
 * with one clear log line per failure. A URL that names no Service is returned as it is.
 */
export async function resolveProxyUrl(core: k8s.CoreV1Api, proxyUrl: string, log: Logger, signal?: AbortSignal): Promise<string> {
  const service = proxyService(proxyUrl);
  if (!service) return proxyUrl;
  const backoff = createBackoff(1000, 30_000);
  for (;;) {
    try {
      const svc = await core.readNamespacedService(service);
      const ip = svc.spec?.clusterIP;
      if (ip && ip !== 'None') return withClusterIp(proxyUrl, ip);
      log.error({ service: `${service.namespace}/${service.name}` },
        'the egress proxy Service has no ClusterIP, so evaluation pods (which have no DNS) cannot reach it: the chart creates it as a ClusterIP Service; reinstall or repair it');
    } catch (err) {
      log.error({ service: `${service.namespace}/${service.name}`, ...errorFields(err) },
        'cannot read the egress proxy Service, which evaluation pods reach by its ClusterIP (they have no DNS); evaluations wait until it can: check that the Service exists and that the controller Role allows get on it');
    }
    if (signal?.aborted) throw new Error('stopped before the egress proxy Service could be read');
    await sleep(backoff.next(), signal);
  }
}
