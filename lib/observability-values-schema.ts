// The rlmesh-observability chart's values: one zod schema is the source of truth.
// scripts/generators/observability-values-schema.ts turns it into the chart's
// values.schema.json, values.yaml and README values table, like the runtime chart.
// observabilityCrossFieldErrors() holds the rules JSON Schema cannot express; the
// chart's templates/_validate.tpl fails the install with the same messages
// (OBSERVABILITY_REFUSALS, generated into its _refusals.tpl).
import { z } from 'zod';
import { RELAY_KEY } from './credential-secret.ts';
import { imageErrors, imageRegistrySchema, podSettings, port, quantity, secretName } from './chart-values.ts';
import { NAMES } from './fixed-names.ts';
import { allowRange, apiServerValues, dnsValues, networkPolicyPeerSchema } from './values-schema.ts';
import { OBSERVABILITY_REFUSALS } from './observability-refusals.ts';
import { refuse } from './refusals.ts';

const DURATION = /^([0-9]+(ms|s|m|h|d|w|y))+$/;

export const RELAY_MOUNT_DIR = '/etc/rlmesh/relay';
export { RELAY_KEY };
export const RELAY_CREDENTIALS_FILE = `${RELAY_MOUNT_DIR}/${RELAY_KEY}`;
export const CA_BUNDLE_FILE = '/etc/rlmesh/ca/ca.crt';
const CELL_IN_URL = /\/v1\/cells\/([^/]+)\/metrics$/;

/**
 * Prometheus, the long-term-support release this repository builds from its Go
 * module (test/observability/build-prometheus.sh; Chart.yaml's appVersion, a test
 * keeps the three equal) and publishes. No digest here: the release stamps the
 * digest of the image it pushed into the packaged chart (scripts/release/stamp-digests.ts).
 */
export const PROMETHEUS_IMAGE = { repository: `${NAMES.platformRegistry}/rlmesh/prometheus`, tag: 'v3.5.0', digest: '' };
/**
 * Grafana: no image. This project builds no Grafana image (Grafana is AGPL, which
 * the project may not use) and names none it does not produce: with
 * grafana.enabled the user names the image they mirrored.
 */
export const GRAFANA_IMAGE = { repository: '', tag: '', digest: '' };
const GRAFANA_IMAGE_HELP = {
  repository:
    'Image repository of Grafana; no default: RLMesh builds and publishes no Grafana image. With grafana.enabled, mirror the Grafana version you trust into your registry and name it here (with tag or digest).',
  tag: 'Image tag of Grafana, pulled when digest is empty; no default.',
  digest: 'Image digest of Grafana (sha256: and 64 hex digits); set: pulled as repository@digest and the tag is ignored. No default.',
};

const duration = z.string().regex(DURATION, { message: 'must be a Prometheus duration such as 30s, 5m or 1d' });

