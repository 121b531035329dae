// The charts as the release published them, installed from the local registry:
// every image any of their pods runs (the chart's pods, the CRD upgrade hook,
// the NetworkPolicy probe the controller and preflight create from the runtime
// config) is pinned by digest, is an image this release built, and resolves by
// that digest in the registry the release pushed to. `helm upgrade
// --reuse-values` keeps the pins (they live in the chart's templates, not in
// the values helm carries forward).
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { OFFLINE_API_SERVER } from './chart.ts';
import { helm, kubectl } from '../support/cluster.ts';
import { publisher, registryGet } from '../support/registry.ts';
import { releaseInfo } from '../support/release.ts';
import { ROOT } from '../support/runtime.ts';

const SYS = 'rlmesh-system';
const TOKEN = 'rlm_jt_release0123456789abcdefgh';
const PINNED = /^registry\.rlmesh\.dev\/(rlmesh\/[a-z0-9-]+)@(sha256:[a-f0-9]{64})$/;

type Pod = { containers?: { image: string; imagePullPolicy?: string }[]; initContainers?: { image: string; imagePullPolicy?: string }[] };
const podImages = (spec: Pod | undefined): string[] => [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].map((c) => c.image);

/** every image named in rendered objects: pod templates, Jobs, and "image" fields of the runtime config */
function imagesIn(docs: unknown[]): string[] {
  const out: string[] = [];
  const visit = (v: unknown, key = ''): void => {
    if (typeof v === 'string') {
      if (key === 'image') out.push(v);
      else if (key.endsWith('.json') && v.trimStart().startsWith('{')) visit(JSON.parse(v));
      return;
    }
    if (Array.isArray(v)) v.forEach((x) => visit(x));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) visit(x, k);
  };
  docs.forEach((d) => visit(d));
  return out;
}

async function servedDigest(repository: string, digest: string): Promise<string> {
  const res = await registryGet(repository, `manifests/${digest}`, {
    accept: 'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json',
    creds: publisher(),
  });
  const body = Buffer.from(await res.arrayBuffer());
  expect(res.status, `${repository}@${digest}`).toBe(200);
  return `sha256:${createHash('sha256').update(body).digest('hex')}`;
}

async function expectAllResolve(images: string[]): Promise<string[]> {
  const release = releaseInfo();
  const byDigest = new Map(Object.values(release.images).map((i) => [i.digest, i.repository]));
  const unpinned = images.filter((i) => !PINNED.test(i));
  expect(unpinned).toEqual([]);
  const unique = [...new Set(images)];
  for (const image of unique) {
    const [, repository, digest] = PINNED.exec(image)!;
    expect(byDigest.get(digest!), `${image} is an image this release built`).toBe(repository);
    expect(await servedDigest(repository!, digest!)).toBe(digest);
  }
  return unique;
}

/** the release's objects in both of its namespaces (the cache filler runs in rlmesh-runs) */
const live = (kinds = 'deployments,daemonsets,jobs,configmaps'): unknown[] =>
  [SYS, 'rlmesh-runs'].flatMap((ns) => (JSON.parse(kubectl(['-n', ns, 'get', kinds, '-o', 'json']).stdout) as { items: unknown[] }).items);

beforeAll(() => {
  helm(['uninstall', 'rlmesh', '-n', SYS, '--wait', '--ignore-not-found'], { allowFail: true });
  const { ref, version } = releaseInfo().charts['rlmesh-runtime']!;
  helm(['install', 'rlmesh', ref, '--version', version, '--plain-http', '-n', SYS, '--create-namespace', '--set', `joinToken=${TOKEN}`, '--set', 'gpuFeatureDiscovery.enabled=true']);
});
afterAll(() => {
  helm(['uninstall', 'rlmesh', '-n', SYS, '--wait', '--ignore-not-found'], { allowFail: true });
});

describe('the released charts pin every image they run, and the registry serves each by digest', () => {
  it('rlmesh-runtime installed from oci://: the Deployments, the DaemonSet, the probe image in the runtime config, the CRD hook Job', async () => {
    const hooks = parseAllDocuments(helm(['get', 'hooks', 'rlmesh', '-n', SYS]).stdout).map((d) => d.toJSON() as unknown);
    const images = [...imagesIn(live()), ...imagesIn(hooks)];
    const unique = await expectAllResolve(images);
    const release = releaseInfo();
    expect(unique.sort()).toEqual(
      [`registry.rlmesh.dev/${release.images['kubectl']!.repository}@${release.images['kubectl']!.digest}`, `registry.rlmesh.dev/${release.images['rlmesh-runtime']!.repository}@${release.images['rlmesh-runtime']!.digest}`].sort(),
    );
    // what the controller and preflight run as the NetworkPolicy probe pod
    const config = JSON.parse(kubectl(['-n', SYS, 'get', 'configmap', 'rlmesh-runtime-config', '-o', 'jsonpath={.data.config\\.json}']).stdout) as {
      preflight: { networkPolicyProbe: { image: string } };
    };
    expect(config.preflight.networkPolicyProbe.image).toBe(`registry.rlmesh.dev/rlmesh/rlmesh-runtime@${release.images['rlmesh-runtime']!.digest}`);
    // the chart's pods: every container of every workload
    const workloads = live('deployments,daemonsets') as { metadata: { name: string }; spec: { template: { spec: Pod } } }[];
    expect(workloads.map((w) => w.metadata.name).sort()).toEqual(
      ['rlmesh-artifact-cache-filler', 'rlmesh-cluster-agent', 'rlmesh-cluster-controller', 'rlmesh-egress-proxy', 'rlmesh-gpu-feature-discovery'].sort(),
    );
    for (const w of workloads) for (const i of podImages(w.spec.template.spec)) expect(i).toMatch(PINNED);
    // pinned, so the automatic pull policy is IfNotPresent everywhere, the hook Job too
    const hookJob = hooks.find((h) => (h as { kind?: string }).kind === 'Job') as { spec: { template: { spec: Pod } } } | undefined;
    expect(hookJob, 'the CRD hook Job among the release hooks').toBeDefined();
    for (const spec of [...workloads.map((w) => w.spec.template.spec), hookJob!.spec.template.spec])
      for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) expect(c.imagePullPolicy, c.image).toBe('IfNotPresent');
  });

  it('helm upgrade --reuse-values keeps every pod on the released digests', async () => {
    const { ref, version } = releaseInfo().charts['rlmesh-runtime']!;
    // without the CRD hook: its kubectl image needs the pull credential a join writes, and this release never
    // joins (its token is made up); test/e2e/spec.test.ts runs the hook with the join's credential
    helm(['upgrade', 'rlmesh', ref, '--version', version, '--plain-http', '-n', SYS, '--reuse-values', '--no-hooks']);
    const images = imagesIn(live());
    expect(images.length).toBeGreaterThanOrEqual(6);
    await expectAllResolve(images);
  });

  it('rlmesh-observability from oci://: Prometheus', async () => {
    const { ref, version } = releaseInfo().charts['rlmesh-observability']!;
    const rendered = helm(['template', 'rlmesh-observability', ref, '--version', version, '--plain-http', '-n', SYS, '-f', join(ROOT, 'charts/rlmesh-observability/ci/spec-values.yaml'), ...OFFLINE_API_SERVER]).stdout;
    const unique = await expectAllResolve(imagesIn(parseAllDocuments(rendered).map((d) => d.toJSON() as unknown)));
    const p = releaseInfo().images['prometheus']!;
    expect(unique).toEqual([`registry.rlmesh.dev/${p.repository}@${p.digest}`]);
  });
});
