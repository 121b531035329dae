import { gzipSync } from 'node:zlib';
import type * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { accessModesVerdict } from './checks/access-modes.ts';
import { apiServerAddressesVerdict, outside } from './checks/api-server-addresses.ts';
import { skewVerdict } from './checks/clock-skew.ts';
import { dnsVerdict, nodeLocalAddresses, resolvConfNameservers, type DnsFacts, type PodView } from './checks/dns-peers.ts';
import { gpuVerdict } from './checks/gpu-resources.ts';
import { rightsVerdict, INSTALL_RIGHTS } from './checks/install-rights.ts';
import { versionVerdict } from './checks/kubernetes-version.ts';
import { storedProbeVerdict } from './checks/network-policy.ts';
import { architectureVerdict } from './checks/node-architecture.ts';
import { outboundVerdict } from './checks/outbound.ts';
import { helmReleaseChart, installationVerdict } from './checks/single-installation.ts';
import { spoolClassVerdict, storageClassVerdict, withSpool } from './checks/storage-class.ts';
import { caBundleFinding, pullSecretFinding, referencedObjectsVerdict, type Seen } from './checks/referenced-objects.ts';
import { exitCode, formatJson, formatTable, summaryLine } from './format.ts';
import { matchesNodeSelectorTerms, matchesSelector, selectorString } from './label-selector.ts';
import { GPU_NODE_TERMS } from '../values-schema.ts';
import { cniVerdict, detectCni, probeVerdict } from './network-policy.ts';
import { preflightConfigMap, preflightReportMessage } from './publish.ts';
import type { PreflightReportData } from './run.ts';

function node(name: string, o: { arch?: string; os?: string; labels?: Record<string, string>; gpus?: Record<string, string>; cordoned?: boolean; taint?: string } = {}): k8s.V1Node {
  return {
    metadata: { name, labels: { 'kubernetes.io/arch': o.arch ?? 'amd64', 'kubernetes.io/os': o.os ?? 'linux', ...(o.labels ?? {}) } },
    spec: { unschedulable: o.cordoned ?? false, taints: o.taint ? [{ key: o.taint, effect: 'NoSchedule' }] : [] },
    status: { conditions: [{ type: 'Ready', status: 'True' }], allocatable: { cpu: '4', ...(o.gpus ?? {}) } },
  };
}
const sc = (name: string, provisioner: string, isDefault = false): k8s.V1StorageClass => ({
  metadata: { name, ...(isDefault ? { annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } } : {}) },
  provisioner,
});

describe('kubernetes-version', () => {
  it('passes at and above the floor 1.34, fails below, naming both versions', () => {
    expect(versionVerdict('v1.34.0').verdict).toBe('pass');
    expect(versionVerdict('v1.35.4+k3s1').verdict).toBe('pass');
    expect(versionVerdict('v2.0.0').verdict).toBe('pass');
    const old = versionVerdict('v1.33.7-eks-1');
    expect(old.verdict).toBe('fail');
    expect(old.found).toContain('v1.33.7-eks-1');
    expect(old.fix).toBe('Upgrade the cluster to Kubernetes 1.34 or newer, then run rlmesh preflight again.');
    expect(versionVerdict('garbage').verdict).toBe('warn');
  });
});

describe('node-architecture', () => {
  it('warns and names each skipped node with its reason', () => {
    const r = architectureVerdict([node('a'), node('b', { arch: 'arm64' }), node('c', { cordoned: true }), node('d', { taint: 'pool' })]);
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('linux/amd64: 1 schedulable node(s) (a)');
    expect(r.found).toContain('b (linux/arm64: the runtime images are built for linux/amd64 only');
    expect(r.found).toContain('c (cordoned)');
    expect(r.found).toContain('d (taint pool:NoSchedule)');
  });
  it('fails without a schedulable amd64 node, and without nodes', () => {
    expect(architectureVerdict([node('x', { arch: 'arm64' }), node('w', { os: 'windows' })]).verdict).toBe('fail');
    const none = architectureVerdict([], 'pool=gpu');
    expect(none.verdict).toBe('fail');
    expect(none.found).toBe('no nodes matching pool=gpu');
  });
  it('passes with only usable nodes; a cordoned amd64 node alone is listed, not a warn', () => {
    expect(architectureVerdict([node('a'), node('b')]).verdict).toBe('pass');
    expect(architectureVerdict([node('a'), node('c', { cordoned: true })])).toMatchObject({ verdict: 'pass', found: expect.stringContaining('c (cordoned)') });
  });
});

