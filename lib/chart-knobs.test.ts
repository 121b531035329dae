import { describe, expect, it } from 'vitest';
import { POD_BLOCKS, valuesSchema } from './values-schema.ts';
import { VOLUME_BLOCKS } from './chart-knobs.ts';

const T = { joinToken: 'rlm_jt_test0123456789abcdefghijk' };
const issues = (values: Record<string, unknown>) => {
  const r = valuesSchema.safeParse({ ...T, ...values });
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('the chart knobs (lib/chart-knobs.ts)', () => {
  it('accepts labels, annotations, extraEnv, ServiceAccount annotations, logging and arbitraryUid', () => {
    expect(
      issues({
        commonLabels: { 'example.com/team': 'ml' },
        podLabels: { cost: 'c1' },
        podAnnotations: { 'example.com/note': 'free text' },
        agent: { extraEnv: [{ name: 'FOO', value: '1' }, { name: 'BAR', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }], serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/r' } } },
        logging: { level: 'debug', format: 'text' },
        podSecurity: { arbitraryUid: true },
      }),
    ).toEqual([]);
  });

  it('refuses the chart\'s own label keys, naming the path', () => {
    expect(issues({ commonLabels: { 'app.kubernetes.io/name': 'x' } })).toEqual([expect.stringMatching(/^commonLabels\.app\.kubernetes\.io\/name: app\.kubernetes\.io\/name is a key the chart sets itself/)]);
    expect(issues({ podLabels: { 'rlmesh.dev/metrics': 'false' } })[0]).toMatch(/^podLabels\.rlmesh\.dev\/metrics: /);
    expect(issues({ podAnnotations: { 'checksum/runtime-config': 'x' } })[0]).toMatch(/^podAnnotations\.checksum\/runtime-config: /);
    expect(issues({ commonLabels: { 'bad key!': 'x' } })[0]).toMatch(/^commonLabels\.bad key!: "bad key!" is not a label or annotation key/);
  });

  it('refuses an extraEnv name the chart sets, and one with both value and valueFrom', () => {
    expect(issues({ controller: { extraEnv: [{ name: 'OK', value: '1' }, { name: 'LOG_LEVEL', value: 'debug' }] } })).toEqual([
      expect.stringMatching(/^controller\.extraEnv\.1: LOG_LEVEL is an environment variable the chart sets itself/),
    ]);
    expect(issues({ artifactCache: { filler: { extraEnv: [{ name: 'X', value: '1', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] } } })[0]).toMatch(/^artifactCache\.filler\.extraEnv\.0: X has both value and valueFrom/);
  });

  it('refuses a ServiceAccount annotation key the API server would refuse, in every block, naming the path', () => {
    expect(issues({ agent: { serviceAccount: { annotations: { 'bad key': 'x' } } } })).toEqual([
      'agent.serviceAccount.annotations.bad key: "bad key" is not an annotation key, and the API server would refuse the ServiceAccount partway through the install: write an optional DNS subdomain prefix and /, then a name of at most 63 letters, digits, -, _ and . that starts and ends with a letter or digit, such as eks.amazonaws.com/role-arn or iam.gke.io/gcp-service-account',
    ]);
    for (const block of POD_BLOCKS) {
      const values = block.split('.').reduceRight<Record<string, unknown>>((inner, k) => ({ [k]: inner }), { serviceAccount: { annotations: { 'Example.com/role': 'x' } } });
      expect(issues(values).map((i) => i.slice(0, i.indexOf(': '))), block).toEqual([`${block}.serviceAccount.annotations.Example.com/role`]);
    }
    const sa = (key: string) => issues({ controller: { serviceAccount: { annotations: { [key]: 'x' } } } });
    for (const ok of ['eks.amazonaws.com/role-arn', 'iam.gke.io/gcp-service-account', 'azure.workload.identity/client-id', 'Note_1.x', 'a', 'x'.repeat(63), `${'a'.repeat(253)}/${'b'.repeat(63)}`]) expect(sa(ok), ok).toEqual([]);
    for (const bad of ['', 'bad key', '-a', 'a-', 'x'.repeat(64), 'Example.com/a', 'a/b/c', '/a', 'a/', 'a_b.com/x', `${'a'.repeat(254)}/${'b'.repeat(63)}`])
      expect(sa(bad), bad).toEqual([expect.stringMatching(/^controller\.serviceAccount\.annotations\..*is not an annotation key/)]);
  });

  it('refuses a log level or format it does not know', () => {
    expect(issues({ logging: { level: 'trace' } })[0]).toMatch(/^logging\.level: /);
    expect(issues({ logging: { format: 'pretty' } })[0]).toMatch(/^logging\.format: /);
  });

  it('takes extraVolumes and extraVolumeMounts on the agent, controller, egress proxy and GPU discovery, and global.imagePullSecrets', () => {
    const ok = {
      extraVolumes: [{ name: 'trust', configMap: { name: 'corp-trust' } }, { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 't' } }] } }],
      extraVolumeMounts: [{ name: 'trust', mountPath: '/etc/trust', readOnly: true }, { name: 'token', mountPath: '/var/run/t', subPath: 't' }],
    };
    for (const block of VOLUME_BLOCKS) expect(issues({ [block]: ok }), block).toEqual([]);
    expect(issues({ global: { imagePullSecrets: ['a', { name: 'b' }] } })).toEqual([]);
  });

  it('refuses a hostPath volume naming its path, a type restricted refuses, a chart volume\'s name, a name twice, a mount of no extra volume', () => {
    expect(issues({ agent: { extraVolumes: [{ name: 'node', hostPath: { path: '/var/lib/kubelet', type: 'Directory' } }] } })).toEqual([
      "agent.extraVolumes.0: node is a hostPath volume (/var/lib/kubelet): the chart's pods meet Pod Security restricted, which refuses host paths, and a runtime pod with the node's files would reach past its fence; deliver the files as a configMap, secret, projected or csi volume instead",
    ]);
    expect(issues({ controller: { extraVolumes: [{ name: 'share', nfs: { server: 'n', path: '/x' } }] } })).toEqual([expect.stringMatching(/^controller\.extraVolumes\.0: share is a volume of type nfs, which Pod Security restricted refuses/)]);
    expect(issues({ egress: { extraVolumes: [{ name: 'tmp', emptyDir: {} }] } })).toEqual([expect.stringMatching(/^egress\.extraVolumes\.0: tmp is the name of a volume the chart gives this pod itself/)]);
    expect(issues({ agent: { extraVolumes: [{ name: 'a', emptyDir: {} }, { name: 'a', secret: { secretName: 's' } }] } })).toEqual([expect.stringMatching(/^agent\.extraVolumes\.1: a is listed more than once/)]);
    expect(issues({ gpuFeatureDiscovery: { extraVolumeMounts: [{ name: 'config', mountPath: '/x' }] } })).toEqual([
      'gpuFeatureDiscovery.extraVolumeMounts.0: config names no volume of gpuFeatureDiscovery.extraVolumes: add that volume to gpuFeatureDiscovery.extraVolumes, or mount one it has',
    ]);
  });

  it('refuses a dnsConfig nameserver outside every ipBlock when all DNS peers are ipBlocks; with a selector peer, or IPv6, it does not judge', () => {
    const ipBlocks = { dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }, { ipBlock: { cidr: '10.96.0.0/16', except: ['10.96.5.0/24'] } }] };
    expect(issues({ network: ipBlocks, agent: { dnsConfig: { nameservers: ['169.254.20.10', '10.96.0.10', '10.96.5.3'] } } })).toEqual([
      "agent.dnsConfig.nameservers.2: 10.96.5.3 lies in no ipBlock of network.dnsPeers, and the NetworkPolicies let this pod reach DNS only at those peers (on network.dnsPorts): its lookups there would time out; add an ipBlock peer holding it to network.dnsPeers, or leave nameservers to the cluster DNS",
    ]);
    expect(issues({ network: ipBlocks, controller: { dnsConfig: { nameservers: ['fd00::10'] } } })).toEqual([]);
    // the default peers select kube-dns pods, which its Service address reaches
    expect(issues({ controller: { dnsConfig: { nameservers: ['10.96.0.10'] } } })).toEqual([]);
  });

  it('refuses malformed extraVolumes, extraVolumeMounts and global.imagePullSecrets, naming the path', () => {
    const first = (values: Record<string, unknown>) => issues(values)[0]?.slice(0, issues(values)[0]!.indexOf(': '));
    expect(first({ agent: { extraVolumes: [{ name: 'Bad_Name', emptyDir: {} }] } })).toBe('agent.extraVolumes.0.name');
    expect(first({ agent: { extraVolumes: { name: 'x' } } })).toBe('agent.extraVolumes');
    expect(first({ agent: { extraVolumeMounts: [{ name: 'x' }] } })).toBe('agent.extraVolumeMounts.0.mountPath');
    expect(first({ agent: { extraVolumeMounts: [{ name: 'x', mountPath: 'relative' }] } })).toBe('agent.extraVolumeMounts.0.mountPath');
    expect(first({ agent: { extraVolumeMounts: [{ name: 'x', mountPath: '/x', mountPropagation: 'Bidirectional' }] } })).toBe('agent.extraVolumeMounts.0.mountPropagation');
    expect(first({ agent: { extraVolumeMounts: [{ name: 'x', mountPath: '/x', propagation: 'None' }] } })).toBe('agent.extraVolumeMounts.0');
    expect(first({ artifactCache: { filler: { extraVolumes: [] } } })).toBe('artifactCache.filler');
    expect(first({ global: { imagePullSecrets: [{ secret: 'x' }] } })).toBe('global.imagePullSecrets.0');
    expect(first({ global: { imagePullSecrets: [''] } })).toBe('global.imagePullSecrets.0');
    expect(first({ agent: { hostAliases: [{ ip: '10.0.0.300', hostnames: ['a.example'] }] } })).toBe('agent.hostAliases.0.ip');
    expect(first({ agent: { hostAliases: [{ ip: '10.0.0.3', hostnames: [] }] } })).toBe('agent.hostAliases.0.hostnames');
    expect(first({ controller: { dnsConfig: { nameservers: ['kube-dns'] } } })).toBe('controller.dnsConfig.nameservers.0');
    expect(first({ controller: { dnsConfig: { options: [{ value: '2' }] } } })).toBe('controller.dnsConfig.options.0.name');
    expect(issues({ egress: { hostAliases: [{ ip: 'fd00::1', hostnames: ['proxy.corp.example'] }], dnsConfig: { nameservers: ['10.96.0.10'], options: [{ name: 'ndots', value: '2' }] } } })).toEqual([]);
  });
});
