// network.dnsPeers must select the cluster's DNS resolver, or every lookup
// from rlmesh-runs and the runtime is dropped once the NetworkPolicies apply.
// Selector peers are evaluated against the live pods and namespaces, as the
// CNI would; ipBlock peers must contain a resolver pod, a node-local DNS
// address, or (weaker) the kube-dns Service IP.
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import ipaddr from 'ipaddr.js';
import { isForbidden, isNotFound } from '../../kube-errors.ts';
import { listPages } from '../../list-pages.ts';
import { describePeer, matchesSelector, type NetworkPolicyPeer } from '../label-selector.ts';
import type { CheckResult, PreflightContext } from '../types.ts';
import { errorMessage } from '../../error-fields.ts';

const ID = 'dns-peers';

export type PodView = { namespace: string; name: string; labels: Record<string, string>; ip?: string; running: boolean; udpPorts: number[]; args: string[] };
export type NamespaceView = { name: string; labels: Record<string, string> };
export type DnsFacts = {
  pods: PodView[];
  namespaces: NamespaceView[];
  kubeDnsServiceIp?: string;
  /** namespaces the NetworkPolicies live in: a peer without namespaceSelector selects pods there */
  policyNamespaces: string[];
  /** inside the cluster: the nameservers of this pod's /etc/resolv.conf */
  podNameservers?: string[];
};

const DNS_LABELS: [string, string][] = [
  ['k8s-app', 'kube-dns'],
  ['k8s-app', 'coredns'],
  ['k8s-app', 'node-local-dns'],
  ['dns.operator.openshift.io/daemonset-dns', 'default'],
];

/** A pod that serves DNS: labelled as the usual resolvers are, or declaring a container port named dns. */
export const looksLikeResolver = (p: PodView): boolean => DNS_LABELS.some(([k, v]) => p.labels[k] === v) || p.udpPorts.length > 0;

export function podView(p: k8s.V1Pod): PodView {
  const containers = p.spec?.containers ?? [];
  return {
    namespace: p.metadata?.namespace ?? '',
    name: p.metadata?.name ?? '',
    labels: p.metadata?.labels ?? {},
    ip: p.spec?.hostNetwork ? undefined : p.status?.podIP,
    running: p.status?.phase === 'Running',
    udpPorts: containers.flatMap((c) => (c.ports ?? []).filter((port) => (port.protocol ?? 'TCP') === 'UDP' && (/dns/i.test(port.name ?? '') || [53, 5353].includes(port.containerPort))).map((port) => port.containerPort)),
    args: containers.flatMap((c) => [...(c.command ?? []), ...(c.args ?? [])]),
  };
}

/** Addresses node-local DNS caches listen on (`-localip 169.254.20.10,10.96.0.10`). */
export function nodeLocalAddresses(pods: PodView[]): string[] {
  const out: string[] = [];
  for (const p of pods.filter((p) => p.labels['k8s-app'] === 'node-local-dns')) {
    const i = p.args.findIndex((a) => a === '-localip' || a.startsWith('-localip='));
    const value = i < 0 ? undefined : p.args[i]!.includes('=') ? p.args[i]!.split('=')[1] : p.args[i + 1];
    out.push(...(value ?? '').split(',').filter(Boolean));
  }
  return out;
}

function isLinkLocal(ip: string): boolean {
  try {
    return ipaddr.process(ip).range() === 'linkLocal';
  } catch {
    return false;
  }
}

/** nameserver lines of a resolv.conf */
export function resolvConfNameservers(text: string): string[] {
  return text
    .split('\n')
    .map((l) => /^\s*nameserver\s+(\S+)/.exec(l)?.[1])
    .filter((ip): ip is string => ip !== undefined);
}

function inBlock(ip: string, block: NonNullable<NetworkPolicyPeer['ipBlock']>): boolean {
  try {
    const addr = ipaddr.process(ip);
    const [net, bits] = ipaddr.parseCIDR(block.cidr);
    if (addr.kind() !== net.kind() || !addr.match([net, bits] as [typeof addr, number])) return false;
    return !(block.except ?? []).some((e) => {
      const [en, eb] = ipaddr.parseCIDR(e);
      return addr.kind() === en.kind() && addr.match([en, eb] as [typeof addr, number]);
    });
  } catch {
    return false;
  }
}

