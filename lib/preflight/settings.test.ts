import { describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from '../runtime-config.ts';
import { defaultValues, renderRuntimeConfig, valuesObjectSchema } from '../values-schema.ts';
import { settingsFromRuntimeConfig, settingsFromValues } from './settings.ts';

const minimal = { controlPlane: {}, credentials: {}, observability: {}, gpuFeatureDiscovery: {}, egress: {}, artifactCache: {} };

describe('preflight settings', () => {
  it('a runtime config without the preflight fields means the chart defaults', () => {
    const s = settingsFromRuntimeConfig(runtimeConfigSchema.parse(minimal));
    expect(s).toMatchObject({
      namespace: 'rlmesh-system',
      runsNamespace: 'rlmesh-runs',
      storageClassName: '',
      accessModes: ['ReadWriteOnce'],
      dnsPorts: [53],
      apiHost: 'api.rlmesh.dev',
      apiPort: 443,
      registryHost: 'registry.rlmesh.dev',
      networkPolicyProbe: true,
    });
    expect(s.dnsPeers).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }]);
  });
  it('reads network, storage and the probe switch from the runtime config', () => {
    const s = settingsFromRuntimeConfig(
      runtimeConfigSchema.parse({
        ...minimal,
        network: { dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }], dnsPorts: [5353] },
        storage: { className: 'nfs' },
        preflight: { networkPolicyProbe: { enabled: false, image: '' } },
      }),
    );
    expect(s).toMatchObject({ dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }], dnsPorts: [5353], storageClassName: 'nfs', networkPolicyProbe: false });
  });
  it('values and the runtime config the chart renders from them give the same settings', () => {
    const values = valuesObjectSchema.parse({ storage: { className: 'nfs' }, artifactCache: { storage: { sharedPvc: { accessModes: ['ReadWriteMany'] } } }, gpuFeatureDiscovery: { enabled: false } });
    const fromValues = settingsFromValues(values);
    expect(fromValues).toMatchObject({ storageClassName: 'nfs', accessModes: ['ReadWriteMany'], gpuFeatureDiscovery: false });
    expect(settingsFromRuntimeConfig(renderRuntimeConfig(defaultValues()))).toEqual(settingsFromValues(defaultValues()));
    const custom = valuesObjectSchema.parse({
      storage: { className: 'nfs' },
      artifactCache: { storage: { sharedPvc: { accessModes: ['ReadWriteMany'] } } },
      gpuFeatureDiscovery: { enabled: false },
      network: { dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }], dnsPorts: [5353] },
      agent: { reportNodeSelector: 'pool=gpu', spool: { storageClassName: 'gp3' } },
      preflight: { networkPolicyProbe: { enabled: false } },
      controlPlane: { apiHost: 'api.staging.example.com', registryHost: 'registry.staging.example.com' },
    });
    expect(settingsFromRuntimeConfig(renderRuntimeConfig(custom))).toEqual(settingsFromValues(custom));
  });
});