describe('storage-class', () => {
  it('fails without a default class and says how to mark one', () => {
    const r = storageClassVerdict([sc('fast', 'ebs.csi.aws.com')], '');
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain('no default StorageClass');
    expect(r.fix).toContain('kubectl annotate storageclass <name> storageclass.kubernetes.io/is-default-class=true');
  });
  it('fails on a no-provisioner default and on a className that does not exist', () => {
    expect(storageClassVerdict([sc('local', 'kubernetes.io/no-provisioner', true)], '')).toMatchObject({ verdict: 'fail', found: expect.stringContaining('kubernetes.io/no-provisioner') });
    expect(storageClassVerdict([sc('std', 'x', true)], 'nfs')).toMatchObject({ verdict: 'fail', found: expect.stringContaining('storage.className is nfs, but the cluster has no such StorageClass') });
  });
  it('passes on a dynamic default or a named class', () => {
    expect(storageClassVerdict([sc('std', 'pd.csi.storage.gke.io', true)], '').verdict).toBe('pass');
    expect(storageClassVerdict([sc('nfs', 'nfs.csi.k8s.io')], 'nfs').verdict).toBe('pass');
  });
});

describe('storage-class: the agent spool', () => {
  const classes = [sc('std', 'ebs.csi.aws.com', true), sc('shared', 'efs.csi.aws.com'), sc('manual', 'kubernetes.io/no-provisioner')];
  it('says nothing more when the spool follows a block class or the default', () => {
    expect(spoolClassVerdict(classes, '', '')).toBeUndefined();
    expect(spoolClassVerdict(classes, 'std', '')).toBeUndefined();
  });
  it('warns when the spool follows storage.className onto a ReadWriteMany class, naming the default block class to set', () => {
    const r = spoolClassVerdict(classes, 'shared', '')!;
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('follows storage.className onto shared (provisioner efs.csi.aws.com), a ReadWriteMany class');
    expect(r.fix).toBe('Set agent.spool.storageClassName=std on a new install (an existing spool keeps its class; chart README, "Several nodes").');
    const joined = withSpool(storageClassVerdict(classes, 'shared'), r);
    expect(joined).toMatchObject({ verdict: 'warn', fix: r.fix });
    expect(joined.found).toContain('storage.className shared');
  });
  it('judges a spool class of its own: missing or manual fails, ReadWriteMany warns, block passes', () => {
    expect(spoolClassVerdict(classes, 'shared', 'gp3')).toMatchObject({ verdict: 'fail', found: expect.stringContaining('agent.spool.storageClassName is gp3, but the cluster has no such StorageClass') });
    expect(spoolClassVerdict(classes, 'shared', 'manual')!.verdict).toBe('fail');
    expect(spoolClassVerdict(classes, '', 'shared')!.verdict).toBe('warn');
    const ok = spoolClassVerdict(classes, 'shared', 'std')!;
    expect(ok.verdict).toBe('pass');
    expect(withSpool(storageClassVerdict(classes, 'shared'), ok)).toMatchObject({ verdict: 'pass', fix: 'Nothing to do.' });
    expect(withSpool(storageClassVerdict(classes, 'shared'), spoolClassVerdict(classes, 'shared', 'gp3')).verdict).toBe('fail');
  });
});

