// The Secrets a GitOps user delivers instead of giving the chart a join token:
// the same shapes the agent writes itself (agent/credentials.ts).
import { stringify } from 'yaml';
import { PULL_KEY, PULL_SECRET_TYPE, RELAY_KEY, TOKEN_HASH_ANNOTATION, controlSecretData, type JoinResult } from '../lib/credential-secret.ts';

export type SecretNames = { namespace: string; runsNamespace: string; control: string; pull: string; relay: string };

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
    // the token hash tells a later install with the same, already used, token not to trade it again
    secret(names.control, names.namespace, 'Opaque', controlSecretData(r.control, r.clusterId), { [TOKEN_HASH_ANNOTATION]: tokenSha256 }),
    secret(names.pull, names.namespace, PULL_SECRET_TYPE, { [PULL_KEY]: r.pull }),
    secret(names.pull, names.runsNamespace, PULL_SECRET_TYPE, { [PULL_KEY]: r.pull }),
    ...(r.relay ? [secret(names.relay, names.namespace, 'Opaque', { [RELAY_KEY]: r.relay })] : []),
  ];
  return docs.map((d) => `---\n${stringify(d)}`).join('');
}
