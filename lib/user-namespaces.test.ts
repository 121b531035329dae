import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { clusterPlacementSchema, NO_PLACEMENT } from './evaluation-placement.ts';
import { evaluationsBlocked } from './preflight/publish.ts';
import { decideHostUsers, nodeSupportsUserNamespaces, userNamespaceSupport } from './user-namespaces.ts';

type NodeShape = { labels?: Record<string, string>; taints?: { key: string; value?: string; effect: string }[]; handlers?: { name: string; userNamespaces?: boolean }[] };
const node = (name: string, o: NodeShape = {}): V1Node => ({
  metadata: { name, labels: { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', ...o.labels } },
  spec: { taints: o.taints ?? [] },
  status: { runtimeHandlers: (o.handlers ?? []).map((h) => ({ name: h.name, features: { recursiveReadOnlyMounts: true, ...(h.userNamespaces === undefined ? {} : { userNamespaces: h.userNamespaces }) } })) },
});
// what a kubelet with UserNamespacesSupport reports on containerd 2 with runc 1.2, and on containerd 1.6 with runc 1.1 (the local cluster's real node)
const capable = (name: string, o: NodeShape = {}) => node(name, { handlers: [{ name: '', userNamespaces: true }, { name: 'runc', userNamespaces: true }], ...o });
const old = (name: string, o: NodeShape = {}) => node(name, { handlers: [{ name: '', userNamespaces: false }, { name: 'runc', userNamespaces: false }], ...o });
const DEFAULT = { name: '' };

describe('user namespace support, as the kubelet reports it in status.runtimeHandlers', () => {
  it('reads features.userNamespaces of the handler pods use; no entry, or no field (a kubelet before 1.31 or without the gate), is no support', () => {
    expect(nodeSupportsUserNamespaces(capable('a'), '')).toBe(true);
    expect(nodeSupportsUserNamespaces(old('a'), '')).toBe(false);
    expect(nodeSupportsUserNamespaces(node('a', { handlers: [{ name: '' }] }), '')).toBe(false);
    expect(nodeSupportsUserNamespaces(node('a'), '')).toBe(false);
    // a RuntimeClass's handler is looked up by its name, not the default's
    const mixed = node('a', { handlers: [{ name: '', userNamespaces: true }, { name: 'runsc', userNamespaces: false }] });
    expect(nodeSupportsUserNamespaces(mixed, 'runsc')).toBe(false);
    expect(nodeSupportsUserNamespaces(mixed, 'kata')).toBe(false);
  });

  it('counts only the nodes evaluations may use under the operator\'s policy: linux/amd64, evaluations.nodeSelector, its tolerations', () => {
    const nodes = [
      capable('gpu-1', { labels: { pool: 'evaluations' }, taints: [{ key: 'dedicated', value: 'evaluations', effect: 'NoSchedule' }] }),
      old('control-plane', { taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] }),
      old('arm', { labels: { 'kubernetes.io/arch': 'arm64', pool: 'evaluations' } }),
      old('web'),
    ];
    const placement = clusterPlacementSchema.parse({ nodeSelector: { pool: 'evaluations' }, tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'evaluations', effect: 'NoSchedule' }] });
    expect(userNamespaceSupport(nodes, placement, DEFAULT)).toEqual({ supported: true, found: 'all 1 node(s) evaluation pods may use report user namespace support for the default runtime handler' });
    // without the policy, the untainted old node is one evaluations may use
    const any = userNamespaceSupport(nodes, NO_PLACEMENT, DEFAULT);
    expect(any.supported).toBe(false);
    expect(any.found).toBe('1 of the 1 node(s) evaluation pods may use report no user namespace support for the default runtime handler (status.runtimeHandlers[].features.userNamespaces): web');
  });

  it('is no support without a node to use, or when the RuntimeClass handler could not be read', () => {
    expect(userNamespaceSupport([], NO_PLACEMENT, DEFAULT)).toMatchObject({ supported: false, found: expect.stringContaining('no node evaluation pods may use') });
    const rc = clusterPlacementSchema.parse({ runtimeClassName: 'gvisor' });
    expect(userNamespaceSupport([capable('a')], rc, undefined)).toMatchObject({ supported: false, found: expect.stringContaining('RuntimeClass gvisor (evaluations.runtimeClassName) could not be read') });
    expect(userNamespaceSupport([capable('a')], rc, { name: 'runsc', runtimeClass: 'gvisor' })).toMatchObject({ supported: false, found: expect.stringContaining('runtime handler runsc (RuntimeClass gvisor)') });
  });
});

describe('evaluations.hostUsers: what the controller does for the next pod', () => {
  const yes = () => ({ supported: true, found: 'all 2 node(s) support it' });
  const no = () => ({ supported: false, found: '1 of the 2 node(s) do not' });
  it('auto: hostUsers false where supported, unset (the node\'s users) where not', () => {
    expect(decideHostUsers('auto', yes)).toMatchObject({ hostUsers: false });
    expect(decideHostUsers('auto', no)).toMatchObject({ hostUsers: undefined, found: expect.stringContaining("share the node's users (evaluations.hostUsers=auto)") });
  });
  it('false: hostUsers false where supported; where not, the evaluation waits, naming what lacks and the fix', () => {
    expect(decideHostUsers(false, yes)).toMatchObject({ hostUsers: false });
    const d = decideHostUsers(false, no);
    expect('wait' in d && d.wait).toMatch(/^evaluations\.hostUsers=false asks for user namespaces, but 1 of the 2 node\(s\) do not; no evaluation pod starts until they do, .*containerd 2\.0\+ .*runc 1\.2\+.*or set evaluations\.hostUsers=auto/);
  });
  it('true: the field is left unset and the nodes are not asked', () => {
    expect(decideHostUsers(true, () => { throw new Error('not asked'); })).toMatchObject({ hostUsers: undefined });
  });
  it('a failing user-namespaces preflight check (hostUsers=false without support) blocks evaluations, even where NetworkPolicy is not required', () => {
    const report = (verdict: 'pass' | 'warn' | 'fail') => ({ id: 'r', at: '', mode: 'agent' as const, checks: [{ id: 'network-policy', verdict: 'pass' as const, found: 'enforced', fix: '' }, { id: 'user-namespaces', verdict, found: 'node web lacks them', fix: 'Run nodes that report them.' }] });
    expect(evaluationsBlocked(report('fail'), true)).toBe('evaluations wait as UserNamespacesUnsupported until the nodes they may use support user namespaces: node web lacks them; Run nodes that report them.');
    expect(evaluationsBlocked(report('warn'), false)).toBeUndefined();
  });
});