describe('access-modes', () => {
  it('warns on RWO with several nodes with the exact values to set, naming an RWX class when one exists', () => {
    const r = accessModesVerdict(['ReadWriteOnce'], [node('a'), node('b')], [sc('std', 'x', true), sc('shared', 'nfs.csi.k8s.io')], '');
    expect(r.verdict).toBe('warn');
    expect(r.fix).toBe('To run evaluations with artifacts on every node, set storage.className=shared and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany].');
    expect(r.found).toContain('every evaluation that needs artifacts runs on the one node that holds the cache volume, and one asking for what that node lacks (GPUs, more cpu or memory than it has, a placement that excludes it) fails as CacheNodeCannotRun');
    expect(r.found).not.toContain('differ in GPUs');
    const noRwx = accessModesVerdict(['ReadWriteOnce'], [node('a'), node('b')], [sc('std', 'x', true)], '');
    expect(noRwx.fix).toContain('storage.className=<an RWX StorageClass');
  });
  it('names the GPU nodes when the nodes differ in GPUs: evaluations needing GPUs and artifacts fail unless the cache lands there', () => {
    const nodes = [node('cpu-0'), node('cpu-1'), node('gpu-0', { gpus: { 'nvidia.com/gpu': '8' } }), node('arm-0', { arch: 'arm64', gpus: { 'nvidia.com/gpu': '4' } })];
    const r = accessModesVerdict(['ReadWriteOnce'], nodes, [], '');
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('the nodes differ in GPUs (gpu-0: nvidia.com/gpu 8; 2 without), so evaluations that need GPUs and artifacts fail unless the cache lands on a node with enough of them');
    const alike = accessModesVerdict(['ReadWriteOnce'], [node('g0', { gpus: { 'nvidia.com/gpu': '8' } }), node('g1', { gpus: { 'nvidia.com/gpu': '8' } })], [], '');
    expect(alike.found).not.toContain('differ in GPUs');
  });
  it('passes on one node or on ReadWriteMany', () => {
    expect(accessModesVerdict(['ReadWriteOnce'], [node('a'), node('b', { arch: 'arm64' })], [], '').verdict).toBe('pass');
    expect(accessModesVerdict(['ReadWriteMany'], [node('a'), node('b')], [], 'nfs').verdict).toBe('pass');
  });
});

describe('gpu-resources', () => {
  const gpuNode = node('g', { gpus: { 'nvidia.com/gpu': '8' }, labels: { 'nvidia.com/gpu.present': 'true', 'nvidia.com/gpu.product': 'H100' } });
  it('passes with advertised GPUs and discovery on, listing them', () => {
    expect(gpuVerdict([gpuNode], { names: [] }, true)).toMatchObject({ verdict: 'pass', found: expect.stringContaining('g: nvidia.com/gpu 8 (H100)') });
  });
  it('takes the model from rlmesh.dev/gpu.* when the vendor labels are absent', () => {
    const ours = node('o', { gpus: { 'nvidia.com/gpu': '8' }, labels: { 'rlmesh.dev/gpu.vendor': 'nvidia', 'rlmesh.dev/gpu.product': 'NVIDIA-H100-SXM5-80GB' } });
    expect(gpuVerdict([ours], { names: [] }, true)).toMatchObject({ verdict: 'pass', found: expect.stringContaining('o: nvidia.com/gpu 8 (NVIDIA-H100-SXM5-80GB)') });
  });
  it('warns on a CPU-only cluster with discovery on: disable it', () => {
    expect(gpuVerdict([node('a')], { names: [] }, true)).toMatchObject({ verdict: 'warn', fix: 'Set gpuFeatureDiscovery.enabled=false, as no node has a GPU to label.' });
    expect(gpuVerdict([node('a')], { names: [] }, false).verdict).toBe('pass');
  });
  it('warns on GPU hardware without the device plugin resource', () => {
    const r = gpuVerdict([node('h', { labels: { 'feature.node.kubernetes.io/pci-1002.present': 'true' } })], { names: [] }, true);
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('h (AMD hardware labels, no amd.com/gpu)');
    expect(r.fix).toContain('the AMD GPU device plugin');
  });
  it('warns on GPUs without model labels when discovery is off', () => {
    const r = gpuVerdict([node('g', { gpus: { 'amd.com/gpu': '4' } })], { names: [] }, false);
    expect(r).toMatchObject({ verdict: 'warn', fix: expect.stringContaining('Set gpuFeatureDiscovery.enabled=true') });
  });
  it("warns on a GPU node without a model label that GPU discovery's node terms leave out, naming what to label", () => {
    const bare = node('bare', { gpus: { 'nvidia.com/gpu': '8' } });
    const r = gpuVerdict([bare, gpuNode], { names: [] }, true, GPU_NODE_TERMS);
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('GPU discovery does not run on bare: none of the required node terms of gpuFeatureDiscovery.affinity matches their labels');
    expect(r.fix).toContain('Label those nodes nvidia.com/gpu.present=true or amd.com/gpu.present=true');
    // discovery runs where a term matches (it labels the model there), and everywhere without terms
    const labelled: Record<string, string>[] = [{ 'nvidia.com/gpu.present': 'true' }, { 'cloud.google.com/gke-accelerator': 'nvidia-l4' }, { 'feature.node.kubernetes.io/pci-0302_10de.present': 'true' }, { 'karpenter.k8s.aws/instance-gpu-count': '8' }];
    for (const labels of labelled) {
      expect(gpuVerdict([node('labelled', { gpus: { 'nvidia.com/gpu': '8' }, labels })], { names: [] }, true, GPU_NODE_TERMS).verdict, JSON.stringify(labels)).toBe('pass');
    }
    expect(gpuVerdict([bare], { names: [] }, true, []).verdict).toBe('pass');
    // an arm64 node runs no discovery and no evaluation: node-architecture names it, not this check
    expect(gpuVerdict([node('gh200', { arch: 'arm64', gpus: { 'nvidia.com/gpu': '4' } })], { names: [] }, true, GPU_NODE_TERMS).verdict).toBe('pass');
    // with discovery off, turning it on is the fix
    expect(gpuVerdict([bare], { names: [] }, false, GPU_NODE_TERMS).fix).toContain('Set gpuFeatureDiscovery.enabled=true');
  });
  it('warns on DRA-only GPUs: evaluation pods request device-plugin resources', () => {
    const r = gpuVerdict([node('a')], { names: ['gpu.nvidia.com'] }, true);
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('DRA DeviceClasses: gpu.nvidia.com');
  });
});