const nameOnly = (names: string[]): NamespaceView[] => names.map((name) => ({ name, labels: { 'kubernetes.io/metadata.name': name } }));

/** The namespaces a peer's pods may be in: those its namespaceSelector matches, else the policies' own. */
function peerNamespaces(peer: NetworkPolicyPeer, namespaces: NamespaceView[], policyNamespaces: string[]): Set<string> {
  if (!peer.namespaceSelector) return new Set(policyNamespaces);
  return new Set(namespaces.filter((n) => matchesSelector(peer.namespaceSelector!, n.labels)).map((n) => n.name));
}

const podSelected = (peer: NetworkPolicyPeer, p: PodView): boolean => !peer.podSelector || matchesSelector(peer.podSelector, p.labels);

function selectedPods(peer: NetworkPolicyPeer, facts: DnsFacts): PodView[] {
  const namespaces = peerNamespaces(peer, facts.namespaces, facts.policyNamespaces);
  return facts.pods.filter((p) => namespaces.has(p.namespace) && podSelected(peer, p));
}

/** A peer that would select this resolver pod, for the fix sentence. */
export function suggestedPeer(p: PodView): string {
  const label = DNS_LABELS.find(([k, v]) => p.labels[k] === v) ?? Object.entries(p.labels)[0];
  const pods = label ? `, podSelector: { matchLabels: { ${label[0]}: ${label[1]} } }` : '';
  return `{ namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: ${p.namespace} } }${pods} }`;
}

export function dnsVerdict(peers: NetworkPolicyPeer[], dnsPorts: number[], facts: DnsFacts): CheckResult {
  const resolvers = facts.pods.filter((p) => p.running && looksLikeResolver(p));
  // a link-local nameserver in the pod's resolv.conf is a node-local cache (not translated by a Service)
  const nodeLocal = [...new Set([...nodeLocalAddresses(facts.pods), ...(facts.podNameservers ?? []).filter(isLinkLocal)])];
  const lines: string[] = [];
  let serving = 0;
  let wrongPorts: number[] = [];
  let serviceIpOnly = false;
  for (const [i, peer] of peers.entries()) {
    const name = `peer ${i + 1} (${describePeer(peer)})`;
    if (peer.ipBlock) {
      const pods = resolvers.filter((r) => r.ip && inBlock(r.ip, peer.ipBlock!));
      const local = nodeLocal.filter((ip) => inBlock(ip, peer.ipBlock!));
      if (pods.length || local.length) {
        serving++;
        lines.push(`${name} contains ${[...pods.map((p) => `resolver pod ${p.namespace}/${p.name} (${p.ip})`), ...local.map((ip) => `node-local DNS address ${ip}`)].join(', ')}`);
      } else if (facts.kubeDnsServiceIp && inBlock(facts.kubeDnsServiceIp, peer.ipBlock)) {
        serviceIpOnly = true;
        lines.push(`${name} contains only the kube-dns Service IP ${facts.kubeDnsServiceIp}`);
      } else {
        lines.push(`${name} contains no resolver address`);
      }
      continue;
    }
    const matched = selectedPods(peer, facts).filter((p) => p.running);
    const dns = matched.filter(looksLikeResolver);
    if (matched.length === 0) {
      lines.push(`${name} matches no running pod`);
    } else if (dns.length === 0) {
      lines.push(`${name} matches ${matched.length} pod(s), none a DNS server (${matched.slice(0, 3).map((p) => `${p.namespace}/${p.name}`).join(', ')})`);
    } else {
      const onPort = dns.filter((p) => p.udpPorts.length === 0 || p.udpPorts.some((port) => dnsPorts.includes(port)));
      if (onPort.length) {
        serving++;
        lines.push(`${name} matches resolver pod(s) ${onPort.slice(0, 3).map((p) => `${p.namespace}/${p.name}`).join(', ')} on port ${dnsPorts.join('/')}`);
      } else {
        wrongPorts = [...new Set(dns.flatMap((p) => p.udpPorts))];
        lines.push(`${name} matches resolver pod(s) ${dns.slice(0, 3).map((p) => `${p.namespace}/${p.name}`).join(', ')}, which listen on ${wrongPorts.join('/')}, not network.dnsPorts ${dnsPorts.join('/')}`);
      }
    }
  }
  const found = lines.join('; ');
  if (serving > 0) return { id: ID, verdict: 'pass', found, fix: 'Nothing to do.' };
  if (wrongPorts.length) {
    return { id: ID, verdict: 'fail', found, fix: `Set network.dnsPorts=[${wrongPorts.join(',')}], the ports the resolver pods listen on (NetworkPolicy sees the port after the Service translates it).` };
  }
  if (serviceIpOnly) {
    return {
      id: ID,
      verdict: 'warn',
      found: `${found}: most CNIs apply NetworkPolicy after the Service address is translated to a resolver pod, so this peer may let no lookup through`,
      fix: resolvers[0] ? `Set network.dnsPeers to the resolver pods instead, e.g. ${suggestedPeer(resolvers[0])}.` : 'Set network.dnsPeers to a selector of the resolver pods instead of the Service IP.',
    };
  }
  const seen = resolvers.length ? `; resolver pods in the cluster: ${resolvers.slice(0, 3).map((p) => `${p.namespace}/${p.name}`).join(', ')}` : '; no resolver pod found in the cluster';
  return {
    id: ID,
    verdict: 'fail',
    found: `${found || 'network.dnsPeers is empty'}${seen}`,
    fix: resolvers[0]
      ? `Set network.dnsPeers to your resolver's peers, e.g. [${suggestedPeer(resolvers[0])}], or the pods would get no DNS under the chart's NetworkPolicies.`
      : "Set network.dnsPeers to your resolver's NetworkPolicy peers (its pods' namespace and labels, or an ipBlock of a node-local DNS address), or the pods would get no DNS under the chart's NetworkPolicies.",
  };
}

