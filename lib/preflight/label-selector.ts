// Label selectors as NetworkPolicy peers use them: matching a set of labels,
// and the string form the API's labelSelector query parameter takes.
import type * as k8s from '@kubernetes/client-node';

export type LabelSelector = k8s.V1LabelSelector;
export type NetworkPolicyPeer = k8s.V1NetworkPolicyPeer;

export function matchesSelector(selector: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(l, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(l[e.key]!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(l[e.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/** `a=b,c in (d,e),!f` for the labelSelector query parameter. */
export function selectorString(selector: LabelSelector): string {
  const parts = Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of selector.matchExpressions ?? []) {
    const values = (e.values ?? []).join(',');
    if (e.operator === 'In') parts.push(`${e.key} in (${values})`);
    else if (e.operator === 'NotIn') parts.push(`${e.key} notin (${values})`);
    else if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  return parts.join(',');
}

/** A short human form of a peer for messages: `namespace kubernetes.io/metadata.name=kube-system, pods k8s-app=kube-dns`. */
export function describePeer(peer: NetworkPolicyPeer): string {
  if (peer.ipBlock) return `ipBlock ${peer.ipBlock.cidr}${peer.ipBlock.except?.length ? ` except ${peer.ipBlock.except.join(',')}` : ''}`;
  const parts: string[] = [];
  if (peer.namespaceSelector) parts.push(`namespaces {${selectorString(peer.namespaceSelector) || 'all'}}`);
  if (peer.podSelector) parts.push(`pods {${selectorString(peer.podSelector) || 'all'}}`);
  return parts.join(' ');
}