describe('single-installation', () => {
  it('fails on another namespace, naming it and what was found there', () => {
    const r = installationVerdict('rlmesh-system', [{ namespace: 'team-a', what: 'Deployment rlmesh-cluster-agent' }, { namespace: 'rlmesh-system', what: 'x' }], []);
    expect(r.verdict).toBe('fail');
    expect(r.found).toBe('another runtime installation: namespace team-a (Deployment rlmesh-cluster-agent)');
    expect(r.fix).toContain('helm uninstall -n team-a rlmesh');
  });
  it('passes on its own namespace only; warns when something could not be read', () => {
    expect(installationVerdict('rlmesh-system', [{ namespace: 'rlmesh-system', what: 'x' }], []).verdict).toBe('pass');
    expect(installationVerdict('rlmesh-system', [], ['Secrets: forbidden']).verdict).toBe('warn');
  });
  it('reads the chart name out of a Helm release Secret', () => {
    const inner = gzipSync(JSON.stringify({ name: 'rlmesh', chart: { metadata: { name: 'rlmesh-runtime' } } })).toString('base64');
    expect(helmReleaseChart({ data: { release: Buffer.from(inner).toString('base64') } })).toBe('rlmesh-runtime');
    expect(helmReleaseChart({ data: { release: 'bm90IGd6aXA=' } })).toBeUndefined();
  });
});

describe('install-rights', () => {
  it('lists every right denied', () => {
    const rights = INSTALL_RIGHTS('rlmesh-system', 'rlmesh-runs');
    const r = rightsVerdict(rights.map((right, i) => ({ right, allowed: i !== 0 && i !== 3 && i !== 5 })));
    expect(r.verdict).toBe('fail');
    expect(r.found).toBe('this kube context may not: create customresourcedefinitions.apiextensions.k8s.io, create validatingadmissionpolicies.admissionregistration.k8s.io, create namespaces');
    expect(rightsVerdict(rights.map((right) => ({ right, allowed: true }))).verdict).toBe('pass');
  });
});

