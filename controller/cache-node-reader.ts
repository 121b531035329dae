// Reads the one node that holds a ReadWriteOnce cache, by name (the controller may
// `get` nodes and nothing more), keeping each answer briefly so a burst of
// evaluations costs one request. Any failure answers "unknown": the check it feeds
// only makes a doomed evaluation fail sooner, and the start deadline still bounds it.
import type { CoreV1Api, V1Node } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isNotFound, isRbacDenial } from '../lib/kube-errors.ts';
import { errorMessage } from '../lib/error-fields.ts';

export const NODE_TTL_MS = 15_000;

export class CacheNodeReader {
  readonly #core: CoreV1Api;
  readonly #log: Logger;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #seen = new Map<string, { at: number; node: Promise<V1Node | undefined> }>();
  #deniedLogged = false;

  constructor(o: { core: CoreV1Api; log: Logger; ttlMs?: number; now?: () => number }) {
    this.#core = o.core;
    this.#log = o.log;
    this.#ttlMs = o.ttlMs ?? NODE_TTL_MS;
    this.#now = o.now ?? Date.now;
  }

  get(name: string): Promise<V1Node | undefined> {
    const kept = this.#seen.get(name);
    if (kept && this.#now() - kept.at < this.#ttlMs) return kept.node;
    const node = this.#read(name);
    this.#seen.set(name, { at: this.#now(), node });
    return node;
  }

  async #read(name: string): Promise<V1Node | undefined> {
    try {
      return await this.#core.readNode({ name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (isRbacDenial(err)) {
        if (!this.#deniedLogged) {
          this.#deniedLogged = true;
          this.#log.warn({ node: name }, `the controller may not read node ${name}: ${errorMessage(err)}; evaluations its ReadWriteOnce cache node can never run wait until their start deadline instead of failing at once. The chart's ClusterRole rlmesh-cluster-controller grants get on nodes: reinstall or upgrade the chart`);
        }
        return undefined;
      }
      this.#log.warn({ node: name, err: errorMessage(err) }, 'could not read the cache node; its fit is checked again on the next try');
      this.#seen.delete(name);
      return undefined;
    }
  }
}
