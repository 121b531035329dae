import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from '../lib/runtime-config.ts';
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

  it('a rotation keeps the labels a Secret has (one delivered out of band too) and adds those it lacks', async () => {
    const { store, secrets } = cluster({ team: 'ml', cost: 'c1' });
    secrets.set('rlmesh-system/rlmesh-cluster-control', {
      metadata: { name: 'rlmesh-cluster-control', namespace: 'rlmesh-system', labels: { cost: 'gitops', owner: 'me' } },
      type: 'Opaque',
      data: { control: Buffer.from('rlm_cc_old').toString('base64'), 'cluster-id': Buffer.from('c1').toString('base64') },
    });
    await store.writeRotation('control', 'rlm_cc_new');
    expect(secrets.get('rlmesh-system/rlmesh-cluster-control')!.metadata).toMatchObject({ labels: { team: 'ml', cost: 'gitops', owner: 'me' }, ownerReferences: [] });
  });
});
