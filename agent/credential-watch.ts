// Follows the control Secret: a new value (a rotation written by the user, by
// a secret manager, or by this agent) is used for the next call and the
// session re-authenticates — no restart. Watched by name (fieldSelector), so
// the agent needs no right to list other Secrets.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { parseControlSecret, type ControlCredentials } from './credentials.ts';
import { CLUSTER_ID_KEY, CONTROL_KEY } from '../lib/credential-secret.ts';
import { startInformer, type Informer } from '../lib/informer.ts';
import type { InformerMetricsFor } from '../lib/informer-metrics.ts';

type SecretLite = { metadata: { name: string; namespace: string; resourceVersion?: string; annotations?: Record<string, string> }; type?: string; data?: Record<string, string> };

const trimSecret = (o: unknown): SecretLite => {
  const s = o as k8s.V1Secret;
  return {
    metadata: { name: s.metadata?.name ?? '', namespace: s.metadata?.namespace ?? '', resourceVersion: s.metadata?.resourceVersion, annotations: s.metadata?.annotations },
    type: s.type,
    data: Object.fromEntries([CONTROL_KEY, CLUSTER_ID_KEY].flatMap((k) => (s.data?.[k] ? [[k, s.data[k]]] : []))),
  };
};

export type CredentialWatchOptions = {
  informerMetrics?: InformerMetricsFor;
  kc: k8s.KubeConfig;
  namespace: string;
  name: string;
  log: Logger;
  watchSilenceMs: number;
  initial: ControlCredentials;
  /** a new credential value is in the Secret */
  onChange: (c: ControlCredentials) => void;
  /** the Secret is missing or malformed (undefined: fine again) */
  onProblem: (problem: string | undefined) => void;
};

export class CredentialWatch {
  private current: ControlCredentials;
  private changedAt = Date.now();
  private informer: Informer<SecretLite> | undefined;
  private readonly o: CredentialWatchOptions;

  constructor(o: CredentialWatchOptions) {
    this.o = o;
    this.current = o.initial;
  }

  get credentials(): ControlCredentials {
    return this.current;
  }

  /** seconds since the credential in use last changed (or the agent started) */
  get ageSeconds(): number {
    return (Date.now() - this.changedAt) / 1000;
  }

  start(): void {
    const { kc, namespace, name, log } = this.o;
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const fieldSelector = `metadata.name=${name}`;
    this.informer = startInformer<SecretLite>({
      name: `secret ${namespace}/${name}`,
      kc,
      log,
      path: `/api/v1/namespaces/${namespace}/secrets`,
      fieldSelector,
      list: (p) => core.listNamespacedSecret({ namespace, fieldSelector, ...p }),
      trim: trimSecret,
      watchSilenceMs: this.o.watchSilenceMs,
      metrics: this.o.informerMetrics,
    });
    const onSecret = (s: SecretLite) => this.applySecret(s as k8s.V1Secret);
    this.informer.on('add', onSecret);
    this.informer.on('update', onSecret);
    this.informer.on('delete', () => this.applySecret(undefined));
  }

  /** a rotation this agent just wrote: switch now rather than waiting for the watch */
  use(c: ControlCredentials): void {
    this.applySecret(undefined, c);
  }

  private applySecret(secret: k8s.V1Secret | undefined, direct?: ControlCredentials) {
    const { namespace, name, log } = this.o;
    let next = direct;
    if (!next) {
      const r = parseControlSecret(secret, namespace, name);
      if (!r.ok) {
        this.o.onProblem(r.problem);
        log.error(`${r.problem}: the agent keeps the credential it has until the Secret is fixed (write keys "control" and "cluster-id" back), and reports not ready`);
        return;
      }
      next = r.value;
    }
    this.o.onProblem(undefined);
    if (next.control === this.current.control && next.clusterId === this.current.clusterId) {
      this.current = next;
      return;
    }
    if (next.clusterId !== this.current.clusterId) {
      log.warn({ from: this.current.clusterId, to: next.clusterId }, 'the control Secret now names another cluster id; switching to it');
    }
    this.current = next;
    this.changedAt = Date.now();
    log.info({ clusterId: next.clusterId, secretName: `${namespace}/${name}` }, 'control credential changed; the session re-authenticates with the new value');
    this.o.onChange(next);
  }

  async stop(): Promise<void> {
    await this.informer?.stop();
  }
}