const remoteWriteSchema = z
  .object({
    url: z
      .string()
      .max(2048)
      .regex(/^https:\/\/[^\s/?#]+\/\S*$/, { message: 'must be an https URL such as https://api.rlmesh.dev/v1/cells/<cluster id>/metrics' })
      .describe('Remote-write endpoint: https://<api host>/v1/cells/<cluster id>/metrics.'),
    authorization: z
      .object({
        type: z.literal('Bearer').default('Bearer').describe('Authorization scheme: Bearer.'),
        credentials_file: z
          .string()
          .regex(new RegExp(`^${RELAY_MOUNT_DIR}/[A-Za-z0-9._-]+$`), {
            message: `must be a file in ${RELAY_MOUNT_DIR}/, where the relay Secret is mounted (key ${RELAY_KEY}: ${RELAY_CREDENTIALS_FILE})`,
          })
          .default(RELAY_CREDENTIALS_FILE)
          .describe('File holding the relay credential, reread by Prometheus on every request so rotation needs no restart.'),
      })
      .strict()
      .default({ type: 'Bearer', credentials_file: RELAY_CREDENTIALS_FILE })
      .describe('How Prometheus authenticates: the relay credential as a bearer, read from a file.'),
    queue_config: z
      .object({
        capacity: z.number().int().min(1).optional().describe('Samples buffered per shard.'),
        max_shards: z.number().int().min(1).optional().describe('Most parallel senders.'),
        max_samples_per_send: z.number().int().min(1).optional().describe('Most samples per request.'),
        batch_send_deadline: duration.optional().describe('Longest a sample waits before its batch is sent.'),
        min_backoff: duration.optional().describe('First retry delay after a recoverable failure.'),
        max_backoff: duration.optional().describe('Longest retry delay.'),
      })
      .strict()
      .optional()
      .describe('Prometheus queue_config of this endpoint; unset fields keep Prometheus defaults.'),
  })
  .strict();

/** The values' shape and defaults; observabilityValuesSchema adds the cross-field rules. */
export const observabilityValuesObjectSchema = z
  .object({
    global: z
      .object({ imageRegistry: imageRegistrySchema })
      .catchall(z.unknown())
      .prefault({})
      .describe('Helm global values, shared with the rlmesh-runtime chart and any umbrella chart; this chart reads imageRegistry.'),
    imagePullSecrets: z
      .array(z.object({ name: secretName.min(1) }).strict())
      .default([])
      .describe('Pull Secrets for the Prometheus and Grafana images, e.g. [{name: rlmesh-registry-pull}] (the runtime installation writes it in rlmesh-system).'),
    prometheus: z
      .object({
        clusterLabel: z
          .string()
          .max(128)
          .regex(/^([A-Za-z0-9][A-Za-z0-9_.:-]*)?$/, { message: "must be the cluster's public id as Clusters shows it (letters, digits, _ . : -)" })
          .default('')
          .describe("The cluster's public id: Prometheus labels every series with cluster=<this> (external_labels)."),
        relayCredentialSecretName: secretName
          .min(1)
          .default(NAMES.relaySecret)
          .describe(`Secret (key ${RELAY_KEY}) holding the relay credential, mounted at ${RELAY_MOUNT_DIR}/; the runtime writes it when installed with observability.enabled=true.`),
        remoteWrite: z
          .array(remoteWriteSchema)
          .default([])
          .describe('Remote-write endpoints (Prometheus remote_write entries): url, authorization {type: Bearer, credentials_file}, optional queue_config.'),
        caBundle: z
          .string()
          .regex(/^(-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*)?$/, { message: 'must be PEM certificates' })
          .default('')
          .describe(`PEM CA bundle that signs a private or staging remote-write endpoint (mounted at ${CA_BUNDLE_FILE}); empty: system roots.`),
        remoteWriteAddresses: z
          .array(allowRange)
          .default([])
          .describe(
            "CIDRs of a remote-write endpoint at private or special-purpose addresses (a staging or self-hosted control plane), which Prometheus may then reach on the remoteWrite URLs' ports. Without them it reaches only public addresses on those ports (the blocks the runtime's egress proxy refuses stay shut). Empty: public addresses only.",
          ),
        metricsPort: port
          .default(9090)
          .describe("The rlmesh-runtime chart's metrics.port: the only port Prometheus may reach on the runtime's pods (those labelled app.kubernetes.io/part-of=rlmesh-runtime and rlmesh.dev/metrics=true in runtimeNamespace)."),
        runtimeNamespace: z
          .string()
          .max(63)
          .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
          .default('rlmesh-system')
          .describe('Namespace of the rlmesh-runtime release whose pods are scraped; Prometheus may list and watch pods there and nothing else.'),
        scrapeInterval: duration.default('30s').describe('How often the runtime components are scraped.'),
        retention: duration.default('1d').describe('How long samples stay in the local TSDB (it is a buffer: remote write is the destination).'),
        storageSizeLimit: quantity('size').default('4Gi').describe('Size limit of the emptyDir holding the TSDB and the remote-write WAL.'),
        ...podSettings('Prometheus', PROMETHEUS_IMAGE, { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } }),
      })
      .strict()
      .prefault({})
      .describe('Prometheus: scrapes the runtime and remote-writes through the relay credential.'),
    network: z
      .object({ ...dnsValues, ...apiServerValues })
      .strict()
      .prefault({})
      .describe("The cluster's DNS resolver and Kubernetes API, as the rlmesh-runtime chart's values of the same names: Prometheus and Grafana may resolve names only there, on these ports, and Prometheus reaches the API (its pod discovery) at its addresses only. Give both charts the same network values (e.g. one file, -f network-values.yaml, to both); on OpenShift the resolver answers on 5353 after DNAT."),
    grafana: z
      .object({
        enabled: z.boolean().default(false).describe('Run Grafana with the RLMesh runtime dashboard; needs image.repository (a Grafana image you mirrored: the chart names none) and adminPassword or adminPasswordSecretName.'),
        ingressFrom: z
          .array(networkPolicyPeerSchema)
          .default([])
          .describe(
            "NetworkPolicy peers that may connect to Grafana on port 3000 (your ingress controller's namespace and pods, e.g. [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]). Empty: no pod may; kubectl port-forward still reaches it, as it enters the pod's own network namespace.",
          ),
        adminUser: z.string().min(1).max(64).default('admin').describe('Grafana admin user name.'),
        adminPassword: z
          .string()
          .default('')
          .describe('Grafana admin password, stored in Secret rlmesh-grafana-admin; prefer adminPasswordSecretName to keep it out of values.'),
        adminPasswordSecretName: secretName.default('').describe('Existing Secret in the release namespace holding the Grafana admin password (key adminPasswordSecretKey).'),
        adminPasswordSecretKey: z.string().min(1).max(253).regex(/^[-._a-zA-Z0-9]+$/).default('admin-password').describe('Key of the admin password in adminPasswordSecretName.'),
        ...podSettings('Grafana', GRAFANA_IMAGE, { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '500m', memory: '512Mi' } }, GRAFANA_IMAGE_HELP),
      })
      .strict()
      .prefault({})
      .describe('Grafana (off by default).'),
  })
  .strict();