describe('dns-peers', () => {
  const coredns: PodView = { namespace: 'kube-system', name: 'coredns-1', labels: { 'k8s-app': 'kube-dns' }, ip: '10.244.0.5', running: true, udpPorts: [53], args: [] };
  const facts = (pods: PodView[], extra: Partial<DnsFacts> = {}): DnsFacts => ({
    pods,
    namespaces: [...new Set(pods.map((p) => p.namespace))].map((name) => ({ name, labels: { 'kubernetes.io/metadata.name': name } })),
    policyNamespaces: ['rlmesh-system', 'rlmesh-runs'],
    ...extra,
  });
  const coreDnsPeer = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } };
  it('passes when a selector peer matches running resolver pods on a dnsPort', () => {
    expect(dnsVerdict([coreDnsPeer], [53], facts([coredns]))).toMatchObject({ verdict: 'pass', found: expect.stringContaining('kube-system/coredns-1 on port 53') });
  });
  it('fails on a peer matching nothing, suggesting the resolver it saw', () => {
    const r = dnsVerdict([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'openshift-dns' } } }], [53], facts([coredns]));
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain('matches no running pod; resolver pods in the cluster: kube-system/coredns-1');
    expect(r.fix).toContain('{ namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: kube-system } }, podSelector: { matchLabels: { k8s-app: kube-dns } } }');
  });
  it('fails on resolver pods listening on other ports, naming the dnsPorts to set', () => {
    const r = dnsVerdict([coreDnsPeer], [53], facts([{ ...coredns, udpPorts: [5353] }]));
    expect(r).toMatchObject({ verdict: 'fail', fix: expect.stringContaining('Set network.dnsPorts=[5353]') });
  });
  it('ipBlock peers: a resolver pod or node-local address passes, the Service IP alone warns', () => {
    const nodeLocal: PodView = { namespace: 'kube-system', name: 'node-local-dns-x', labels: { 'k8s-app': 'node-local-dns' }, running: true, udpPorts: [53], args: ['-localip', '169.254.20.10,10.96.0.10'] };
    expect(nodeLocalAddresses([nodeLocal])).toEqual(['169.254.20.10', '10.96.0.10']);
    expect(dnsVerdict([{ ipBlock: { cidr: '169.254.20.10/32' } }], [53], facts([nodeLocal])).verdict).toBe('pass');
    expect(dnsVerdict([{ ipBlock: { cidr: '10.244.0.0/16' } }], [53], facts([coredns])).verdict).toBe('pass');
    expect(dnsVerdict([{ ipBlock: { cidr: '10.244.0.0/16', except: ['10.244.0.0/24'] } }], [53], facts([coredns])).verdict).toBe('fail');
    expect(dnsVerdict([{ ipBlock: { cidr: '10.96.0.10/32' } }], [53], facts([coredns], { kubeDnsServiceIp: '10.96.0.10' })).verdict).toBe('warn');
  });
  it('a link-local nameserver of the agent pod counts as a node-local resolver address', () => {
    expect(resolvConfNameservers('search svc.cluster.local\nnameserver 169.254.20.10\n nameserver 10.96.0.10\noptions ndots:5\n')).toEqual(['169.254.20.10', '10.96.0.10']);
    const peer = { ipBlock: { cidr: '169.254.20.10/32' } };
    expect(dnsVerdict([peer], [53], facts([], { podNameservers: ['169.254.20.10'] }))).toMatchObject({ verdict: 'pass', found: 'peer 1 (ipBlock 169.254.20.10/32) contains node-local DNS address 169.254.20.10' });
    expect(dnsVerdict([{ ipBlock: { cidr: '10.96.0.10/32' } }], [53], facts([], { podNameservers: ['10.96.0.10'] })).verdict).toBe('fail');
  });
  it('a peer without namespaceSelector selects pods in the policies own namespaces only', () => {
    expect(dnsVerdict([{ podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }], [53], facts([coredns])).verdict).toBe('fail');
  });
});

describe('clock-skew', () => {
  it('passes within 30 s, warns above, fails above 5 min', () => {
    expect(skewVerdict(400, 'u').verdict).toBe('pass');
    expect(skewVerdict(-29_000, 'u').verdict).toBe('pass');
    expect(skewVerdict(31_000, 'u')).toMatchObject({ verdict: 'warn', found: 'this clock is 31 s behind u (Date header); more than 30 s' });
    expect(skewVerdict(-301_000, 'u')).toMatchObject({ verdict: 'fail', found: expect.stringContaining('301 s ahead of u') });
  });
});

describe('outbound-443', () => {
  it('fails from the agent and warns from the CLI, naming the hosts to allow', () => {
    const outcomes = [
      { target: 'api.rlmesh.dev:443', ok: true, ms: 20 },
      { target: 'registry.rlmesh.dev:443', ok: false, ms: 5000, error: 'no TLS handshake within 5 s' },
    ];
    const r = outboundVerdict(outcomes, 'agent');
    expect(r.verdict).toBe('fail');
    expect(r.fix).toBe("Allow outbound TCP 443 from the cluster's nodes to registry.rlmesh.dev in your firewall or egress gateway.");
    expect(outboundVerdict(outcomes, 'cli').verdict).toBe('warn');
    expect(outboundVerdict([{ target: 'a:443', ok: false, ms: 1, error: 'TLS certificate not trusted (x)' }], 'agent').fix).toContain('controlPlane.caBundle');
  });
});

