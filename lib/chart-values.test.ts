import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { IMAGE_REGISTRY, imageBlocks, imageErrors, imageReference, relocatedRepository, splitRepository } from './chart-values.ts';
import { defaultObservabilityValues, observabilityCrossFieldErrors, observabilityValuesObjectSchema, observabilityValuesSchema, PROMETHEUS_IMAGE } from './observability-values-schema.ts';
import { CHART_APP_VERSION, crossFieldErrors, defaultValues, KUBECTL_IMAGE, renderRuntimeConfig, valuesSchema } from './values-schema.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const text = (f: string) => readFileSync(join(root, f), 'utf8');
const appVersion = (chart: string) => (parse(text(`charts/${chart}/Chart.yaml`)) as { appVersion: string }).appVersion;
const D = 'sha256:' + 'ab'.repeat(32);
const TOKEN = 'rlm_jt_0123456789abcdefghijkl';

describe('image blocks of both charts', () => {
  it('the repository holds no digest: every default digest is empty', () => {
    for (const { path, image } of [...imageBlocks(defaultValues()), ...imageBlocks(defaultObservabilityValues())]) expect(image.digest, path).toBe('');
    expect(imageBlocks(defaultValues()).map((b) => b.path)).toEqual([
      'egress.image',
      'artifactCache.filler.image',
      'agent.image',
      'controller.image',
      'gpuFeatureDiscovery.image',
      'crdUpgradeHook.image',
    ]);
    expect(imageBlocks(defaultObservabilityValues()).map((b) => b.path)).toEqual(['prometheus.image', 'grafana.image']);
  });

  it('name only images this repository builds: the runtime at the chart appVersion, kubectl and Prometheus at the versions it builds; no Grafana', () => {
    const v = defaultValues();
    for (const { path, image } of imageBlocks(v))
      if (path !== 'crdUpgradeHook.image') expect(imageReference(image, CHART_APP_VERSION), path).toBe(`registry.rlmesh.dev/rlmesh/rlmesh-runtime:${CHART_APP_VERSION}`);
    expect(CHART_APP_VERSION).toBe(appVersion('rlmesh-runtime'));
    // kubectl: the version test/cluster/build-binaries.sh builds
    const k8s = /^K8S_VERSION="\$\{K8S_VERSION:-(v[0-9.]+)\}"$/m.exec(text('test/cluster/build-binaries.sh'))?.[1];
    expect(imageReference(v.crdUpgradeHook.image)).toBe(`registry.rlmesh.dev/rlmesh/kubectl:${k8s}`);
    expect(KUBECTL_IMAGE.tag).toBe(k8s);
    // Prometheus: the version test/observability/build-prometheus.sh builds, the observability chart's appVersion
    const prom = /^PROMETHEUS_VERSION="\$\{PROMETHEUS_VERSION:-(v[0-9.]+)\}"$/m.exec(text('test/observability/build-prometheus.sh'))?.[1];
    const o = defaultObservabilityValues();
    expect(imageReference(o.prometheus.image)).toBe(`registry.rlmesh.dev/rlmesh/prometheus:${prom}`);
    expect(PROMETHEUS_IMAGE.tag).toBe(prom);
    expect(appVersion('rlmesh-observability')).toBe(prom);
    expect(o.grafana.image).toEqual({ repository: '', tag: '', digest: '', pullPolicy: 'IfNotPresent' });
  });

  it('repository@digest when a digest is set, else repository:tag, the default tag standing in for an empty one', () => {
    expect(imageReference({ repository: 'r.example/a', tag: '1.0', digest: D })).toBe(`r.example/a@${D}`);
    expect(imageReference({ repository: 'r.example/a', tag: '1.0', digest: '' })).toBe('r.example/a:1.0');
    expect(imageReference({ repository: 'r.example/a', tag: '', digest: '' }, '0.1.0')).toBe('r.example/a:0.1.0');
    expect(imageReference({ repository: 'r.example/a', tag: '1.0', digest: '' }, '0.1.0')).toBe('r.example/a:1.0');
    expect(() => imageReference({ repository: 'r.example/a', tag: '', digest: '' })).toThrow(/neither a tag nor a digest/);
    expect(() => imageReference({ repository: 'r.example/a', tag: '', digest: 'sha256:abc' })).toThrow(/must be empty or sha256:/);
  });

  it('splits a repository as container runtimes do: a first component with a dot, a port or localhost is the registry, else Docker Hub', () => {
    expect(splitRepository('registry.rlmesh.dev/rlmesh/rlmesh-runtime')).toEqual({ registry: 'registry.rlmesh.dev', path: 'rlmesh/rlmesh-runtime' });
    expect(splitRepository('localhost:5000/a/b')).toEqual({ registry: 'localhost:5000', path: 'a/b' });
    expect(splitRepository('localhost/a')).toEqual({ registry: 'localhost', path: 'a' });
    expect(splitRepository('bitnami/kubectl')).toEqual({ registry: 'docker.io', path: 'bitnami/kubectl' });
    expect(splitRepository('busybox')).toEqual({ registry: 'docker.io', path: 'library/busybox' });
  });

  it('relocates to the mirror (path kept), else the platform registry to controlPlane.registryHost, else leaves the repository', () => {
    const runtime = 'registry.rlmesh.dev/rlmesh/rlmesh-runtime';
    expect(relocatedRepository(runtime, {})).toBe(runtime);
    expect(relocatedRepository(runtime, { registryHost: 'registry.rlmesh.dev' })).toBe(runtime);
    expect(relocatedRepository(runtime, { registryHost: 'registry.staging.example' })).toBe('registry.staging.example/rlmesh/rlmesh-runtime');
    expect(relocatedRepository('ghcr.io/acme/tool', { registryHost: 'registry.staging.example' })).toBe('ghcr.io/acme/tool');
    expect(relocatedRepository(runtime, { mirror: 'mirror.example:5000/cache/', registryHost: 'registry.staging.example' })).toBe('mirror.example:5000/cache/rlmesh/rlmesh-runtime');
    expect(relocatedRepository('busybox', { mirror: 'mirror.example' })).toBe('mirror.example/library/busybox');
    expect(imageReference({ repository: runtime, tag: '1.0', digest: D }, '', { mirror: 'mirror.example' })).toBe(`mirror.example/rlmesh/rlmesh-runtime@${D}`);
  });

  it('global.imageRegistry takes a host, host:port or host/path, never a scheme, and is refused at its path in both charts', () => {
    for (const ok of ['', 'mirror.example', 'mirror.example:5000', 'harbor.corp.example/proxy-cache', 'mirror.example:5000/a/b_c']) expect(IMAGE_REGISTRY.test(ok), ok).toBe(true);
    for (const bad of ['https://mirror.example', 'mirror.example/', 'Mirror.Example', 'mirror.example:port', 'mirror example']) expect(IMAGE_REGISTRY.test(bad), bad).toBe(false);
    for (const schema of [valuesSchema, observabilityValuesSchema]) {
      const r = schema.safeParse({ joinToken: TOKEN, global: { imageRegistry: 'https://mirror.example' } });
      expect(r.success).toBe(false);
      expect(r.error!.issues[0]!.path.join('.')).toBe('global.imageRegistry');
      expect(r.error!.issues[0]!.message).toMatch(/without a scheme/);
    }
  });

  it('the preflight probe image in the runtime config follows the same rule', () => {
    expect(renderRuntimeConfig(valuesSchema.parse({ joinToken: TOKEN })).preflight?.networkPolicyProbe.image).toBe(`registry.rlmesh.dev/rlmesh/rlmesh-runtime:${CHART_APP_VERSION}`);
    const pinned = valuesSchema.parse({ joinToken: TOKEN, controller: { image: { digest: D } } });
    expect(renderRuntimeConfig(pinned).preflight?.networkPolicyProbe.image).toBe(`registry.rlmesh.dev/rlmesh/rlmesh-runtime@${D}`);
  });

  it('refuses a malformed digest with a clear message, at its path', () => {
    for (const bad of ['latest', 'sha256:abc', `sha512:${'ab'.repeat(32)}`, D.toUpperCase(), `${D} `]) {
      const r = valuesSchema.safeParse({ joinToken: TOKEN, agent: { image: { digest: bad } } });
      expect(r.success, bad).toBe(false);
      expect(r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toContain(
        'agent.image.digest: must be empty or sha256: followed by 64 lowercase hex digits (the digest your registry reports for the image)',
      );
    }
    // the same rule as the templates state it (for --skip-schema-validation)
    expect(imageErrors({ agent: { image: { repository: 'r', tag: '', digest: 'latest' } } }, [])).toEqual([
      {
        path: 'agent.image.digest',
        message: 'agent.image.digest "latest" is not an image digest: set sha256: followed by the 64 lowercase hex digits your registry reports for the image, or leave it empty to pull agent.image.repository:agent.image.tag',
      },
    ]);
  });

  it('an image with neither tag nor digest: refused where no appVersion stands in (kubectl, Prometheus, Grafana)', () => {
    expect(crossFieldErrors(valuesSchema.parse({ joinToken: TOKEN, agent: { image: { tag: '' } } }))).toEqual([]);
    expect(crossFieldErrors({ ...defaultValues(), joinToken: TOKEN, crdUpgradeHook: { ...defaultValues().crdUpgradeHook, image: { ...KUBECTL_IMAGE, tag: '', pullPolicy: 'IfNotPresent' } } })).toEqual([
      { path: 'crdUpgradeHook.image.tag', message: 'crdUpgradeHook.image.tag and crdUpgradeHook.image.digest are both empty: set the tag (or the digest) of the image to pull' },
    ]);
    const base = { prometheus: { clusterLabel: 'c_1' } };
    expect(observabilityValuesSchema.safeParse({ prometheus: { ...base.prometheus, image: { tag: '' } } }).error?.issues.map((i) => i.path.join('.'))).toEqual(['prometheus.image.tag']);
    expect(observabilityValuesSchema.safeParse({ prometheus: { ...base.prometheus, image: { tag: '', digest: D } } }).success).toBe(true);
  });

  it('grafana.enabled needs an image: the chart names none', () => {
    const base = { prometheus: { clusterLabel: 'c_1' }, grafana: { enabled: true, adminPasswordSecretName: 'g' } };
    const paths = (v: unknown) => observabilityCrossFieldErrors(observabilityValuesObjectSchema.parse(v)).map((e) => e.path);
    const noImage = observabilityValuesSchema.safeParse(base);
    expect(noImage.success).toBe(false);
    expect(noImage.error!.issues.map((i) => i.message).join('\n')).toMatch(/grafana.enabled is true but grafana.image.repository is empty: this chart names no Grafana image.*mirror the Grafana version you trust/);
    expect(paths({ ...base, grafana: { ...base.grafana, image: { repository: 'mirror.example.com/grafana/grafana' } } })).toEqual(['grafana.image.tag']);
    expect(observabilityValuesSchema.safeParse({ ...base, grafana: { ...base.grafana, image: { repository: 'mirror.example.com/grafana/grafana', tag: '12.1.1' } } }).success).toBe(true);
    expect(observabilityValuesSchema.safeParse({ ...base, grafana: { ...base.grafana, image: { repository: 'mirror.example.com/grafana/grafana', digest: D } } }).success).toBe(true);
    // off: no image needed
    expect(observabilityValuesSchema.safeParse({ prometheus: { clusterLabel: 'c_1' } }).success).toBe(true);
  });
});
