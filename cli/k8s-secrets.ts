// The Secrets a GitOps user delivers instead of giving the chart a join token:
// the same shapes the agent writes itself (agent/credentials.ts).
import { stringify } from 'yaml';

export type JoinResult = { clusterId: string; control: string; pull: string; relay?: string };
export type SecretNames = { namespace: string; runsNamespace: string; control: string; pull: string; relay: string };

// What the agent reads: keys of the control and relay Secrets, and the annotation
// with the hash of the token that produced them (a later install with the same,
// already used, token then does not try to trade it again).
export const CONTROL_KEY = 'control';
export const CLUSTER_ID_KEY = 'cluster-id';
export const RELAY_KEY = 'relay-secret';
export const TOKEN_HASH_ANNOTATION = 'rlmesh.dev/join-token-sha256';

const labels = { 'app.kubernetes.io/part-of': 'rlmesh', 'app.kubernetes.io/managed-by': 'rlmesh-cli' };

function secret(name: string, namespace: string, type: string, stringData: Record<string, string>, annotations?: Record<string, string>) {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace, labels, ...(annotations ? { annotations } : {}) }, type, stringData };
}

// The pull Secret must exist in the runs namespace before the chart is installed,
// so the namespace comes first, carrying the metadata with which Helm adopts
// an existing object into release `rlmesh` (and the chart's PodSecurity labels).
function namespaces(names: SecretNames, release: string) {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: names.namespace } },
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: names.runsNamespace,
        labels: {
          'app.kubernetes.io/managed-by': 'Helm',
          'pod-security.kubernetes.io/enforce': 'restricted',
          'pod-security.kubernetes.io/enforce-version': 'latest',
        },
        annotations: { 'meta.helm.sh/release-name': release, 'meta.helm.sh/release-namespace': names.namespace, 'helm.sh/resource-policy': 'keep' },
      },
    },
  ];
}

export function secretsYaml(r: JoinResult, names: SecretNames, tokenSha256: string, release = 'rlmesh'): string {
  const docs = [
    ...namespaces(names, release),
    secret(names.control, names.namespace, 'Opaque', { [CONTROL_KEY]: r.control, [CLUSTER_ID_KEY]: r.clusterId }, { [TOKEN_HASH_ANNOTATION]: tokenSha256 }),
    secret(names.pull, names.namespace, 'kubernetes.io/dockerconfigjson', { '.dockerconfigjson': r.pull }),
    secret(names.pull, names.runsNamespace, 'kubernetes.io/dockerconfigjson', { '.dockerconfigjson': r.pull }),
    ...(r.relay ? [secret(names.relay, names.namespace, 'Opaque', { [RELAY_KEY]: r.relay })] : []),
  ];
  return docs.map((d) => `---\n${stringify(d)}`).join('');
}