describe('network-policy', () => {
  const targets = { forbidden: '10.0.0.5:9090', allowed: 'rlmesh-egress-proxy.rlmesh-system.svc:3128' };
  it('recognises CNIs from DaemonSet names; flannel alone does not enforce', () => {
    expect(detectCni(['kube-proxy', 'kube-flannel-ds'])).toMatchObject({ names: ['Flannel'], enforcing: false, unknown: false });
    expect(detectCni(['calico-node', 'kube-proxy']).enforcing).toBe(true);
    expect(detectCni(['canal', 'kube-flannel-ds']).enforcing).toBe(true);
    expect(cniVerdict(detectCni(['kube-flannel-ds'])).verdict).toBe('fail');
    expect(cniVerdict(detectCni(['cilium'])).verdict).toBe('pass');
    expect(cniVerdict(detectCni(['kube-proxy'])).verdict).toBe('warn');
  });
  it('maps probe exit codes to verdicts', () => {
    const calico = detectCni(['calico-node']);
    expect(probeVerdict({ kind: 'exited', exitCode: 0 }, targets, calico)).toMatchObject({ verdict: 'pass', found: expect.stringMatching(/^NetworkPolicy is enforced/) });
    const flannel = probeVerdict({ kind: 'exited', exitCode: 10 }, targets, detectCni(['kube-flannel-ds']));
    expect(flannel.verdict).toBe('fail');
    expect(flannel.found).toContain('the CNI is Flannel');
    expect(flannel.fix).toMatch(/^Flannel does not enforce NetworkPolicy/);
    expect(probeVerdict({ kind: 'exited', exitCode: 11 }, targets, calico).found).toContain('could not reach the egress proxy');
    expect(probeVerdict({ kind: 'exited', exitCode: 12 }, targets, calico).fix).toContain('network.dnsPeers');
    expect(probeVerdict({ kind: 'exited', exitCode: 3 }, targets, calico).verdict).toBe('warn');
    expect(probeVerdict({ kind: 'not-run', reason: 'ImagePullBackOff' }, targets, calico).verdict).toBe('warn');
  });
  it('the agent reports the stored probe, warns when it is off, missing or stale', () => {
    const now = Date.parse('2026-01-01T12:00:00Z');
    const stored = { id: 'network-policy', verdict: 'pass' as const, found: 'NetworkPolicy is enforced', fix: 'Nothing to do.', at: '2026-01-01T11:30:00Z' };
    expect(storedProbeVerdict(stored, true, now)).toMatchObject({ verdict: 'pass', found: 'NetworkPolicy is enforced (probed at 2026-01-01T11:30:00Z)' });
    expect(storedProbeVerdict({ ...stored, at: '2026-01-01T08:00:00Z' }, true, now).verdict).toBe('warn');
    expect(storedProbeVerdict(undefined, true, now).verdict).toBe('warn');
    expect(storedProbeVerdict(undefined, false, now).found).toContain('preflight.networkPolicyProbe.enabled=false');
  });
});

