// What every preflight check returns, and what it is given: the API clients of
// whoever runs it (the user's kube context for `rlmesh preflight`, the agent's
// ServiceAccount inside the cluster) and the settings the chart would apply.
import type { OutboundProxy } from '../outbound-proxy.ts';
import type * as k8s from '@kubernetes/client-node';
import type { NetworkPolicyPeer, NodeSelectorTerm } from './label-selector.ts';
import type { ClusterPlacement } from '../evaluation-placement.ts';
import type { HostUsersSetting } from '../user-namespaces.ts';

export type Verdict = 'pass' | 'warn' | 'fail';

export type CheckResult = {
  id: string;
  verdict: Verdict;
  /** what the check saw, in one or a few lines */
  found: string;
  /** one sentence: what to do (for pass: nothing, or what keeps it passing) */
  fix: string;
};

/** Where the checks run: the CLI before install, or the agent inside the cluster. */
export type PreflightMode = 'cli' | 'agent';

export type PreflightSettings = {
  /** release namespace (rlmesh-system) */
  namespace: string;
  runsNamespace: string;
  storageClassName: string;
  /** agent.spool.storageClassName; empty: the spool follows storageClassName */
  spoolStorageClassName: string;
  accessModes: string[];
  gpuFeatureDiscovery: boolean;
  /** GPU discovery's required node terms (gpuFeatureDiscovery.affinity); empty: every linux/amd64 node */
  gpuDiscoveryNodeTerms: NodeSelectorTerm[];
  dnsPeers: NetworkPolicyPeer[];
  dnsPorts: number[];
  apiHost: string;
  apiPort: number;
  registryHost: string;
  /** PEM CA bundle for private control planes; undefined: system roots */
  ca?: string;
  /** label selector of the nodes evaluations may use (the agent's report selector); empty: all */
  nodeSelector: string;
  networkPolicyProbe: boolean;
  /** evaluations.imagePullSecrets: the operator's pull Secrets in runsNamespace */
  evaluationPullSecrets?: string[];
  /** controlPlane.caBundleFrom: the operator's ConfigMap or Secret holding the CA bundle (CLI only: the runtime config has only its path) */
  caBundleFrom?: CaBundleSource;
  /** evaluations.hostUsers; absent: auto */
  hostUsers?: HostUsersSetting;
  /** the operator's policy for evaluation pods (evaluations.nodeSelector, tolerations, affinity, runtimeClassName, …); absent: none */
  placement?: ClusterPlacement;
  /** network.apiServerAddresses (CLI only); empty: helm install reads them from the cluster */
  apiServerAddresses?: string[];
  /** the corporate proxy the agent's outbound connections go through (controlPlane.proxy) */
  proxy?: OutboundProxy | undefined;
  /** the corporate proxy, asked whether it opens a private destination: the agent's (with its credentials), or the values' (the CLI reads no Secret) */
  corporateProxy?: OutboundProxy | undefined;
  /** the private destination it is asked for; unset: the kubernetes Service's ClusterIP and port */
  kubernetesService?: { host: string; port: number };
};

export type CaBundleSource = { kind: 'ConfigMap' | 'Secret'; name: string; key: string };

export type PreflightContext = {
  mode: PreflightMode;
  kc: k8s.KubeConfig;
  settings: PreflightSettings;
  /** injectable for tests of the clock check; defaults to Date.now */
  now?: () => number;
};

export type Check = (ctx: PreflightContext) => Promise<CheckResult>;
