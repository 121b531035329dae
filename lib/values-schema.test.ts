import { describe, expect, it } from 'vitest';
import { hostnameSchema, runtimeConfigSchema } from './runtime-config.ts';
import { crossFieldErrors, defaultValues, domainPattern, hostnamePattern, renderRuntimeConfig, spoolMaxBytes, valuesSchema } from './values-schema.ts';

const TOKEN = 'rlm_jt_0123456789abcdefghijkl';

describe('values schema', () => {
  it('its hostname pattern (RE2-safe, for Helm) agrees with the runtime config hostnameSchema', () => {
    const samples = ['api.rlmesh.dev', 'a', 'a-b.c', 'x'.repeat(63) + '.dev', '-a.dev', 'a-.dev', 'A.dev', 'a..dev', 'a.dev.', 'https://a.dev', 'a.dev:443', 'a.dev/x', '*.a.dev', 'a_b.dev'];
    for (const s of samples) expect(hostnamePattern.test(s) && s.length <= 253, s).toBe(hostnameSchema.safeParse(s).success);
  });

  it('domains: bare hostnames or a leading *. wildcard only', () => {
    for (const ok of ['my-inputs.s3.eu-west-1.amazonaws.com', '*.huggingface.co']) expect(domainPattern.test(ok), ok).toBe(true);
    for (const bad of ['*', 'a.*.co', '**.a.co', 'https://a.co', 'a.co:443', 'a.co/p', '*a.co']) expect(domainPattern.test(bad), bad).toBe(false);
  });

  it('defaults are the spec defaults', () => {
    const d = defaultValues();
    expect(d.network.dnsPeers).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
    ]);
    expect(d.network.dnsPorts).toEqual([53]);
    expect(d.artifactCache.storage.sharedPvc).toEqual({ accessModes: ['ReadWriteOnce'], size: '100Gi' });
    expect(d.agent.spool.size).toBe('10Gi');
    expect(d.gpuFeatureDiscovery.enabled).toBe(true);
    expect(d.observability.enabled).toBe(false);
    expect(d.controlPlane.apiHost).toBe('api.rlmesh.dev');
    expect(d.controlPlane.registryHost).toBe('registry.rlmesh.dev');
  });

  it('cross-field rules', () => {
    const v = (o: object) => valuesSchema.safeParse(o);
    expect(v({ joinToken: TOKEN }).success).toBe(true);
    expect(v({ credentials: { controlSecret: 'a', pullSecret: 'b' } }).success).toBe(true);
    expect(v({}).error?.issues[0]?.path).toEqual(['joinToken']);
    expect(v({ joinToken: TOKEN, artifactCache: { storage: { sharedPvc: { accessModes: ['ReadWriteMany'] } } } }).error?.issues[0]?.path).toEqual(['storage', 'className']);
    expect(v({ joinToken: TOKEN, storage: { className: 'nfs' }, artifactCache: { storage: { sharedPvc: { accessModes: ['ReadWriteMany'] } } } }).success).toBe(true);
    expect(crossFieldErrors(defaultValues()).map((e) => e.path)).toEqual(['joinToken']);
  });

  it('spool bound: 90% of the spool PVC', () => {
    expect(spoolMaxBytes('10Gi')).toBe(Math.floor(10 * 2 ** 30 * 0.9));
    expect(spoolMaxBytes('500M')).toBe(450_000_000);
  });

  it('renderRuntimeConfig gives a valid runtime config with the built-in hosts first', () => {
    const values = valuesSchema.parse({ joinToken: TOKEN, egress: { extraDomains: ['api.rlmesh.dev', 'x.example.org'] } });
    const cfg = renderRuntimeConfig(values);
    expect(runtimeConfigSchema.parse(cfg)).toEqual(cfg);
    expect(cfg.egress.allowedDomains).toEqual(['api.rlmesh.dev', 'registry.rlmesh.dev', 'x.example.org']);
    expect(cfg.credentials).toMatchObject({ controlSecret: 'rlmesh-cluster-control', pullSecret: 'rlmesh-registry-pull', joinTokenProvided: true });
    expect(cfg.egress.proxyUrl).toBe('http://rlmesh-egress-proxy.rlmesh-system.svc:3128');
  });
});
