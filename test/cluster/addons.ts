// What a real cluster has beside its nodes, for the local cluster's real nodes:
// the kubernetes Service's endpoint (the apiserver through the forwarder on the
// host's bridge, port 6443), kube-router's RBAC (it runs on each node as
// system:kube-router, test/cluster/real-node.ts), and CoreDNS as a real pod in
// kube-system with label k8s-app=kube-dns behind the kube-dns Service, so the
// chart's default network.dnsPeers is what gets exercised.
//
// CoreDNS answers cluster.local from the API and the harness's own names from a
// hosts file (the ConfigMap rlmesh-test-hosts, see setClusterHosts); every other
// name is NXDOMAIN: nothing is forwarded to any resolver of this machine.
//
//   node test/cluster/addons.ts apply   (test/cluster/up, before the real nodes start)
//   node test/cluster/addons.ts wait    (after: CoreDNS Ready)
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishCorednsImage } from '../images/coredns/build.ts';
import { NET, SANDBOX_REGISTRY } from './real-node.ts';

/** The harness's own names, as pods resolve them. */
export const HARNESS_HOSTS: Record<string, string> = {
  // the reference control plane, on the host's bridge (test/support/runtime.ts)
  'controlplane.rlmesh.test': NET.hostAddress,
  // the platform's registry over TLS (test/cluster/up): what the agent's preflight reaches; the nodes' containerd pulls
  // the same registry through its mirror configuration instead (real-node.ts)
  [SANDBOX_REGISTRY]: NET.registryAddress,
  // "public" servers of the egress tests (198.18.0.0/15: refused unless a test allows the range)
  'inputs.public.test': NET.publicAddress,
  'other.public.test': NET.publicAddress,
  // the output host the suites' control plane names (GET /v1/info, the session): the same server, another name
  'outputs.public.test': NET.publicAddress,
};

type Info = { dir: string; kubeconfig: string; bin: string; registry: string };

function info(): Info {
  const dir = process.env.RLMESH_CLUSTER_DIR ?? join(homedir(), '.cache/rlmesh-cluster');
  for (const f of ['cluster.json', 'cluster.json.partial']) if (existsSync(join(dir, f))) return JSON.parse(readFileSync(join(dir, f), 'utf8')) as Info;
  throw new Error(`the local cluster is not running (${join(dir, 'cluster.json')} missing): start it with test/cluster/up`);
}