describe('label selectors', () => {
  it('match and render matchLabels and matchExpressions', () => {
    const sel = { matchLabels: { a: '1' }, matchExpressions: [{ key: 'b', operator: 'In', values: ['x', 'y'] }, { key: 'c', operator: 'DoesNotExist' }] };
    expect(matchesSelector(sel, { a: '1', b: 'y' })).toBe(true);
    expect(matchesSelector(sel, { a: '1', b: 'z' })).toBe(false);
    expect(matchesSelector(sel, { a: '1', b: 'x', c: '' })).toBe(false);
    expect(matchesSelector({}, {})).toBe(true);
    expect(selectorString(sel)).toBe('a=1,b in (x,y),!c');
  });
  it('match required node affinity as the scheduler does: terms ORed, requirements ANDed, an empty term matches nothing', () => {
    const n = { name: 'n1', labels: { pool: 'gpu', 'karpenter.k8s.aws/instance-gpu-count': '8' } };
    const t = (...matchExpressions: { key: string; operator: string; values?: string[] }[]) => ({ matchExpressions });
    expect(matchesNodeSelectorTerms([t({ key: 'pool', operator: 'In', values: ['cpu'] }), t({ key: 'pool', operator: 'Exists' })], n)).toBe(true);
    expect(matchesNodeSelectorTerms([t({ key: 'pool', operator: 'In', values: ['gpu'] }, { key: 'zone', operator: 'Exists' })], n)).toBe(false);
    expect(matchesNodeSelectorTerms([t({ key: 'zone', operator: 'NotIn', values: ['a'] }, { key: 'x', operator: 'DoesNotExist' })], n)).toBe(true);
    expect(matchesNodeSelectorTerms([t({ key: 'karpenter.k8s.aws/instance-gpu-count', operator: 'Gt', values: ['0'] })], n)).toBe(true);
    expect(matchesNodeSelectorTerms([t({ key: 'karpenter.k8s.aws/instance-gpu-count', operator: 'Lt', values: ['8'] })], n)).toBe(false);
    expect(matchesNodeSelectorTerms([{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }], n)).toBe(true);
    expect(matchesNodeSelectorTerms([{}], n)).toBe(false);
    expect(matchesNodeSelectorTerms([], n)).toBe(false);
  });
});

describe('output and publishing', () => {
  const report: PreflightReportData = {
    id: 'r1',
    at: '2026-01-01T00:00:00.000Z',
    mode: 'cli',
    checks: [
      { id: 'kubernetes-version', verdict: 'pass', found: 'Kubernetes v1.35.4 (floor 1.34)', fix: 'Nothing to do.' },
      { id: 'storage-class', verdict: 'fail', found: 'no default StorageClass', fix: 'Set storage.className.' },
      { id: 'access-modes', verdict: 'warn', found: 'RWO', fix: 'Set RWX.' },
    ],
  };
  it('summarises, tables, and exits 1 on any fail', () => {
    expect(summaryLine(report)).toBe('fail: 1 fail (storage-class), 1 warn (access-modes), 1 pass at 2026-01-01T00:00:00.000Z');
    const table = formatTable(report);
    expect(table).toContain('FAIL  storage-class       no default StorageClass\n                          fix: Set storage.className.');
    expect(table).not.toContain('fix: Nothing to do.');
    expect(exitCode(report)).toBe(1);
    expect(exitCode({ ...report, checks: [report.checks[0]!, report.checks[2]!] })).toBe(0);
    expect(JSON.parse(formatJson(report))).toEqual(report);
  });
  it('builds the ConfigMap and the PreflightReport message', () => {
    const cm = preflightConfigMap(report, 'rlmesh-system');
    expect(cm.metadata).toMatchObject({ name: 'rlmesh-preflight', namespace: 'rlmesh-system' });
    // the chart's commonLabels, beneath its own labels
    expect(preflightConfigMap(report, 'rlmesh-system', { team: 'ml', 'app.kubernetes.io/name': 'spoofed' }).metadata!.labels).toEqual({ ...cm.metadata!.labels, team: 'ml' });
    expect(cm.data?.summary).toBe(summaryLine(report));
    expect(JSON.parse(cm.data!['report.json']!)).toEqual(report);
    const msg = preflightReportMessage(report);
    expect(msg.$typeName).toBe('rlmesh.v1.PreflightReport');
    expect(msg.id).toBe('r1');
    expect(msg.checks.map((c) => [c.id, c.verdict])).toEqual([
      ['kubernetes-version', 'pass'],
      ['storage-class', 'fail'],
      ['access-modes', 'warn'],
    ]);
  });
});

