import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from '../lib/runtime-config.ts';
import { dockerConfigJson } from '../lib/credential-secret.ts';
import { CredentialStore } from './credentials.ts';

const PULL = '{"auths":{"registry.rlmesh.dev":{"auth":"eDp5"}}}';

/** The Secrets API in memory, and a kube config whose clients are it and the agent's ClusterRole. */
function cluster(commonLabels: Record<string, string>) {
  const secrets = new Map<string, k8s.V1Secret>();
  const key = (namespace: string, name: string) => `${namespace}/${name}`;
  const core = {
    readNamespacedSecret: async ({ namespace, name }: { namespace: string; name: string }) => {
      const s = secrets.get(key(namespace, name));
      if (!s) throw Object.assign(new Error('not found'), { code: 404 });
      return structuredClone(s);
    },
    createNamespacedSecret: async ({ namespace, body }: { namespace: string; body: k8s.V1Secret }) => void secrets.set(key(namespace, body.metadata!.name!), body),
    replaceNamespacedSecret: async ({ namespace, name, body }: { namespace: string; name: string; body: k8s.V1Secret }) => void secrets.set(key(namespace, name), body),
  };
  const rbac = { readClusterRole: async () => ({ metadata: { uid: 'role-uid' } }) };
  const kc = { makeApiClient: (api: unknown) => (api === k8s.CoreV1Api ? core : rbac) } as unknown as k8s.KubeConfig;
  const cfg = runtimeConfigSchema.parse({
    controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {},
    pods: { arbitraryUid: false, commonLabels, podLabels: {}, podAnnotations: {} },
  });
  return { store: new CredentialStore(kc, cfg), secrets };
}

describe("the agent's Secrets and the chart's commonLabels", () => {
  it('every Secret a join writes carries them beneath its own labels', async () => {
    const { store, secrets } = cluster({ team: 'ml', 'app.kubernetes.io/managed-by': 'spoofed' });
    await store.writeJoined({ clusterId: 'c1', control: 'rlm_cc_x', pull: PULL }, 'hash');
    expect([...secrets.keys()].sort()).toEqual(['rlmesh-runs/rlmesh-registry-pull', 'rlmesh-system/rlmesh-cluster-control', 'rlmesh-system/rlmesh-registry-join-crd-upgrade', 'rlmesh-system/rlmesh-registry-pull']);
    for (const s of secrets.values()) {
      expect(s.metadata!.labels).toEqual({ team: 'ml', 'app.kubernetes.io/part-of': 'rlmesh', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' });
    }
  });

  it('a rotation keeps the labels of a Secret the agent wrote and adds those it lacks', async () => {
    const { store, secrets } = cluster({ team: 'ml', cost: 'c1' });
    const ownerReferences = [{ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'rlmesh-cluster-agent', uid: 'role-uid' }];
    secrets.set('rlmesh-system/rlmesh-cluster-control', {
      metadata: { name: 'rlmesh-cluster-control', namespace: 'rlmesh-system', labels: { cost: 'mine', owner: 'me' }, ownerReferences },
      type: 'Opaque',
      data: { control: Buffer.from('rlm_cc_old').toString('base64'), 'cluster-id': Buffer.from('c1').toString('base64') },
    });
    expect(await store.operatorSecret('control', 'rlm_cc_new')).toBeUndefined();
    await store.writeRotation('control', 'rlm_cc_new');
    const s = secrets.get('rlmesh-system/rlmesh-cluster-control')!;
    expect(s.metadata).toMatchObject({ labels: { team: 'ml', cost: 'mine', owner: 'me' }, ownerReferences });
    expect(Buffer.from(s.data!.control!, 'base64').toString()).toBe('rlm_cc_new');
  });
});

// It used to write the rotated value into Secrets delivered out of band too; a GitOps sync then wrote the old one back.
describe('Secrets the operator delivers', () => {
  const delivered = (namespace: string, name: string, data: Record<string, string>, type = 'Opaque'): k8s.V1Secret => ({
    metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'rlmesh', 'app.kubernetes.io/managed-by': 'rlmesh-cli' }, resourceVersion: '7' },
    type,
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });

  it('are never written by a rotation; operatorSecret names them and the key, and says whether they hold the value', async () => {
    const { store, secrets } = cluster({});
    secrets.set('rlmesh-system/rlmesh-cluster-control', delivered('rlmesh-system', 'rlmesh-cluster-control', { control: 'rlm_cc_old', 'cluster-id': 'c1' }));
    const before = structuredClone(secrets.get('rlmesh-system/rlmesh-cluster-control'));
    expect(await store.operatorSecret('control', 'rlm_cc_new')).toEqual({ secrets: ['rlmesh-system/rlmesh-cluster-control'], key: 'control', holds: false });
    await expect(store.writeRotation('control', 'rlm_cc_new')).rejects.toThrow(
      'Secret rlmesh-system/rlmesh-cluster-control was delivered out of band (it has neither the agent\'s owner reference nor its managed-by label), so the agent does not write it: write the rotated value into it yourself',
    );
    expect(secrets.get('rlmesh-system/rlmesh-cluster-control')).toEqual(before);
    // the operator's GitOps writes the new value
    secrets.set('rlmesh-system/rlmesh-cluster-control', delivered('rlmesh-system', 'rlmesh-cluster-control', { control: 'rlm_cc_new\n', 'cluster-id': 'c1' }));
    expect(await store.operatorSecret('control', 'rlm_cc_new')).toMatchObject({ holds: true });
  });

  it('a pull rotation: both namespaces must hold the new password; neither is written', async () => {
    const { store, secrets } = cluster({});
    const oldPull = dockerConfigJson('registry.rlmesh.dev', 'c1', 'rlm_rp_old');
    const newPull = dockerConfigJson('registry.rlmesh.dev', 'c1', 'rlm_rp_new');
    for (const ns of ['rlmesh-system', 'rlmesh-runs']) secrets.set(`${ns}/rlmesh-registry-pull`, delivered(ns, 'rlmesh-registry-pull', { '.dockerconfigjson': oldPull }, 'kubernetes.io/dockerconfigjson'));
    expect(await store.operatorSecret('pull', newPull)).toEqual({ secrets: ['rlmesh-system/rlmesh-registry-pull', 'rlmesh-runs/rlmesh-registry-pull'], key: '.dockerconfigjson', holds: false });
    await expect(store.writeRotation('pull', newPull)).rejects.toThrow(/^Secret rlmesh-system\/rlmesh-registry-pull and rlmesh-runs\/rlmesh-registry-pull was delivered out of band/);
    expect([...secrets.keys()].sort()).toEqual(['rlmesh-runs/rlmesh-registry-pull', 'rlmesh-system/rlmesh-registry-pull']);
    secrets.set('rlmesh-system/rlmesh-registry-pull', delivered('rlmesh-system', 'rlmesh-registry-pull', { '.dockerconfigjson': newPull }, 'kubernetes.io/dockerconfigjson'));
    expect(await store.operatorSecret('pull', newPull)).toMatchObject({ holds: false });
    secrets.set('rlmesh-runs/rlmesh-registry-pull', delivered('rlmesh-runs', 'rlmesh-registry-pull', { '.dockerconfigjson': newPull }, 'kubernetes.io/dockerconfigjson'));
    expect(await store.operatorSecret('pull', newPull)).toMatchObject({ holds: true });
  });
});
