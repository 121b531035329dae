// The settings the checks judge the cluster against: from the runtime config
// inside the cluster (agent), or from chart values before install (CLI).
import { readFileSync } from 'node:fs';
import { controlPlaneCa } from '../control-plane-trust.ts';
import { NAMES } from '../fixed-names.ts';
import { outboundProxy } from '../outbound-proxy.ts';
import { DEFAULT_DNS_PEERS, type RuntimeConfig } from '../runtime-config.ts';
import type { Values } from '../values-schema.ts';
import { requiredNodeTerms, type NodeSelectorTerm } from './label-selector.ts';
import { clusterPlacementSchema } from '../evaluation-placement.ts';
import type { CaBundleSource, PreflightSettings } from './types.ts';

export function settingsFromRuntimeConfig(cfg: RuntimeConfig): PreflightSettings {
  return {
    namespace: cfg.namespace,
    runsNamespace: cfg.runsNamespace,
    storageClassName: cfg.storage?.className ?? '',
    spoolStorageClassName: cfg.storage?.spoolClassName ?? '',
    accessModes: cfg.artifactCache.accessModes,
    gpuFeatureDiscovery: cfg.gpuFeatureDiscovery.enabled,
    gpuDiscoveryNodeTerms: cfg.gpuFeatureDiscovery.nodeSelectorTerms as NodeSelectorTerm[],
    dnsPeers: cfg.network?.dnsPeers ?? DEFAULT_DNS_PEERS,
    dnsPorts: cfg.network?.dnsPorts ?? [53],
    apiHost: cfg.controlPlane.apiHost,
    apiPort: cfg.controlPlane.apiPort,
    registryHost: cfg.controlPlane.registryHost,
    ...(cfg.controlPlane.caBundlePath ? { ca: controlPlaneCa(readFileSync(cfg.controlPlane.caBundlePath, 'utf8'), cfg.controlPlane.pinCaBundle) } : {}),
    nodeSelector: cfg.agent.nodeSelector,
    networkPolicyProbe: cfg.preflight?.networkPolicyProbe.enabled ?? true,
    proxy: outboundProxy(cfg.controlPlane.proxy),
    corporateProxy: outboundProxy(cfg.controlPlane.proxy),
    evaluationPullSecrets: (cfg.evaluations?.imagePullSecrets ?? []).map((p) => p.name),
    hostUsers: cfg.evaluations?.hostUsers ?? 'auto',
    ...(cfg.evaluations?.placement ? { placement: cfg.evaluations.placement } : {}),
  };
}

export function settingsFromValues(values: Values, namespace = 'rlmesh-system'): PreflightSettings {
  return {
    namespace,
    runsNamespace: NAMES.runsNamespace,
    storageClassName: values.storage.className,
    spoolStorageClassName: values.agent.spool.storageClassName,
    accessModes: values.artifactCache.storage.sharedPvc.accessModes,
    gpuFeatureDiscovery: values.gpuFeatureDiscovery.enabled,
    gpuDiscoveryNodeTerms: requiredNodeTerms(values.gpuFeatureDiscovery.affinity),
    dnsPeers: values.network.dnsPeers,
    dnsPorts: values.network.dnsPorts,
    apiHost: values.controlPlane.apiHost,
    apiPort: 443,
    registryHost: values.controlPlane.registryHost,
    ...(values.controlPlane.caBundle ? { ca: values.controlPlane.caBundle } : {}),
    nodeSelector: values.agent.reportNodeSelector,
    networkPolicyProbe: values.preflight.networkPolicyProbe.enabled,
    evaluationPullSecrets: values.evaluations.imagePullSecrets.map((p) => p.name),
    hostUsers: values.evaluations.hostUsers,
    placement: clusterPlacementSchema.parse({
      nodeSelector: values.evaluations.nodeSelector,
      tolerations: values.evaluations.tolerations,
      affinity: values.evaluations.affinity,
      priorityClassName: values.evaluations.priorityClassName,
      runtimeClassName: values.evaluations.runtimeClassName,
      podLabels: values.evaluations.podLabels,
      podAnnotations: values.evaluations.podAnnotations,
    }),
    ...(values.network.apiServerAddresses.length > 0 ? { apiServerAddresses: values.network.apiServerAddresses } : {}),
    ...caBundleSource(values.controlPlane.caBundleFrom),
    // without its credentials: they are in a Secret, which the CLI does not read
    ...(values.controlPlane.proxy.url ? { corporateProxy: outboundProxy({ url: values.controlPlane.proxy.url, noProxy: values.controlPlane.proxy.noProxy }) } : {}),
  };
}

function caBundleSource(from: Values['controlPlane']['caBundleFrom']): { caBundleFrom?: CaBundleSource } {
  if (from?.configMap) return { caBundleFrom: { kind: 'ConfigMap', ...from.configMap } };
  if (from?.secret) return { caBundleFrom: { kind: 'Secret', ...from.secret } };
  return {};
}
