// Version, node architectures, storage, access modes and GPUs against the real
// local cluster, each in a variant the test sets up and undoes.
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAccessModes } from '../../lib/preflight/checks/access-modes.ts';
import { checkGpuResources } from '../../lib/preflight/checks/gpu-resources.ts';
import { checkKubernetesVersion } from '../../lib/preflight/checks/kubernetes-version.ts';
import { checkNodeArchitecture } from '../../lib/preflight/checks/node-architecture.ts';
import { checkStorageClass, isDefaultClass } from '../../lib/preflight/checks/storage-class.ts';
import { adminKubeConfig, clusterInfo, kubectl } from '../support/cluster.ts';
import { apply, context, kwokNode, TEST_LABEL } from './support.ts';
import { until } from '../support/until.ts';

const ARM = 'rlmesh-pf-arm64-0';
const NOPLUGIN = 'rlmesh-pf-gpu-noplugin-0';
const UNLABELLED = 'rlmesh-pf-gpu-unlabelled-0';
const DEFAULT_ANNOTATION = 'storageclass.kubernetes.io/is-default-class';
let defaults: string[] = [];
// these checks count schedulable nodes (no NoSchedule taint): for this file the cluster's kwok nodes
// are what a user's untainted nodes would be, so their kwok taint (test/cluster/nodes.ts) is lifted
const KWOK_TAINT = 'kwok.x-k8s.io/node=fake:NoSchedule';
let untainted: string[] = [];

beforeAll(async () => {
  untainted = kubectl(['get', 'nodes', '-l', 'type=kwok', '-o', 'jsonpath={range .items[?(@.spec.taints)]}{.metadata.name}{"\\n"}{end}']).stdout.split('\n').filter(Boolean);
  for (const n of untainted) kubectl(['taint', 'node', n, `${KWOK_TAINT}-`]);
  apply(kwokNode(ARM, 'arm', { arch: 'arm64' }));
  apply(kwokNode(NOPLUGIN, 'gpu-noplugin', { labels: { 'nvidia.com/gpu.present': 'true', 'feature.node.kubernetes.io/pci-10de.present': 'true' } }));
  // GPUs advertised, but none of the labels GPU discovery's DaemonSet selects GPU nodes by
  apply(kwokNode(UNLABELLED, 'gpu-unlabelled', { capacity: { 'nvidia.com/gpu': '2' } }));
  const storage = adminKubeConfig().makeApiClient(k8s.StorageV1Api);
  defaults = (await storage.listStorageClass()).items.filter(isDefaultClass).map((c) => c.metadata!.name!);
  expect(defaults.length, 'the local cluster has a default StorageClass').toBeGreaterThan(0);
});

afterAll(() => {
  for (const n of untainted) kubectl(['taint', 'node', n, KWOK_TAINT, '--overwrite']);
  kubectl(['delete', 'node', ARM, NOPLUGIN, UNLABELLED, '--ignore-not-found']);
  kubectl(['delete', 'storageclass', 'rlmesh-pf-static', 'rlmesh-pf-nfs', '--ignore-not-found']);
  kubectl(['delete', 'deviceclass', 'rlmesh-pf.example.com', '--ignore-not-found']);
  for (const name of defaults) kubectl(['annotate', 'storageclass', name, `${DEFAULT_ANNOTATION}=true`, '--overwrite']);
});

describe('kubernetes-version', () => {
  it('passes on the local cluster, naming its version and the floor', async () => {
    const r = await checkKubernetesVersion(context());
    expect(r.verdict).toBe('pass');
    expect(r.found).toBe(`Kubernetes ${clusterInfo().kubernetesVersion} (floor 1.34)`);
  });
});

