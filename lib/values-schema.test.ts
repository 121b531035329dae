import { describe, expect, it } from 'vitest';
import { hostnameSchema, runtimeConfigSchema } from './runtime-config.ts';
import { defaultObservabilityValues, observabilityValuesObjectSchema } from './observability-values-schema.ts';
import { parseQuantity } from './quantity.ts';
import { crossFieldErrors, defaultValues, domainPattern, EPHEMERAL_STORAGE, hostnamePattern, POD_BLOCKS, renderRuntimeConfig, spoolMaxBytes, TMP_SIZE_LIMIT, valuesObjectSchema, valuesSchema } from './values-schema.ts';

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

  it('every pod block: automatic pull policy, ephemeral-storage requests and limits; the controller and proxy spread softly by hostname', () => {
    const d = defaultValues() as unknown as Record<string, Record<string, unknown>>;
    for (const block of POD_BLOCKS) {
      const b = block.split('.').reduce((o: Record<string, unknown>, k) => o[k] as Record<string, unknown>, d) as {
        image: { pullPolicy: string };
        resources: { requests: Record<string, string>; limits: Record<string, string> };
      };
      expect(b.image.pullPolicy, block).toBe('');
      expect(b.resources.requests['ephemeral-storage'], block).toBe(EPHEMERAL_STORAGE.requests);
      expect(b.resources.limits['ephemeral-storage'], block).toBe(EPHEMERAL_STORAGE.limits);
    }
    expect(parseQuantity(EPHEMERAL_STORAGE.limits)).toBeGreaterThanOrEqual(parseQuantity(TMP_SIZE_LIMIT) + 5 * 10 * 2 ** 20);
    for (const c of [defaultValues().controller, defaultValues().egress])
      expect(c.topologySpread).toEqual({ whenUnsatisfiable: 'ScheduleAnyway', maxSkew: 1, topologyKeys: ['kubernetes.io/hostname'] });
    // the observability chart keeps its own image blocks as they were
    expect(defaultObservabilityValues().prometheus.image.pullPolicy).toBe('IfNotPresent');
    expect(Object.keys(defaultObservabilityValues().prometheus.resources.limits)).toEqual(['cpu', 'memory']);
  });

  it('ephemeral-storage rule: each limit at least its request and the /tmp emptyDir', () => {
    const paths = (o: object) => crossFieldErrors(valuesObjectSchema.parse({ joinToken: TOKEN, ...o })).map((e) => e.message);
    expect(paths({})).toEqual([]);
    expect(paths({ agent: { resources: { requests: { 'ephemeral-storage': '1Gi' }, limits: { 'ephemeral-storage': '1Gi' } } } })).toEqual([]);
    expect(paths({ crdUpgradeHook: { resources: { requests: { 'ephemeral-storage': '1Gi' } } } })).toEqual([
      'crdUpgradeHook.resources.limits.ephemeral-storage 256Mi is below crdUpgradeHook.resources.requests.ephemeral-storage 1Gi: set the limit to at least the request',
    ]);
    expect(paths({ artifactCache: { filler: { resources: { requests: { 'ephemeral-storage': '1M' }, limits: { 'ephemeral-storage': '64M' } } } } })).toEqual([
      "artifactCache.filler.resources.limits.ephemeral-storage 64M is below 64Mi, the size of the pod's /tmp emptyDir, which counts against it: set at least 64Mi",
    ]);
    expect(valuesSchema.safeParse({ joinToken: TOKEN, gpuFeatureDiscovery: { resources: { limits: { 'ephemeral-storage': '1Gi' } } } }).success).toBe(true);
    expect(valuesSchema.safeParse({ joinToken: TOKEN, gpuFeatureDiscovery: { resources: { limits: { 'ephemeral-storage': '16Mi' } } } }).error?.issues.map((i) => i.path.join('.'))).toEqual([
      'gpuFeatureDiscovery.resources.limits.ephemeral-storage',
      'gpuFeatureDiscovery.resources.limits.ephemeral-storage',
    ]);
  });

  it('rlmesh-runs: the LimitRange has a max (its defaults and the filler within it) and the quota bounds CPU, memory and GPUs by default', () => {
    const v = defaultValues().evaluations;
    expect(v.limitRange.max).toEqual({ cpu: '32', memory: '256Gi', 'ephemeral-storage': '200Gi' });
    expect(v.resourceQuota.hard).toEqual({ pods: '1000', 'requests.cpu': '256', 'requests.memory': '1Ti', 'limits.memory': '1Ti', 'requests.nvidia.com/gpu': '16', 'requests.amd.com/gpu': '16' });
    expect(v.hostUsers).toBe('auto');
    const errors = (o: object) => crossFieldErrors(valuesObjectSchema.parse({ joinToken: TOKEN, ...o })).map((e) => `${e.path}: ${e.message}`);
    expect(errors({ evaluations: { limitRange: { max: { cpu: '8', memory: '16Gi', 'ephemeral-storage': '20Gi' } } } })).toEqual([]);
    expect(errors({ evaluations: { limitRange: { max: { cpu: '2', memory: '4Gi', 'ephemeral-storage': '20Gi' } } } })).toEqual([
      'evaluations.limitRange.default.cpu: evaluations.limitRange.default.cpu 4 is above evaluations.limitRange.max.cpu 2: the API server would refuse every pod in rlmesh-runs that gets it; lower it, or raise the max',
      'evaluations.limitRange.default.memory: evaluations.limitRange.default.memory 8Gi is above evaluations.limitRange.max.memory 4Gi: the API server would refuse every pod in rlmesh-runs that gets it; lower it, or raise the max',
    ]);
    expect(errors({ evaluations: { limitRange: { max: { cpu: '500m', memory: '8Gi', 'ephemeral-storage': '20Gi' }, default: { cpu: '500m', memory: '1Gi', 'ephemeral-storage': '1Gi' } } } })).toEqual([
      'artifactCache.filler.resources.limits.cpu: artifactCache.filler.resources.limits.cpu 1 is above evaluations.limitRange.max.cpu 500m: the API server would refuse every pod in rlmesh-runs that gets it; lower it, or raise the max',
    ]);
    expect(valuesSchema.safeParse({ joinToken: TOKEN, evaluations: { hostUsers: 'yes' } }).error?.issues.map((i) => i.path.join('.'))).toEqual(['evaluations.hostUsers']);
    // a quoted "true" is the usual slip in YAML: the message says what is meant
    expect(valuesSchema.safeParse({ joinToken: TOKEN, evaluations: { hostUsers: 'true' } }).error?.issues.map((i) => i.message)).toEqual([expect.stringMatching(/must be auto, true or false .*not a string/)]);
  });

  it('quantities in bytes', () => {
    expect(parseQuantity('64Mi')).toBe(64 * 2 ** 20);
    expect(parseQuantity('1.5Gi')).toBe(1.5 * 2 ** 30);
    expect(parseQuantity('500M')).toBe(5e8);
    expect(parseQuantity('1024')).toBe(1024);
  });

  it('spool bound: 90% of the spool PVC', () => {
    expect(spoolMaxBytes('10Gi')).toBe(Math.floor(10 * 2 ** 30 * 0.9));
    expect(spoolMaxBytes('500M')).toBe(450_000_000);
  });

  it("evaluations.imagePullSecrets: the operator's own Secrets, each once, each with its repository prefixes, into the runtime config", () => {
    const errs = (o: object) => crossFieldErrors(valuesObjectSchema.parse(o));
    const R = ['ghcr.io/corp/'];
    const ok = valuesSchema.parse({ joinToken: TOKEN, evaluations: { extraRegistries: R, imagePullSecrets: [{ name: 'ghcr-pull', registries: R }] } });
    expect(crossFieldErrors(ok)).toEqual([]);
    expect(renderRuntimeConfig(ok).evaluations?.imagePullSecrets).toEqual([{ name: 'ghcr-pull', registries: R }]);
    expect(renderRuntimeConfig(ok).agent.imageRegistries).toEqual(['registry.rlmesh.dev', 'ghcr.io/corp/']);
    expect(renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN })).evaluations?.imagePullSecrets).toEqual([]);
    expect(errs({ joinToken: TOKEN, evaluations: { imagePullSecrets: [{ name: 'rlmesh-registry-pull', registries: R }] } })).toEqual([
      { path: 'evaluations.imagePullSecrets.0.name', message: expect.stringContaining("rlmesh-registry-pull is the platform's pull Secret") },
    ]);
    const bring = { credentials: { controlSecret: 'c', pullSecret: 'mine' }, evaluations: { imagePullSecrets: [{ name: 'a', registries: R }, { name: 'mine', registries: R }, { name: 'a', registries: R }] } };
    expect(errs(bring).map((e) => e.message)).toEqual([expect.stringMatching(/^mine is the platform's pull Secret/), 'a is listed more than once: list each pull Secret once']);
    expect(errs(bring).map((e) => e.path)).toEqual(['evaluations.imagePullSecrets.1.name', 'evaluations.imagePullSecrets.2.name']);
    expect(valuesSchema.safeParse({ joinToken: TOKEN, evaluations: { imagePullSecrets: [{ name: 'Not_A_Name', registries: R }] } }).error?.issues[0]?.path).toEqual(['evaluations', 'imagePullSecrets', 0, 'name']);
    // a Secret for no image, or for a bare host: refused with what to write
    expect(errs({ joinToken: TOKEN, evaluations: { imagePullSecrets: [{ name: 'corp' }, { name: 'other', registries: ['registry.corp.example', 'registry.corp.example/evals/'] }] } })).toEqual([
      { path: 'evaluations.imagePullSecrets.0.registries', message: expect.stringMatching(/^corp names no repository prefixes: .* confused deputy.*registries: \[registry\.corp\.example\/evals\/\]$/) },
      { path: 'evaluations.imagePullSecrets.1.registries.0', message: 'registry.corp.example is a registry host, and registries takes repository prefixes: write registry.corp.example/evals/ (the repositories under evals/) or registry.corp.example/ (every repository of that registry)' },
    ]);
  });

  it('evaluations.extraRegistries: repository prefixes; a bare host, which the value took before, is refused naming the prefix to write', () => {
    const errs = (r: string[]) => crossFieldErrors(valuesObjectSchema.parse({ joinToken: TOKEN, evaluations: { extraRegistries: r } }));
    expect(errs(['registry.corp.example/evals/', 'registry.corp.example:5000/', 'docker.io/library/'])).toEqual([]);
    expect(errs(['registry.corp.example/evals/', 'registry.corp.example:5000'])).toEqual([
      { path: 'evaluations.extraRegistries.1', message: expect.stringMatching(/^registry\.corp\.example:5000 is a registry host, and evaluations\.extraRegistries takes repository prefixes \(it took hosts before\): write registry\.corp\.example:5000\/evals\/ .* or registry\.corp\.example:5000\/ /) },
    ]);
    for (const bad of ['registry.corp.example/evals', 'registry.corp.example/evals/gym:1', 'https://registry.corp.example/', 'registry.corp.example//', 'Registry.corp.example/', 'registry.corp.example/Evals/']) {
      expect(valuesSchema.safeParse({ joinToken: TOKEN, evaluations: { extraRegistries: [bad] } }).error?.issues[0]?.path, bad).toEqual(['evaluations', 'extraRegistries', 0]);
    }
  });

  it('controlPlane.caBundleFrom: exactly one source, not beside caBundle; the runtime config trusts it at the same path', () => {
    const errs = (cp: object) => crossFieldErrors(valuesObjectSchema.parse({ joinToken: TOKEN, controlPlane: cp })).map((e) => e.path + ': ' + e.message);
    const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    const fromCm = valuesSchema.parse({ joinToken: TOKEN, controlPlane: { caBundleFrom: { configMap: { name: 'corp-trust' } } } });
    expect(fromCm.controlPlane.caBundleFrom).toEqual({ configMap: { name: 'corp-trust', key: 'ca.crt' } });
    expect(renderRuntimeConfig(fromCm).controlPlane.caBundlePath).toBe('/etc/rlmesh/ca/ca.crt');
    expect(renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN })).controlPlane.caBundlePath).toBeUndefined();
    expect(errs({ caBundleFrom: { secret: { name: 's', key: 'bundle.pem' } } })).toEqual([]);
    expect(errs({ caBundle: pem, caBundleFrom: { secret: { name: 's' } } })).toEqual([expect.stringMatching(/^controlPlane.caBundleFrom: controlPlane.caBundle and controlPlane.caBundleFrom are both set/)]);
    expect(errs({ caBundleFrom: { secret: { name: 's' }, configMap: { name: 'c' } } })).toEqual([expect.stringMatching(/^controlPlane.caBundleFrom: names both a configMap and a secret/)]);
    expect(errs({ caBundleFrom: {} })).toEqual([expect.stringMatching(/^controlPlane.caBundleFrom: is set but names neither/)]);
    expect(valuesSchema.safeParse({ joinToken: TOKEN, controlPlane: { caBundleFrom: { configMap: { name: 'c', key: 'a/b' } } } }).error?.issues[0]?.path).toEqual(['controlPlane', 'caBundleFrom', 'configMap', 'key']);
  });

  it('controlPlane.pinCaBundle: off by default (the bundle adds to the system roots), on only with a bundle to pin', () => {
    const errs = (cp: object) => crossFieldErrors(valuesObjectSchema.parse({ joinToken: TOKEN, controlPlane: cp })).map((e) => e.path + ': ' + e.message);
    const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    expect(renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN, controlPlane: { caBundle: pem } })).controlPlane.pinCaBundle).toBe(false);
    expect(renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN, controlPlane: { caBundle: pem, pinCaBundle: true } })).controlPlane.pinCaBundle).toBe(true);
    expect(errs({ caBundle: pem, pinCaBundle: true })).toEqual([]);
    expect(errs({ caBundleFrom: { configMap: { name: 'corp-trust' } }, pinCaBundle: true })).toEqual([]);
    expect(errs({ pinCaBundle: true })).toEqual([expect.stringMatching(/^controlPlane.pinCaBundle: is true but there is no CA bundle to pin: set controlPlane.caBundle/)]);
  });

  it('refuses a bad evaluation toleration effect, proxy credentials Secret name and CA bundle Secret name at their paths', () => {
    const paths = (o: object) => valuesSchema.safeParse({ joinToken: TOKEN, ...o }).error?.issues.map((i) => i.path.join('.'));
    expect(paths({ evaluations: { tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'Sometimes' }] } })).toEqual(['evaluations.tolerations.0.effect']);
    expect(paths({ controlPlane: { proxy: { url: 'http://192.0.2.10:3128', existingSecret: 'Corp_Proxy' } } })).toEqual(['controlPlane.proxy.existingSecret']);
    expect(paths({ controlPlane: { caBundleFrom: { secret: { name: 'Corp_Trust' } } } })).toEqual(['controlPlane.caBundleFrom.secret.name']);
  });

  it("controlPlane.addresses and the observability chart's remoteWriteAddresses take private ranges, never one as wide as every address", () => {
    const paths = (o: object) => valuesSchema.safeParse({ joinToken: TOKEN, ...o }).error?.issues.map((i) => i.path.join('.'));
    expect(paths({ controlPlane: { addresses: ['10.213.0.1/32', 'fd00:10::/64'] } })).toBeUndefined();
    expect(paths({ controlPlane: { addresses: ['0.0.0.0/0'] } })).toEqual(['controlPlane.addresses.0']);
    expect(paths({ controlPlane: { addresses: ['::/0'] } })).toEqual(['controlPlane.addresses.0']);
    expect(observabilityValuesObjectSchema.safeParse({ prometheus: { remoteWriteAddresses: ['0.0.0.0/1'] } }).error?.issues.map((i) => i.path.join('.'))).toEqual(['prometheus.remoteWriteAddresses.0']);
    expect(defaultValues().network.apiServerAddresses).toEqual([]);
    expect(defaultObservabilityValues().network.apiServerAddresses).toEqual([]);
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
