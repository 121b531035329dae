// network.apiServerAddresses: where the chart's NetworkPolicies let the
// Kubernetes API's ports lead. helm install reads them from the cluster (the
// chart's rlmesh.apiServerAddresses: the endpoints of Service default/kubernetes
// and its ClusterIPs); a render that cannot read the cluster (helm template, a
// GitOps tool) needs them as a value, which this check prints. Given a value, it
// fails when an address the API answers on is outside it: those pods would lose
// the API.
import * as k8s from '@kubernetes/client-node';
import ipaddr from 'ipaddr.js';
import type { CheckResult, PreflightContext } from '../types.ts';

const ID = 'api-addresses';

/** The API's addresses as the chart reads them at install: each endpoint of Service default/kubernetes and its ClusterIPs, as /32 or /128. */
export async function liveApiServerAddresses(kc: k8s.KubeConfig): Promise<string[]> {
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const [slices, service] = await Promise.all([
    discovery.listNamespacedEndpointSlice({ namespace: 'default', labelSelector: 'kubernetes.io/service-name=kubernetes' }),
    core.readNamespacedService({ namespace: 'default', name: 'kubernetes' }),
  ]);
  const ips = [
    ...slices.items.filter((s) => s.addressType !== 'FQDN').flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses)),
    ...(service.spec?.clusterIPs ?? (service.spec?.clusterIP ? [service.spec.clusterIP] : [])),
  ].filter((ip) => ip && ip !== 'None');
  return [...new Set(ips.map((ip) => `${ip}/${ip.includes(':') ? 128 : 32}`))];
}

/** The line to add to helm install / helm template (both charts take it). */
export const apiServerAddressesLine = (cidrs: string[]): string => `--set network.apiServerAddresses={${cidrs.join(',')}}`;

/** Which of `addresses` (each a /32 or /128) no CIDR of `cidrs` contains. */
export function outside(addresses: string[], cidrs: string[]): string[] {
  const ranges = cidrs.flatMap((c) => {
    try {
      return [ipaddr.parseCIDR(c)];
    } catch {
      return [];
    }
  });
  return addresses.filter((a) => {
    const ip = ipaddr.parse(a.split('/')[0]!);
    return !ranges.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits));
  });
}

export function apiServerAddressesVerdict(live: string[], configured: string[]): CheckResult {
  const line = apiServerAddressesLine(live);
  if (live.length === 0) {
    return {
      id: ID,
      verdict: 'fail',
      found: 'Service default/kubernetes has no endpoint addresses and no ClusterIP',
      fix: 'The chart cannot tell where the Kubernetes API is: set network.apiServerAddresses to the CIDRs your pods reach it at.',
    };
  }
  if (configured.length === 0) {
    return {
      id: ID,
      verdict: 'pass',
      found: `the Kubernetes API is at ${live.join(', ')} (EndpointSlice and Service default/kubernetes); helm install and helm upgrade read them`,
      fix: `Rendering with helm template or a GitOps tool, which cannot read the cluster? Add ${line} (to both charts).`,
    };
  }
  const missing = outside(live, configured);
  if (missing.length) {
    return {
      id: ID,
      verdict: 'fail',
      found: `network.apiServerAddresses (${configured.join(', ')}) lacks ${missing.join(', ')}, where the Kubernetes API answers: the chart's pods would not reach it there`,
      fix: `Set ${line} instead.`,
    };
  }
  return { id: ID, verdict: 'pass', found: `network.apiServerAddresses (${configured.join(', ')}) holds every address of the Kubernetes API (${live.join(', ')})`, fix: `When the API moves, update it: ${line} is today's.` };
}

export async function checkApiServerAddresses(ctx: PreflightContext): Promise<CheckResult> {
  return apiServerAddressesVerdict(await liveApiServerAddresses(ctx.kc), ctx.settings.apiServerAddresses ?? []);
}