describe('node-architecture', () => {
  it('warns about an arm64 node beside amd64 nodes, naming it and why it is skipped', async () => {
    const r = await checkNodeArchitecture(context());
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain(`${ARM} (linux/arm64: the runtime images are built for linux/amd64 only, so no runtime or evaluation pod can run there)`);
    expect(r.found).toMatch(/^linux\/amd64: \d+ schedulable node\(s\)/);
  });
  it('fails when the nodes evaluations may use are arm64 only', async () => {
    const r = await checkNodeArchitecture(context({ nodeSelector: `${TEST_LABEL}=arm` }));
    expect(r.verdict).toBe('fail');
    expect(r.found).toBe(`no schedulable linux/amd64 node among 1 node(s) matching ${TEST_LABEL}=arm; skipping 1 node(s): ${ARM} (linux/arm64: the runtime images are built for linux/amd64 only, so no runtime or evaluation pod can run there)`);
    expect(r.fix).toBe('Add a schedulable Linux amd64 node (uncordoned, without NoSchedule taints): the runtime images run on linux/amd64 only.');
  });
  it('passes on the kwok amd64 nodes alone', async () => {
    const r = await checkNodeArchitecture(context({ nodeSelector: `type=kwok,!${TEST_LABEL}` }));
    expect(r.verdict).toBe('pass');
  });
});

describe('storage-class', () => {
  it('passes on the dynamic default StorageClass', async () => {
    const r = await checkStorageClass(context());
    expect(r.verdict).toBe('pass');
    expect(r.found).toContain(`default StorageClass ${defaults[0]} (provisioner rlmesh.dev/local-test-provisioner, dynamic)`);
  });
  it('fails with no default StorageClass and says how to mark one, then passes again once restored', async () => {
    for (const name of defaults) kubectl(['annotate', 'storageclass', name, `${DEFAULT_ANNOTATION}-`]);
    try {
      const r = await checkStorageClass(context());
      expect(r.verdict).toBe('fail');
      expect(r.found).toMatch(/^no default StorageClass \(storage\.className is empty\); StorageClasses: /);
      expect(r.fix).toBe('Set storage.className to one of the StorageClasses listed, or mark one default: kubectl annotate storageclass <name> storageclass.kubernetes.io/is-default-class=true.');
    } finally {
      for (const name of defaults) kubectl(['annotate', 'storageclass', name, `${DEFAULT_ANNOTATION}=true`, '--overwrite']);
    }
    expect((await checkStorageClass(context())).verdict).toBe('pass');
  });
  it('fails on a storage.className without a dynamic provisioner, and on one that does not exist', async () => {
    apply('{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"rlmesh-pf-static"},"provisioner":"kubernetes.io/no-provisioner","volumeBindingMode":"WaitForFirstConsumer"}');
    const r = await checkStorageClass(context({ storageClassName: 'rlmesh-pf-static' }));
    expect(r.verdict).toBe('fail');
    expect(r.found).toMatch(/^storage\.className rlmesh-pf-static has provisioner kubernetes\.io\/no-provisioner: it binds only PersistentVolumes created by hand/);
    const missing = await checkStorageClass(context({ storageClassName: 'rlmesh-pf-missing' }));
    expect(missing).toMatchObject({ verdict: 'fail', fix: 'Set storage.className to one of the StorageClasses listed, or create StorageClass rlmesh-pf-missing.' });
  });
});