export async function gatherDnsFacts(ctx: PreflightContext): Promise<DnsFacts> {
  const core = ctx.kc.makeApiClient(k8s.CoreV1Api);
  let namespaces: NamespaceView[] | undefined;
  try {
    namespaces = (await core.listNamespace()).items.map((n) => ({ name: n.metadata?.name ?? '', labels: n.metadata?.labels ?? {} }));
  } catch (err) {
    if (!isForbidden(err)) throw err;
  }
  // Only the pods the verdict can use are kept: those a peer selects and those
  // that look like resolvers. A cluster's other pods (tens of thousands) are paged past.
  const policyNamespaces = [ctx.settings.namespace, ctx.settings.runsNamespace];
  const peers = ctx.settings.dnsPeers.filter((p) => p.namespaceSelector || p.podSelector);
  // each peer's namespaces once; without list rights, a namespace's name is all a selector can match
  const peerNs = namespaces && peers.map((peer) => peerNamespaces(peer, namespaces!, policyNamespaces));
  const inPeerNamespace = (i: number, ns: string): boolean => (peerNs ? peerNs[i]!.has(ns) : peerNamespaces(peers[i]!, nameOnly([ns]), policyNamespaces).has(ns));
  const relevant = (p: PodView): boolean => looksLikeResolver(p) || peers.some((peer, i) => inPeerNamespace(i, p.namespace) && podSelected(peer, p));
  const { items: pods } = await listPages((page) => core.listPodForAllNamespaces(page), (pod) => {
    const view = podView(pod);
    return relevant(view) ? view : undefined;
  });
  // every namespace carries kubernetes.io/metadata.name; without list rights that is all a selector can be matched against
  namespaces ??= nameOnly([...new Set(pods.map((p) => p.namespace))]);
  let kubeDnsServiceIp: string | undefined;
  try {
    kubeDnsServiceIp = (await core.readNamespacedService({ namespace: 'kube-system', name: 'kube-dns' })).spec?.clusterIP;
  } catch (err) {
    if (!isNotFound(err) && !isForbidden(err)) throw new Error(`reading Service kube-system/kube-dns: ${errorMessage(err)}`);
  }
  let podNameservers: string[] = [];
  if (ctx.mode === 'agent') {
    try {
      podNameservers = resolvConfNameservers(readFileSync('/etc/resolv.conf', 'utf8'));
    } catch {
      // no resolv.conf: the API facts alone decide
    }
  }
  return { pods, namespaces, ...(kubeDnsServiceIp ? { kubeDnsServiceIp } : {}), policyNamespaces, podNameservers };
}

export async function checkDnsPeers(ctx: PreflightContext): Promise<CheckResult> {
  return dnsVerdict(ctx.settings.dnsPeers, ctx.settings.dnsPorts, await gatherDnsFacts(ctx));
}
