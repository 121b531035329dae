// Bad input is refused before anything is applied, with a message naming the
// value's path: Helm's schema validation (values.schema.json) or _validate.tpl.
// The zod schema (the source of truth) refuses the same values at the same path.
import { afterAll, describe, expect, it } from 'vitest';
import { crossFieldErrors, valuesObjectSchema, valuesSchema } from '../../lib/values-schema.ts';
import { helm, kubectl } from '../support/cluster.ts';
import { CHART, TOKEN, valuesFile } from './chart.ts';

const NS = 'rlmesh-bad-values';

const T = { joinToken: TOKEN };
// path: where both helm and zod place the error ('' is the top level); unknownKey: the key an
// "additional properties" / "Unrecognized key" error at that path names
type Case = { name: string; values: Record<string, unknown>; path: string; unknownKey?: string; says?: RegExp };

const cases: Case[] = [
  { name: 'token not shaped rlm_jt_', values: { joinToken: 'abc123' }, path: 'joinToken' },
  { name: 'token with the wrong prefix', values: { joinToken: 'rlm_xx_0123456789abcdefghij' }, path: 'joinToken' },
  { name: 'token too short', values: { joinToken: 'rlm_jt_short' }, path: 'joinToken' },
  { name: 'neither joinToken nor credentials.controlSecret', values: {}, path: 'joinToken', says: /neither joinToken nor credentials.controlSecret/ },
  { name: 'joinToken and controlSecret together', values: { ...T, credentials: { controlSecret: 'a', pullSecret: 'b' } }, path: 'credentials.controlSecret', says: /not both/ },
  { name: 'controlSecret without pullSecret', values: { credentials: { controlSecret: 'rlmesh-secrets' } }, path: 'credentials.pullSecret' },
  { name: 'pullSecret without controlSecret', values: { ...T, credentials: { pullSecret: 'rlmesh-registry-pull' } }, path: 'credentials.controlSecret' },
  { name: 'unknown top-level key', values: { ...T, joinTokn: 'x' }, path: '', unknownKey: 'joinTokn' },
  { name: 'unknown nested key', values: { ...T, egress: { extraDomain: ['a.com'] } }, path: 'egress', unknownKey: 'extraDomain' },
  { name: 'unknown key deep in the cache', values: { ...T, artifactCache: { storage: { sharedPvc: { sizee: '1Gi' } } } }, path: 'artifactCache.storage.sharedPvc', unknownKey: 'sizee' },
  { name: 'accessModes entry that is not a Kubernetes access mode', values: { ...T, artifactCache: { storage: { sharedPvc: { accessModes: ['ReadWriteSometimes'] } } } }, path: 'artifactCache.storage.sharedPvc.accessModes.0' },
  { name: 'accessModes ReadOnlyMany cannot hold the cache', values: { ...T, artifactCache: { storage: { sharedPvc: { accessModes: ['ReadOnlyMany'] } } } }, path: 'artifactCache.storage.sharedPvc.accessModes' },
  { name: 'empty accessModes', values: { ...T, artifactCache: { storage: { sharedPvc: { accessModes: [] } } } }, path: 'artifactCache.storage.sharedPvc.accessModes' },
  { name: 'ReadWriteMany without storage.className', values: { ...T, artifactCache: { storage: { sharedPvc: { accessModes: ['ReadWriteMany'] } } } }, path: 'storage.className', says: /ReadWriteMany/ },
  { name: 'cache size that is not a quantity', values: { ...T, artifactCache: { storage: { sharedPvc: { size: '100 GB' } } } }, path: 'artifactCache.storage.sharedPvc.size' },
  { name: 'dnsPeers entry that is not a NetworkPolicy peer', values: { ...T, network: { dnsPeers: [{ host: 'kube-dns' }] } }, path: 'network.dnsPeers.0', unknownKey: 'host' },
  { name: 'dnsPeers entry that is empty', values: { ...T, network: { dnsPeers: [{}] } }, path: 'network.dnsPeers.0', says: /peer is empty/ },
  { name: 'dnsPeers entry with both an ipBlock and a selector', values: { ...T, network: { dnsPeers: [{ ipBlock: { cidr: '10.0.0.10/32' }, podSelector: {} }] } }, path: 'network.dnsPeers.0', says: /one or the other/ },
  { name: 'metricsPeers entry that is empty (it would admit every source)', values: { ...T, network: { metricsPeers: [{ podSelector: { matchLabels: { app: 'prometheus' } } }, {}] } }, path: 'network.metricsPeers.1', says: /would admit every source/ },
  { name: 'metricsPeers entry with both an ipBlock and a selector', values: { ...T, network: { metricsPeers: [{ ipBlock: { cidr: '10.0.0.0/24' }, namespaceSelector: {} }] } }, path: 'network.metricsPeers.0', says: /one or the other/ },
  { name: 'dnsPeers ipBlock with a bad CIDR', values: { ...T, network: { dnsPeers: [{ ipBlock: { cidr: '169.254.20.10' } }] } }, path: 'network.dnsPeers.0.ipBlock.cidr', says: /'169\.254\.20\.10' does not match pattern/ },
  { name: 'dnsPeers selector with an unknown operator', values: { ...T, network: { dnsPeers: [{ podSelector: { matchExpressions: [{ key: 'a', operator: 'Like' }] } }] } }, path: 'network.dnsPeers.0.podSelector.matchExpressions.0.operator', says: /value must be one of 'In', 'NotIn', 'Exists', 'DoesNotExist'/ },
  { name: 'LimitRange default that is not a quantity', values: { ...T, evaluations: { limitRange: { default: { cpu: 'four', memory: '8Gi', 'ephemeral-storage': '20Gi' } } } }, path: 'evaluations.limitRange.default.cpu' },
  { name: 'ResourceQuota entry that is not a quota resource', values: { ...T, evaluations: { resourceQuota: { hard: { gpus: '8' } } } }, path: 'evaluations.resourceQuota.hard.gpus' },
  { name: 'evaluation toleration with an unknown effect', values: { ...T, evaluations: { tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'Sometimes' }] } }, path: 'evaluations.tolerations.0.effect', says: /value must be one of 'NoSchedule', 'PreferNoSchedule', 'NoExecute'/ },
  { name: 'evaluation registry with a scheme', values: { ...T, evaluations: { extraRegistries: ['https://ghcr.io/'] } }, path: 'evaluations.extraRegistries.0' },
  { name: 'evaluation registry as a bare host, as the value took before prefixes', values: { ...T, evaluations: { extraRegistries: ['registry.corp.example:5000'] } }, path: 'evaluations.extraRegistries.0', says: /takes repository prefixes \(it took hosts before\): write registry\.corp\.example:5000\/evals\/ .* or registry\.corp\.example:5000\/ / },
  { name: 'evaluation registry prefix not ending in /', values: { ...T, evaluations: { extraRegistries: ['registry.corp.example/evals'] } }, path: 'evaluations.extraRegistries.0' },
  { name: 'evaluation registry prefix with a tag', values: { ...T, evaluations: { extraRegistries: ['registry.corp.example/evals/gym:1'] } }, path: 'evaluations.extraRegistries.0' },
  { name: 'allowRanges that would open every IPv4 address', values: { ...T, egress: { allowRanges: ['0.0.0.0/0'] } }, path: 'egress.allowRanges.0' },
  { name: 'allowRanges wider than any private block (IPv6)', values: { ...T, egress: { allowRanges: ['fc00::/6'] } }, path: 'egress.allowRanges.0' },
  { name: 'controller.maxConcurrent of zero', values: { ...T, controller: { maxConcurrent: 0 } }, path: 'controller.maxConcurrent' },
  { name: 'controlPlane.addresses as wide as every address (it would reopen 443 to everywhere)', values: { ...T, controlPlane: { addresses: ['0.0.0.0/0'] } }, path: 'controlPlane.addresses.0' },
  { name: 'apiServerAddresses entry that is an address, not a CIDR', values: { ...T, network: { apiServerAddresses: ['10.0.0.1'] } }, path: 'network.apiServerAddresses.0' },
  { name: 'dnsPorts out of range', values: { ...T, network: { dnsPorts: [70000] } }, path: 'network.dnsPorts.0' },
  { name: 'dnsPorts zero', values: { ...T, network: { dnsPorts: [0] } }, path: 'network.dnsPorts.0' },
  { name: 'metrics port out of range', values: { ...T, metrics: { port: 65536 } }, path: 'metrics.port' },
  { name: 'egress allowedPorts out of range', values: { ...T, egress: { allowedPorts: [-1] } }, path: 'egress.allowedPorts.0' },
  { name: 'agent nodeOptions that is not a list of flags', values: { ...T, agent: { nodeOptions: '--max-semi-space-size=1; curl x' } }, path: 'agent.nodeOptions' },
  { name: 'domain with a scheme', values: { ...T, egress: { extraDomains: ['https://my-inputs.s3.amazonaws.com'] } }, path: 'egress.extraDomains.0' },
  { name: 'domain with a path', values: { ...T, egress: { extraDomains: ['my-inputs.s3.amazonaws.com/bucket'] } }, path: 'egress.extraDomains.0' },
  { name: 'domain with a port', values: { ...T, egress: { extraDomains: ['my-inputs.s3.amazonaws.com:443'] } }, path: 'egress.extraDomains.0' },
  { name: 'wildcard in the wrong place', values: { ...T, egress: { extraDomains: ['huggingface.*.co'] } }, path: 'egress.extraDomains.0' },
  { name: 'bare wildcard', values: { ...T, egress: { extraDomains: ['*'] } }, path: 'egress.extraDomains.0' },
  { name: 'API host with a scheme', values: { ...T, controlPlane: { apiHost: 'https://api.staging.rlmesh.dev' } }, path: 'controlPlane.apiHost' },
  { name: 'proxy url that is not http(s)', values: { ...T, controlPlane: { proxy: { url: 'socks5://192.0.2.10:1080' } } }, path: 'controlPlane.proxy.url', says: /not an http:\/\/ or https:\/\/ URL/ },
  { name: 'proxy url with credentials in it', values: { ...T, controlPlane: { proxy: { url: 'http://alice:s3cret@192.0.2.10:3128' } } }, path: 'controlPlane.proxy.url', says: /controlPlane\.proxy\.existingSecret/ },
  { name: 'proxy url with a path', values: { ...T, controlPlane: { proxy: { url: 'http://192.0.2.10:3128/proxy.pac' } } }, path: 'controlPlane.proxy.url', says: /scheme, host and port only/ },
  { name: 'proxy by host name without its addresses', values: { ...T, controlPlane: { proxy: { url: 'http://proxy.corp.example:3128' } } }, path: 'controlPlane.proxy.addresses', says: /list the CIDRs the proxy listens on/ },
  { name: 'proxy address that is not a CIDR', values: { ...T, controlPlane: { proxy: { url: 'http://proxy.corp.example:3128', addresses: ['10.20.30.40'] } } }, path: 'controlPlane.proxy.addresses.0', says: /is not a CIDR/ },
  { name: 'passUnresolvedNames without a proxy url', values: { ...T, controlPlane: { proxy: { passUnresolvedNames: true } } }, path: 'controlPlane.proxy.passUnresolvedNames', says: /controlPlane\.proxy\.url is empty/ },
  { name: 'proxy credentials Secret that is not a Secret name', values: { ...T, controlPlane: { proxy: { url: 'http://192.0.2.10:3128', existingSecret: 'Corp_Proxy' } } }, path: 'controlPlane.proxy.existingSecret', says: /'Corp_Proxy' does not match pattern/ },
  { name: 'mirror registry with a scheme', values: { ...T, global: { imageRegistry: 'https://harbor.corp.example' } }, path: 'global.imageRegistry' },
  { name: 'staging registry host with a scheme', values: { ...T, controlPlane: { registryHost: 'https://registry.staging.example' } }, path: 'controlPlane.registryHost' },
  { name: 'CA bundle that is not PEM', values: { ...T, controlPlane: { caBundle: 'not a certificate' } }, path: 'controlPlane.caBundle' },
  { name: 'a CA bundle pinned with no bundle', values: { ...T, controlPlane: { pinCaBundle: true } }, path: 'controlPlane.pinCaBundle', says: /no CA bundle to pin/ },
  { name: 'CA bundle inline and from a ConfigMap', values: { ...T, controlPlane: { caBundle: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', caBundleFrom: { configMap: { name: 'corp-trust' } } } }, path: 'controlPlane.caBundleFrom', says: /both set/ },
  { name: 'CA bundle from both a ConfigMap and a Secret', values: { ...T, controlPlane: { caBundleFrom: { configMap: { name: 'a' }, secret: { name: 'b' } } } }, path: 'controlPlane.caBundleFrom', says: /names both a configMap and a secret/ },
  { name: 'CA bundle from nothing', values: { ...T, controlPlane: { caBundleFrom: {} } }, path: 'controlPlane.caBundleFrom', says: /names neither/ },
  { name: 'CA bundle Secret that is not a Secret name', values: { ...T, controlPlane: { caBundleFrom: { secret: { name: 'Corp_Trust' } } } }, path: 'controlPlane.caBundleFrom.secret.name', says: /'Corp_Trust' does not match pattern/ },
  { name: 'CA bundle ConfigMap key with a slash', values: { ...T, controlPlane: { caBundleFrom: { configMap: { name: 'a', key: 'x/ca.crt' } } } }, path: 'controlPlane.caBundleFrom.configMap.key' },
  { name: "evaluation pull Secret that is the platform's", values: { ...T, evaluations: { imagePullSecrets: [{ name: 'rlmesh-registry-pull', registries: ['registry.corp.example/'] }] } }, path: 'evaluations.imagePullSecrets.0.name', says: /platform's pull Secret/ },
  { name: 'evaluation pull Secret listed twice', values: { ...T, evaluations: { imagePullSecrets: [{ name: 'a', registries: ['registry.corp.example/'] }, { name: 'a', registries: ['registry.corp.example/'] }] } }, path: 'evaluations.imagePullSecrets.1.name', says: /more than once/ },
  { name: 'evaluation pull Secret mapped to no repository prefixes', values: { ...T, evaluations: { imagePullSecrets: [{ name: 'corp-pull' }] } }, path: 'evaluations.imagePullSecrets.0.registries', says: /corp-pull names no repository prefixes: .*confused deputy/ },
  { name: 'evaluation pull Secret mapped to a bare host', values: { ...T, evaluations: { imagePullSecrets: [{ name: 'corp-pull', registries: ['registry.corp.example'] }] } }, path: 'evaluations.imagePullSecrets.0.registries.0', says: /registry\.corp\.example is a registry host, and registries takes repository prefixes/ },
  { name: 'evaluation pull Secret that is not a Secret name', values: { ...T, evaluations: { imagePullSecrets: [{ name: 'Corp_Pull' }] } }, path: 'evaluations.imagePullSecrets.0.name' },
  { name: 'image digest that is not sha256:<64 hex>', values: { ...T, agent: { image: { digest: 'latest' } } }, path: 'agent.image.digest', says: /sha256:\[a-f0-9\]\{64\}/ },
  { name: 'kubectl image with neither tag nor digest', values: { ...T, crdUpgradeHook: { image: { tag: '' } } }, path: 'crdUpgradeHook.image.tag', says: /both empty/ },
  { name: 'resources with a bad quantity', values: { ...T, controller: { resources: { limits: { memory: 'lots' } } } }, path: 'controller.resources.limits.memory' },
  { name: 'ephemeral-storage limit below its request', values: { ...T, controller: { resources: { requests: { 'ephemeral-storage': '1Gi' } } } }, path: 'controller.resources.limits.ephemeral-storage', says: /at least the request/ },
  { name: 'ephemeral-storage limit below the /tmp emptyDir', values: { ...T, egress: { resources: { requests: { 'ephemeral-storage': '16Mi' }, limits: { 'ephemeral-storage': '32Mi' } } } }, path: 'egress.resources.limits.ephemeral-storage', says: /\/tmp emptyDir/ },
  { name: 'ephemeral storage spelled ephemeralStorage (the key is Kubernetes\' ephemeral-storage)', values: { ...T, agent: { resources: { limits: { ephemeralStorage: '1Gi' } } } }, path: 'agent.resources.limits', unknownKey: 'ephemeralStorage' },
  { name: 'pullPolicy that is not a Kubernetes policy', values: { ...T, agent: { image: { pullPolicy: 'Sometimes' } } }, path: 'agent.image.pullPolicy' },
  { name: 'topologySpread.whenUnsatisfiable unknown', values: { ...T, controller: { topologySpread: { whenUnsatisfiable: 'Maybe' } } }, path: 'controller.topologySpread.whenUnsatisfiable' },
  { name: 'topologySpread with no topology key', values: { ...T, egress: { topologySpread: { topologyKeys: [] } } }, path: 'egress.topologySpread.topologyKeys' },
  { name: 'toleration with an unknown effect', values: { ...T, egress: { tolerations: [{ key: 'a', effect: 'Sometimes' }] } }, path: 'egress.tolerations.0.effect' },
  { name: 'storage.className that is not a name', values: { ...T, storage: { className: 'Fast SSD' } }, path: 'storage.className' },
  { name: 'agent.spool.storageClassName that is not a name', values: { ...T, agent: { spool: { storageClassName: 'Block_SSD' } } }, path: 'agent.spool.storageClassName' },
  { name: 'ServiceMonitor and PodMonitor both on', values: { ...T, metrics: { serviceMonitor: { enabled: true }, podMonitor: { enabled: true } } }, path: 'metrics.podMonitor.enabled' },
  { name: 'prometheusRule.enabled neither a boolean nor auto', values: { ...T, metrics: { prometheusRule: { enabled: 'sometimes' } } }, path: 'metrics.prometheusRule.enabled' },
  { name: 'an alert label that is no Prometheus label name', values: { ...T, metrics: { prometheusRule: { alertLabels: { 'team-name': 'a' } } } }, path: 'metrics.prometheusRule.alertLabels.team-name', says: /not a Prometheus label name/ },
  { name: 'an alert label the chart sets (severity)', values: { ...T, metrics: { prometheusRule: { alertLabels: { severity: 'page' } } } }, path: 'metrics.prometheusRule.alertLabels.severity', says: /set by the chart on every alert/ },
  { name: 'a dashboard label the chart sets', values: { ...T, metrics: { grafanaDashboard: { enabled: true, labels: { 'helm.sh/chart': 'x' } } } }, path: 'metrics.grafanaDashboard.labels.helm.sh/chart', says: /a key the chart sets itself/ },
  { name: 'a dashboard namespace that is not a name', values: { ...T, metrics: { grafanaDashboard: { namespace: 'Monitoring NS' } } }, path: 'metrics.grafanaDashboard.namespace' },
  { name: 'gpuFeatureDiscovery.enabled not a boolean', values: { ...T, gpuFeatureDiscovery: { enabled: 'yes' } }, path: 'gpuFeatureDiscovery.enabled' },
  { name: 'controller replicas zero', values: { ...T, controller: { replicas: 0 } }, path: 'controller.replicas' },
  // the chart's ordinary knobs (lib/chart-knobs.ts; every key and name: test/chart/knobs.test.ts)
  { name: 'commonLabels overriding a selector label', values: { ...T, commonLabels: { 'app.kubernetes.io/instance': 'other' } }, path: 'commonLabels.app.kubernetes.io/instance', says: /a key the chart sets itself/ },
  { name: 'podLabels value that is not a label value', values: { ...T, podLabels: { team: 'two words' } }, path: 'podLabels.team' },
  { name: 'extraEnv overriding a variable the chart sets', values: { ...T, controller: { extraEnv: [{ name: 'RLMESH_CONFIG', value: '/tmp/x.json' }] } }, path: 'controller.extraEnv.0', says: /RLMESH_CONFIG is an environment variable the chart sets itself/ },
  { name: 'logging.level that pino does not have', values: { ...T, logging: { level: 'verbose' } }, path: 'logging.level' },
  { name: 'logging.format unknown', values: { ...T, logging: { format: 'pretty' } }, path: 'logging.format' },
  { name: 'podSecurity.arbitraryUid not a boolean', values: { ...T, podSecurity: { arbitraryUid: 'yes' } }, path: 'podSecurity.arbitraryUid' },
  { name: 'ServiceAccount annotation key that is not an annotation key', values: { ...T, agent: { serviceAccount: { annotations: { 'bad key': 'x' } } } }, path: 'agent.serviceAccount.annotations.bad key', says: /"bad key" is not an annotation key/ },
  { name: 'ServiceAccount annotations misspelled as a list', values: { ...T, agent: { serviceAccount: { annotations: ['eks.amazonaws.com/role-arn=x'] } } }, path: 'agent.serviceAccount.annotations' },
];

afterAll(() => {
  // nothing was applied: no release, not even the namespace --create-namespace would make
  expect(helm(['status', 'rlmesh-bad', '-n', NS], { allowFail: true }).status).not.toBe(0);
  expect(kubectl(['get', 'namespace', NS], { allowFail: true }).status).not.toBe(0);
});

describe('bad values are refused at helm install with the path named', () => {
  for (const c of cases) {
    it(c.name, () => {
      // a real install: refused before anything reaches the cluster
      const r = helm(['install', 'rlmesh-bad', CHART, '-n', NS, '--create-namespace', '-f', valuesFile(c.values)], { allowFail: true });
      expect(r.status, `helm accepted ${JSON.stringify(c.values)}`).not.toBe(0);
      expect(r.stderr).toMatch(/INSTALLATION FAILED/);
      // helm's schema errors name the path as "- at '/a/b/0': "; _validate.tpl names it as "- a.b.0: "
      const schemaLine = `- at '${c.path ? `/${c.path.replace(/\./g, '/')}` : ''}': ${c.unknownKey ? `additional properties '${c.unknownKey}' not allowed` : ''}`;
      const validateLine = `- ${c.path}: `;
      const names = r.stderr.includes(schemaLine) || (!c.unknownKey && r.stderr.includes(validateLine));
      expect(names, `stderr has neither "${schemaLine}" nor "${validateLine}":\n${r.stderr}`).toBe(true);
      if (c.says) expect(r.stderr).toMatch(c.says);
      // a cross-field rule: _validate.tpl prints the zod rule's own message
      const shaped = valuesObjectSchema.safeParse(c.values);
      if (shaped.success) for (const e of crossFieldErrors(shaped.data)) expect(r.stderr).toContain(`${e.path}: ${e.message}`);

      const z = valuesSchema.safeParse(c.values);
      expect(z.success, `zod accepted ${JSON.stringify(c.values)}`).toBe(false);
      const at = z.error!.issues.filter((i) => i.path.join('.') === c.path);
      expect(at.length, `zod paths ${z.error!.issues.map((i) => i.path.join('.')).join(', ')}`).toBeGreaterThan(0);
      if (c.unknownKey) expect(at.flatMap((i) => (i.code === 'unrecognized_keys' ? i.keys : []))).toContain(c.unknownKey);
    });
  }
});