function kubectl(args: string[], input?: string): string {
  const i = info();
  const r = spawnSync(join(i.bin, 'kubectl'), args, { encoding: 'utf8', input, env: { ...process.env, KUBECONFIG: i.kubeconfig } });
  if (r.status !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${r.status}): ${(r.stderr || r.error?.message || '').trim()}`);
  return r.stdout;
}
const apply = (objects: object[]) => kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=rlmesh-local-cluster', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));

const hostsFile = (hosts: Record<string, string>) =>
  Object.entries(hosts)
    .map(([name, address]) => `${address} ${name}`)
    .join('\n') + '\n';

/** Replaces the names CoreDNS answers from its hosts file (the harness's own and `extra`); pods see them within seconds. */
export function setClusterHosts(extra: Record<string, string> = {}): void {
  apply([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'rlmesh-test-hosts', namespace: 'kube-system' }, data: { hosts: hostsFile({ ...HARNESS_HOSTS, ...extra }) } }]);
}

const COREFILE = `.:53 {
    errors
    health :8080
    ready :8181
    hosts /etc/coredns/hosts . {
        ttl 5
        reload 2s
        fallthrough cluster.local in-addr.arpa
    }
    kubernetes cluster.local in-addr.arpa {
        pods insecure
        ttl 5
    }
    cache 5
    loop
    reload 5s
}
`;

function kubernetesEndpoint(): object {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'kubernetes', namespace: 'default', labels: { 'kubernetes.io/service-name': 'kubernetes', 'endpointslice.kubernetes.io/managed-by': 'rlmesh-local-cluster' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [NET.hostAddress], conditions: { ready: true } }],
    ports: [{ name: 'https', port: NET.apiserverPort, protocol: 'TCP' }],
  };
}

const clusterRole = (name: string, rules: object[]) => ({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules });
const clusterRoleBinding = (name: string, subject: object) => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRoleBinding',
  metadata: { name },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
  subjects: [subject],
});
const READ = ['get', 'list', 'watch'];

function kubeRouterRbac(): object[] {
  return [
    clusterRole('rlmesh-test:kube-router', [
      { apiGroups: [''], resources: ['namespaces', 'pods', 'services', 'nodes', 'endpoints'], verbs: READ },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: READ },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ]),
    clusterRoleBinding('rlmesh-test:kube-router', { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:kube-router' }),
  ];
}

function coredns(image: string): object[] {
  const labels = { 'k8s-app': 'kube-dns' };
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'coredns', namespace: 'kube-system' } },
    clusterRole('rlmesh-test:coredns', [
      { apiGroups: [''], resources: ['services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
    ]),
    clusterRoleBinding('rlmesh-test:coredns', { kind: 'ServiceAccount', name: 'coredns', namespace: 'kube-system' }),
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'coredns', namespace: 'kube-system' }, data: { Corefile: COREFILE } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'rlmesh-test-hosts', namespace: 'kube-system' }, data: { hosts: hostsFile(HARNESS_HOSTS) } },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'coredns', namespace: 'kube-system', labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'coredns',
            priorityClassName: 'system-cluster-critical',
            nodeSelector: { 'rlmesh.dev/real-node': 'true' },
            dnsPolicy: 'Default',
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              runAsGroup: 65532,
              seccompProfile: { type: 'RuntimeDefault' },
              // port 53 without a capability: the sysctl is namespaced and on the kubelet's safe list
              sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '53' }],
            },
            containers: [
              {
                name: 'coredns',
                image,
                imagePullPolicy: 'IfNotPresent',
                args: ['-conf', '/etc/coredns/Corefile'],
                ports: [
                  { name: 'dns', containerPort: 53, protocol: 'UDP' },
                  { name: 'dns-tcp', containerPort: 53, protocol: 'TCP' },
                ],
                readinessProbe: { httpGet: { path: '/ready', port: 8181 }, periodSeconds: 2 },
                livenessProbe: { httpGet: { path: '/health', port: 8080 }, periodSeconds: 10, failureThreshold: 5 },
                resources: { requests: { cpu: '50m', memory: '32Mi' }, limits: { memory: '128Mi' } },
                securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
                volumeMounts: [{ name: 'config', mountPath: '/etc/coredns', readOnly: true }],
              },
            ],
            volumes: [{ name: 'config', projected: { sources: [{ configMap: { name: 'coredns' } }, { configMap: { name: 'rlmesh-test-hosts' } }] } }],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { ...labels, 'kubernetes.io/name': 'CoreDNS' } },
      spec: {
        selector: labels,
        clusterIP: NET.dnsService,
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
          { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
        ],
      },
    },
  ];
}

export async function applyAddons(): Promise<void> {
  const i = info();
  const dns = await publishCorednsImage(i.registry, i.bin, join(i.dir, 'test-images/coredns'));
  apply([kubernetesEndpoint(), ...kubeRouterRbac(), ...coredns(`${SANDBOX_REGISTRY}/${dns.repository}@${dns.digest}`)]);
}

export function waitAddons(): void {
  kubectl(['-n', 'kube-system', 'rollout', 'status', 'deployment/coredns', '--timeout=180s']);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const cmd = process.argv[2];
  if (cmd === 'apply') await applyAddons();
  else if (cmd === 'wait') waitAddons();
  else {
    console.error('usage: node test/cluster/addons.ts apply | wait');
    process.exit(2);
  }
}
