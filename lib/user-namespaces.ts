// evaluations.hostUsers: whether evaluation pods run in user namespaces (hostUsers: false).
// The kubelet says what its container runtime can do in the Node's status:
// status.runtimeHandlers[] = { name, features: { userNamespaces } }, per runtime handler
// ('' is the default handler; a RuntimeClass names another). Only a kubelet with
// UserNamespacesSupport (on by default since Kubernetes 1.33) whose runtime supports them
// (containerd 2.0+ or CRI-O, runc 1.2+ or crun) reports true. The same decision is read by
// the controller, before each evaluation pod, and by preflight's user-namespaces check.
import { NodeV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { nodeRefusal, type ClusterPlacement, type NodeFacts } from './evaluation-placement.ts';

/** evaluations.hostUsers: auto (false where every node evaluations may use supports it), or the pod field as given. */
export type HostUsersSetting = 'auto' | boolean;

export const USER_NAMESPACES_REASON = 'UserNamespacesUnsupported';

/** The RuntimeClass handler evaluation pods use: undefined when it is not known (a RuntimeClass the caller could not read). */
export type Handler = { name: string; runtimeClass?: string } | undefined;

/** Whether the node's kubelet reports user namespaces for `handler` ('' = the default handler). */
export function nodeSupportsUserNamespaces(node: V1Node, handler: string): boolean {
  const h = node.status?.runtimeHandlers?.find((r) => (r.name ?? '') === handler);
  return h?.features?.userNamespaces === true;
}

export type UserNamespaceSupport = {
  supported: boolean;
  /** one sentence: what was found */
  found: string;
};

const handlerText = (h: NonNullable<Handler>) => (h.runtimeClass ? `runtime handler ${h.name} (RuntimeClass ${h.runtimeClass})` : 'the default runtime handler');
const names = (ns: string[]) => (ns.length > 5 ? `${ns.slice(0, 5).join(', ')} and ${ns.length - 5} more` : ns.join(', '));

/** Whether every node an evaluation pod may use under `placement` reports user namespaces for the handler. */
export function userNamespaceSupport(nodes: readonly V1Node[], placement: ClusterPlacement, handler: Handler): UserNamespaceSupport {
  if (!handler) {
    return { supported: false, found: `the handler of RuntimeClass ${placement.runtimeClassName} (evaluations.runtimeClassName) could not be read, so no node's support for it is known` };
  }
  const candidates = nodes.filter((n) => nodeRefusal(placement, facts(n)) === undefined);
  if (candidates.length === 0) return { supported: false, found: 'no node evaluation pods may use (evaluations.nodeSelector, tolerations, affinity; linux/amd64) was found' };
  const lacking = candidates.filter((n) => !nodeSupportsUserNamespaces(n, handler.name)).map((n) => n.metadata?.name ?? '');
  if (lacking.length > 0) {
    return {
      supported: false,
      found: `${lacking.length} of the ${candidates.length} node(s) evaluation pods may use report no user namespace support for ${handlerText(handler)} (status.runtimeHandlers[].features.userNamespaces): ${names(lacking)}`,
    };
  }
  return { supported: true, found: `all ${candidates.length} node(s) evaluation pods may use report user namespace support for ${handlerText(handler)}` };
}

function facts(n: V1Node): NodeFacts {
  return { name: n.metadata?.name ?? '', labels: n.metadata?.labels ?? {}, taints: n.spec?.taints ?? [] };
}

/** What to do for the next evaluation pod: its hostUsers (undefined: leave the field unset, the host's users), or wait and say why. */
export type HostUsersDecision = { hostUsers: false | undefined; found: string } | { wait: string };

/** What a node needs for its kubelet to report user namespaces. */
export const USER_NAMESPACES_PREREQUISITE = 'Kubernetes 1.33+ with UserNamespacesSupport, containerd 2.0+ or CRI-O 1.25+ with runc 1.2+ or crun 1.9+, Linux 6.3+';
export const USER_NAMESPACES_FIX = `Run evaluations on nodes whose kubelet reports user namespaces (${USER_NAMESPACES_PREREQUISITE}), or set evaluations.hostUsers=auto to run them with the node's users where it does not`;

export function decideHostUsers(setting: HostUsersSetting, support: () => UserNamespaceSupport): HostUsersDecision {
  if (setting === true) return { hostUsers: undefined, found: 'evaluations.hostUsers=true: evaluation pods share the node\'s users' };
  const s = support();
  if (s.supported) return { hostUsers: false, found: `${s.found}: evaluation pods run in user namespaces (hostUsers: false)` };
  if (setting === 'auto') return { hostUsers: undefined, found: `${s.found}: evaluation pods share the node's users (evaluations.hostUsers=auto)` };
  return {
    wait: `evaluations.hostUsers=false asks for user namespaces, but ${s.found}; no evaluation pod starts until they do, as a pod there would fail to start. ${USER_NAMESPACES_FIX}`,
  };
}

/**
 * The runtime handler evaluation pods use: the default ('') without a RuntimeClass, else the
 * RuntimeClass's handler; undefined when it cannot be read (then no node's support is known).
 */
export async function runtimeHandler(kc: KubeConfig, runtimeClassName: string): Promise<Handler> {
  if (!runtimeClassName) return { name: '' };
  try {
    const rc = await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name: runtimeClassName });
    return { name: rc.handler, runtimeClass: runtimeClassName };
  } catch {
    return undefined;
  }
}