describe('access-modes', () => {
  it('warns on ReadWriteOnce with several schedulable nodes, with the exact values to set', async () => {
    const r = await checkAccessModes(context({ nodeSelector: `type=kwok,!${TEST_LABEL}` }));
    const nodes = kubectl(['get', 'nodes', '-l', `type=kwok,!${TEST_LABEL}`, '-o', 'name']).stdout.trim().split('\n');
    expect(nodes.length).toBeGreaterThan(1);
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain(`artifact cache [ReadWriteOnce] with ${nodes.length} schedulable nodes`);
    expect(r.fix).toMatch(/^To run evaluations with artifacts on every node, set storage\.className=.+ and artifactCache\.storage\.sharedPvc\.accessModes=\[ReadWriteMany\]\.$/);
    // kwok-gpu-0 has 8 GPUs, the CPU nodes none: the cache's node may lack what GPU evaluations ask for
    expect(r.found).toContain('fails as CacheNodeCannotRun');
    expect(r.found).toMatch(/the nodes differ in GPUs \(.*kwok-gpu-0: nvidia\.com\/gpu 8.*; \d+ without\)/);
  });
  it('names an RWX-capable StorageClass in the values to set when the cluster has one', async () => {
    apply('{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"rlmesh-pf-nfs"},"provisioner":"nfs.csi.k8s.io"}');
    const r = await checkAccessModes(context({ nodeSelector: `type=kwok,!${TEST_LABEL}` }));
    expect(r.fix).toBe('To run evaluations with artifacts on every node, set storage.className=rlmesh-pf-nfs and artifactCache.storage.sharedPvc.accessModes=[ReadWriteMany].');
  });
  it('passes with ReadWriteMany, and with ReadWriteOnce on a single node', async () => {
    expect((await checkAccessModes(context({ accessModes: ['ReadWriteMany'], storageClassName: 'rlmesh-pf-nfs' }))).verdict).toBe('pass');
    expect((await checkAccessModes(context({ nodeSelector: 'kubernetes.io/hostname=kwok-cpu-0' }))).verdict).toBe('pass');
  });
});

describe('gpu-resources', () => {
  it('passes on the GPU node with discovery on, listing its GPUs', async () => {
    const r = await checkGpuResources(context({ nodeSelector: `type=kwok,!${TEST_LABEL}` }));
    expect(r.verdict).toBe('pass');
    expect(r.found).toContain('kwok-gpu-0: nvidia.com/gpu 8 (NVIDIA-H100-80GB-HBM3)');
  });
  it('warns on a CPU-only view with discovery on: disable it', async () => {
    const r = await checkGpuResources(context({ nodeSelector: 'node.kubernetes.io/instance-type=cpu-16' }));
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain('no node advertises nvidia.com/gpu or amd.com/gpu');
    expect(r.fix).toBe('Set gpuFeatureDiscovery.enabled=false, as no node has a GPU to label.');
    expect((await checkGpuResources(context({ nodeSelector: 'node.kubernetes.io/instance-type=cpu-16', gpuFeatureDiscovery: false }))).verdict).toBe('pass');
  });
  it('warns on a GPU node whose device plugin is missing (vendor labels, no nvidia.com/gpu)', async () => {
    const r = await checkGpuResources(context({ nodeSelector: `${TEST_LABEL}=gpu-noplugin` }));
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain(`GPU hardware without a device plugin resource on ${NOPLUGIN} (NVIDIA hardware labels, no nvidia.com/gpu)`);
    expect(r.fix).toBe('Install the NVIDIA device plugin or GPU Operator on those nodes so they advertise the GPU resource evaluation pods request.');
  });
  it("warns on a GPU node without a model label that GPU discovery's node terms do not select, naming it", async () => {
    const r = await checkGpuResources(context({ nodeSelector: `${TEST_LABEL}=gpu-unlabelled` }));
    expect(r.verdict).toBe('warn');
    expect(r.found).toContain(`${UNLABELLED}: nvidia.com/gpu 2`);
    expect(r.found).toContain(`GPU discovery does not run on ${UNLABELLED}: none of the required node terms of gpuFeatureDiscovery.affinity matches their labels`);
    expect(r.fix).toMatch(/^Label those nodes nvidia\.com\/gpu\.present=true or amd\.com\/gpu\.present=true/);
  });
  it('lists DRA DeviceClasses from resource.k8s.io', async () => {
    apply('{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"rlmesh-pf.example.com"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \\"rlmesh-pf.example.com\\""}}]}}');
    const r = await until('the DeviceClass in the check', async () => {
      const res = await checkGpuResources(context({ nodeSelector: 'node.kubernetes.io/instance-type=cpu-16' }));
      return res.found.includes('rlmesh-pf.example.com') ? res : undefined;
    });
    expect(r.verdict).toBe('warn');
    expect(r.fix).toMatch(/^Evaluation pods request GPUs as nvidia\.com\/gpu or amd\.com\/gpu/);
  });
});
