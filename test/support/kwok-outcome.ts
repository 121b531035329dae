// How tests choose the outcome of a pod on the local cluster's kwok nodes,
// where no container runs. test/cluster/kwok-stages.yaml finishes a pod with
// restartPolicy Never or OnFailure the way the test evaluation image would,
// reading two environment variables of the pod's first container:
//   TEST_EXIT_CODE  its exit code (default 0)
//   TEST_DURATION   how long it runs, a Go duration: 500ms, 2s (default 500ms)
// The product knows neither: an evaluation carries them in its spec.env, which
// the controller passes through like any evaluation's environment
// (outcomeEnv). Pods whose spec a test does not write, such as the
// controller's NetworkPolicy probe, get them from a mutating admission webhook
// the test serves and registers for that pod alone (startOutcomeWebhook).
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, type V1EnvVar, type V1Pod } from '@kubernetes/client-node';
import { ensureTls } from '../../controlplane/tls.ts';
import { adminKubeConfig, kubectl } from './cluster.ts';
import { until } from './until.ts';
import { tempDir } from './temp.ts';

/** What a pod carries to land on a kwok node: with real nodes in the cluster, kwok's nodes are tainted (test/cluster/nodes.ts). */
export const KWOK_TOLERATION = { key: 'kwok.x-k8s.io/node', operator: 'Equal', value: 'fake', effect: 'NoSchedule' } as const;

export const EXIT_CODE_ENV = 'TEST_EXIT_CODE';
export const DURATION_ENV = 'TEST_DURATION';

export type Outcome = { exitCode?: number; duration?: string };

/** The environment that tells kwok (and the test evaluation image) how the container ends. */
export function outcomeEnv(o: Outcome): V1EnvVar[] {
  return [
    ...(o.exitCode !== undefined ? [{ name: EXIT_CODE_ENV, value: String(o.exitCode) }] : []),
    ...(o.duration !== undefined ? [{ name: DURATION_ENV, value: o.duration }] : []),
  ];
}

export type OutcomeWebhook = {
  /** The outcome given to pods admitted from now on. */
  set(o: Outcome): void;
  /** Names (or generateName prefixes) of the pods the webhook gave an outcome to. */
  admitted: string[];
  close(): Promise<void>;
};

type AdmissionReview = { request: { uid: string; object: V1Pod } };

/**
 * Serves a mutating admission webhook on 127.0.0.1 (TLS with a CA of its own)
 * and registers it for pods created in `namespace` with `labels`: it sends
 * them to a kwok node (kwok's toleration and node label) and adds the current
 * outcome's variables to their first container. Until close(), such pods
 * cannot be created without it (failurePolicy Fail).
 */
export async function startOutcomeWebhook(o: { namespace: string; labels: Record<string, string> }): Promise<OutcomeWebhook> {
  const tls = await ensureTls(tempDir('rlmesh-outcome-webhook-'));
  let outcome: Outcome = {};
  const admitted: string[] = [];
  const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as AdmissionReview;
      const pod = review.request.object;
      const env = outcomeEnv(outcome);
      const has = (pod.spec?.containers[0]?.env?.length ?? 0) > 0;
      const toKwok = [
        { op: 'add', path: '/spec/tolerations', value: [...(pod.spec?.tolerations ?? []), KWOK_TOLERATION] },
        { op: 'add', path: '/spec/nodeSelector', value: { ...pod.spec?.nodeSelector, type: 'kwok' } },
      ];
      const patch = [...toKwok, ...(has ? env.map((value) => ({ op: 'add', path: '/spec/containers/0/env/-', value })) : [{ op: 'add', path: '/spec/containers/0/env', value: env }])];
      admitted.push(pod.metadata?.name || pod.metadata?.generateName || '');
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: { uid: review.request.uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const name = `rlmesh-test-outcome-${o.namespace}`;
  const config = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name },
    webhooks: [
      {
        name: `outcome.${o.namespace}.test.invalid`,
        clientConfig: { url: `https://127.0.0.1:${port}/outcome`, caBundle: Buffer.from(tls.ca).toString('base64') },
        rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }],
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': o.namespace } },
        objectSelector: { matchLabels: o.labels },
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        failurePolicy: 'Fail',
        timeoutSeconds: 10,
      },
    ],
  };
  kubectl(['apply', '-f', '-'], { input: JSON.stringify(config) });
  // the API server picks the configuration up a moment later: wait until a
  // server-side dry run of such a pod reaches the webhook
  // (through the asynchronous client: a synchronous kubectl would block the
  // event loop this webhook answers on)
  const core = adminKubeConfig().makeApiClient(CoreV1Api);
  const probe: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'outcome-webhook-ready-', namespace: o.namespace, labels: o.labels },
    spec: {
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{ name: 'c', image: 'registry.example/ready:1', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    },
  };
  await until(
    `the API server to call the outcome webhook ${name}`,
    async () => {
      // only the webhook call counts: the dry run itself may be refused by the outcome it decides
      await core.createNamespacedPod({ namespace: o.namespace, body: probe, dryRun: 'All' }).catch(() => undefined);
      return admitted.length > 0;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  admitted.length = 0;
  return {
    set: (next) => void (outcome = next),
    admitted,
    close: async () => {
      kubectl(['delete', 'mutatingwebhookconfiguration', name, '--ignore-not-found']);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