describe('referenced-objects', () => {
  const cm = (data: Record<string, string>): Seen => ({ namespaceExists: true, object: { data } });
  const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  const source = { kind: 'ConfigMap' as const, name: 'corp-trust', key: 'trust-bundle.pem' };

  it('nothing named: pass', () => {
    expect(referencedObjectsVerdict([])).toMatchObject({ id: 'referenced-objects', verdict: 'pass' });
  });

  it('pull Secrets: present as dockerconfigjson pass; missing or another type fail with the command; before install warn', () => {
    expect(pullSecretFinding('rlmesh-runs', 'corp', { namespaceExists: true, object: { type: 'kubernetes.io/dockerconfigjson', data: {} } }).verdict).toBe('pass');
    const missing = referencedObjectsVerdict([pullSecretFinding('rlmesh-runs', 'corp', { namespaceExists: true })]);
    expect(missing).toMatchObject({ verdict: 'fail', found: 'pull Secret rlmesh-runs/corp (evaluations.imagePullSecrets) does not exist' });
    expect(missing.fix).toContain('kubectl -n rlmesh-runs create secret docker-registry corp');
    expect(pullSecretFinding('rlmesh-runs', 'corp', { namespaceExists: true, object: { type: 'Opaque', data: {} } })).toMatchObject({ verdict: 'fail', found: expect.stringContaining('is of type Opaque') });
    expect(pullSecretFinding('rlmesh-runs', 'corp', { namespaceExists: false })).toMatchObject({ verdict: 'warn', fix: expect.stringMatching(/^After install, kubectl/) });
  });

  it('CA bundle: the key must hold PEM; a missing object, key or namespace of the release fails; rlmesh-runs before install warns', () => {
    expect(caBundleFinding(source, 'rlmesh-system', cm({ 'trust-bundle.pem': pem }), false).verdict).toBe('pass');
    expect(caBundleFinding(source, 'rlmesh-system', cm({ 'ca.crt': pem }), false)).toMatchObject({ verdict: 'fail', found: 'ConfigMap rlmesh-system/corp-trust has no key trust-bundle.pem (it has ca.crt)' });
    expect(caBundleFinding(source, 'rlmesh-system', cm({ 'trust-bundle.pem': 'not a cert' }), false)).toMatchObject({ verdict: 'fail', found: expect.stringContaining('holds no PEM') });
    expect(caBundleFinding(source, 'rlmesh-system', { namespaceExists: true }, false)).toMatchObject({ verdict: 'fail', found: expect.stringContaining('does not exist: the pods that mount it would not start') });
    expect(caBundleFinding(source, 'rlmesh-runs', { namespaceExists: false }, true).verdict).toBe('warn');
    expect(caBundleFinding(source, 'rlmesh-system', { namespaceExists: false }, false).verdict).toBe('fail');
    const both = referencedObjectsVerdict([caBundleFinding(source, 'rlmesh-system', cm({ 'trust-bundle.pem': pem }), false), caBundleFinding(source, 'rlmesh-runs', { namespaceExists: false }, true)]);
    expect(both.verdict).toBe('warn');
    expect(both.found).toContain('ConfigMap rlmesh-system/corp-trust key trust-bundle.pem (PEM); rlmesh-runs does not exist yet');
  });
});

describe('api-server-addresses', () => {
  const live = ['172.18.0.2/32', '10.96.0.1/32'];

  it('no value: pass, naming where the API is and printing the line for a render that cannot read the cluster', () => {
    const r = apiServerAddressesVerdict(live, []);
    expect(r.verdict).toBe('pass');
    expect(r.found).toBe('the Kubernetes API is at 172.18.0.2/32, 10.96.0.1/32 (EndpointSlice and Service default/kubernetes); helm install and helm upgrade read them');
    expect(r.fix).toContain('--set network.apiServerAddresses={172.18.0.2/32,10.96.0.1/32}');
  });

  it('a value that holds every address passes; one that lacks an address fails with the line to set', () => {
    expect(apiServerAddressesVerdict(live, ['172.18.0.0/24', '10.96.0.1/32']).verdict).toBe('pass');
    const r = apiServerAddressesVerdict(live, ['172.18.0.2/32']);
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain('lacks 10.96.0.1/32');
    expect(r.fix).toBe('Set --set network.apiServerAddresses={172.18.0.2/32,10.96.0.1/32} instead.');
  });

  it('no address at all fails: the chart could not tell where the API is', () => {
    expect(apiServerAddressesVerdict([], []).verdict).toBe('fail');
  });

  it('containment by family: an IPv6 address is never inside an IPv4 range', () => {
    expect(outside(['fd00::1/128', '10.0.0.1/32'], ['10.0.0.0/8', '::/0'])).toEqual([]);
    expect(outside(['fd00::1/128'], ['10.0.0.0/8'])).toEqual(['fd00::1/128']);
  });
});