export const observabilityValuesSchema = observabilityValuesObjectSchema.superRefine((v, ctx) => {
  for (const e of observabilityCrossFieldErrors(v)) ctx.addIssue({ code: 'custom', path: e.path.split('.'), message: e.message });
});

export type ObservabilityValues = z.output<typeof observabilityValuesObjectSchema>;

/** Rules JSON Schema cannot express; their messages are OBSERVABILITY_REFUSALS, which templates/_validate.tpl includes generated. */
export function observabilityCrossFieldErrors(v: ObservabilityValues): { path: string; message: string }[] {
  const R = OBSERVABILITY_REFUSALS;
  const errors: { path: string; message: string }[] = [];
  const g = v.grafana;
  const { clusterLabel } = v.prometheus;
  if (g.enabled && g.adminPassword === '' && g.adminPasswordSecretName === '') errors.push(refuse(R.grafanaNoPassword));
  if (g.adminPassword !== '' && g.adminPasswordSecretName !== '') errors.push(refuse(R.grafanaTwoPasswords));
  v.prometheus.remoteWrite.forEach((rw, index) => {
    const cell = CELL_IN_URL.exec(rw.url)?.[1];
    if (cell !== undefined && clusterLabel !== '' && cell !== clusterLabel) errors.push(refuse(R.remoteWriteCell, { index, cell, clusterLabel }));
  });
  if (g.enabled && g.image.repository === '') errors.push(refuse(R.grafanaNoImage));
  errors.push(...imageErrors(v, ['prometheus.image', ...(g.enabled && g.image.repository !== '' ? ['grafana.image'] : [])]));
  if (clusterLabel === '') errors.push(refuse(R.noClusterLabel));
  return errors;
}

export const defaultObservabilityValues = (): ObservabilityValues => observabilityValuesObjectSchema.parse({});
