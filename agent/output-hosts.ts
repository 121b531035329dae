// The platform's output hosts, for the egress proxy: what GET /v1/info names at
// start and each OutputHosts on the session, checked (lib/output-hosts.ts) and
// written to ConfigMap rlmesh-output-hosts, which the proxy mounts and re-reads.
// The latest list wins: one write at a time, retried until it lands (an API
// server outage loses no list), each try writing the newest list. A ConfigMap
// that is missing (deleted by hand) is created again. An entry the check refuses
// is left out with one log line; the rest still apply.
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { MOUNTS, NAMES } from '../lib/fixed-names.ts';
import { checkOutputHosts, outputHostsText } from '../lib/output-hosts.ts';
import { isNotFound } from '../lib/kube-errors.ts';
import type { Retrying } from './retrying.ts';

export type OutputHostsOptions = { core: k8s.CoreV1Api; namespace: string; log: Logger; retrying: Retrying };

export class OutputHostsPublisher {
  private wanted: { text: string; hosts: string[]; from: string } | undefined;
  private writing = false;
  private written: string | undefined;
  /** the entries last refused, so that a list sent again on each reconnect is not logged again */
  private refusedShown = '';
  private readonly o: OutputHostsOptions;

  constructor(o: OutputHostsOptions) {
    this.o = o;
  }

  /** `from` says where the list came from, for the log (`GET /v1/info`, `the session`). */
  publish(list: readonly string[], from: string): void {
    const { hosts, refused } = checkOutputHosts(list);
    const shown = JSON.stringify(refused);
    if (refused.length && shown !== this.refusedShown) {
      this.o.log.warn({ refused, from }, `left out output hosts the platform named (${from}) that are not exact public hostnames; the egress proxy does not allow them. The rest apply; report it to the platform`);
    }
    this.refusedShown = shown;
    this.wanted = { text: outputHostsText(hosts), hosts, from };
    void this.drain();
  }

  private async drain(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.wanted && this.wanted.text !== this.written) {
        // each try writes the newest list, so a list that arrives during an outage replaces the one waiting
        const w = await this.o.retrying(`writing the platform's output hosts to ConfigMap ${NAMES.outputHostsConfigMap}`, async () => {
          const latest = this.wanted!;
          await this.write(latest.text);
          return latest;
        }, { forever: true });
        this.written = w.text;
        this.o.log.info({ outputHosts: w.hosts, from: w.from }, `the platform's output hosts are in ConfigMap ${NAMES.outputHostsConfigMap}: the egress proxy allows them`);
      }
    } catch {
      // only when the agent stops (retrying gives up on its abort signal)
    } finally {
      this.writing = false;
    }
  }

  private async write(text: string): Promise<void> {
    const { core, namespace } = this.o;
    const name = NAMES.outputHostsConfigMap;
    let cm: k8s.V1ConfigMap;
    try {
      cm = await core.readNamespacedConfigMap({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await core.createNamespacedConfigMap({ namespace, body: { metadata: { name, namespace }, data: { [MOUNTS.outputHostsKey]: text } } });
      return;
    }
    if ((cm.data?.[MOUNTS.outputHostsKey] ?? '') === text) return;
    // a replace carries the resourceVersion just read: a concurrent change makes it fail, and it is retried
    await core.replaceNamespacedConfigMap({ name, namespace, body: { ...cm, data: { ...cm.data, [MOUNTS.outputHostsKey]: text } } });
  }
}
