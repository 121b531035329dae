// The platform's output hosts, for the egress proxy: what GET /v1/info names at
// start and each OutputHosts on the session, checked (lib/output-hosts.ts) and
// written to ConfigMap rlmesh-output-hosts, which the proxy mounts and re-reads.
// The latest list wins: one write at a time, and a list that arrives during a
// write is written after it. An entry the check refuses is left out with one log
// line; the rest still apply.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { MOUNTS, NAMES } from '../lib/fixed-names.ts';
import { checkOutputHosts, outputHostsText } from '../lib/output-hosts.ts';
import type { Retrying } from './retrying.ts';

export type OutputHostsOptions = { core: k8s.CoreV1Api; namespace: string; log: Logger; retrying: Retrying };

export class OutputHostsPublisher {
  private wanted: { text: string; hosts: string[]; from: string } | undefined;
  private writing = false;
  private written: string | undefined;
  private readonly o: OutputHostsOptions;

  constructor(o: OutputHostsOptions) {
    this.o = o;
  }

  /** `from` says where the list came from, for the log (`GET /v1/info`, `the session`). */
  publish(list: readonly string[], from: string): void {
    const { hosts, refused } = checkOutputHosts(list);
    if (refused.length) {
      this.o.log.warn({ refused, from }, `left out output hosts the platform named (${from}) that are not exact public hostnames; the egress proxy does not allow them. The rest apply; report it to the platform`);
    }
    this.wanted = { text: outputHostsText(hosts), hosts, from };
    void this.drain();
  }

  private async drain(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.wanted && this.wanted.text !== this.written) {
        const w = this.wanted;
        try {
          await this.o.retrying(`writing the platform's output hosts to ConfigMap ${NAMES.outputHostsConfigMap}`, () => this.write(w.text));
          this.written = w.text;
          this.o.log.info({ outputHosts: w.hosts, from: w.from }, `the platform's output hosts are in ConfigMap ${NAMES.outputHostsConfigMap}: the egress proxy allows them`);
        } catch {
          // logged by retrying; the next list (a new session sends it again) tries anew
          return;
        }
      }
    } finally {
      this.writing = false;
    }
  }

  private async write(text: string): Promise<void> {
    const { core, namespace } = this.o;
    const cm = await core.readNamespacedConfigMap({ name: NAMES.outputHostsConfigMap, namespace });
    if ((cm.data?.[MOUNTS.outputHostsKey] ?? '') === text) return;
    // a replace carries the resourceVersion just read: a concurrent change makes it fail, and it is retried
    await core.replaceNamespacedConfigMap({ name: NAMES.outputHostsConfigMap, namespace, body: { ...cm, data: { ...cm.data, [MOUNTS.outputHostsKey]: text } } });
  }
}
