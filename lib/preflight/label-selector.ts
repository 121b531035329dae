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

export type NodeSelectorTerm = k8s.V1NodeSelectorTerm;

export function requirementHolds(r: k8s.V1NodeSelectorRequirement, value: string | undefined): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
    case 'Lt': {
      const n = Number.parseInt(value ?? '', 10);
      const bound = Number.parseInt(values[0] ?? '', 10);
      if (!/^-?\d+$/.test(value ?? '') || Number.isNaN(bound)) return false;
      return r.operator === 'Gt' ? n > bound : n < bound;
    }
    default:
      return false;
  }
}

/**
 * Whether a node satisfies required node affinity terms as the scheduler reads them: the
 * terms are ORed, a term's requirements ANDed, and a term without any matches no node.
 */
export function matchesNodeSelectorTerms(terms: NodeSelectorTerm[], node: { name: string; labels: Record<string, string> }): boolean {
  return terms.some((t) => {
    const exprs = t.matchExpressions ?? [];
    const fields = t.matchFields ?? [];
    if (exprs.length === 0 && fields.length === 0) return false;
    return exprs.every((r) => requirementHolds(r, node.labels[r.key])) && fields.every((r) => requirementHolds(r, r.key === 'metadata.name' ? node.name : undefined));
  });
}

/** The required node terms of an affinity as the chart's values hold it (none: the chart's platform term alone). */
export function requiredNodeTerms(affinity: { nodeAffinity?: Record<string, unknown> }): NodeSelectorTerm[] {
  const required = affinity.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution as { nodeSelectorTerms?: NodeSelectorTerm[] } | undefined;
  return required?.nodeSelectorTerms ?? [];
}
