// The one operations server of every component: /healthz (the process can make
// progress: its event loop turns), /readyz (ready, or the reason it is not),
// /metrics (Prometheus text). Health and metrics may share a port; each port
// serves only what it is for, so a metrics port never answers a probe.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { shownListen } from './listen-address.ts';

/** How long the event loop may stand still before /healthz fails: the kubelet restarts a process that cannot run. */
export const STALL_LIMIT_MS = 10_000;

export type OpsSources = {
  /** why the component is not ready, or undefined when it is */
  notReady: () => string | undefined;
  registry: Registry;
};

/** Where to listen; a host left out means every interface, IPv4 and IPv6 (in a pod: the kubelet's probes, Prometheus). */
export type OpsAddress = { host?: string; port: number };

export class OpsServer {
  private lastTick = Date.now();
  private readonly ticker: NodeJS.Timeout;
  private readonly servers: Server[] = [];
  private readonly s: OpsSources;

  constructor(s: OpsSources) {
    this.s = s;
    this.ticker = setInterval(() => (this.lastTick = Date.now()), 1000);
    this.ticker.unref();
  }

  /** Listens for health and for metrics (one server when both are the same address; port 0 is a free port each); returns the bound ports. */
  async listen(health: OpsAddress, metrics: OpsAddress): Promise<{ health: number; metrics: number }> {
    if (health.port !== 0 && health.port === metrics.port && health.host === metrics.host) {
      const port = await this.serve(health, ['/healthz', '/readyz', '/metrics']);
      return { health: port, metrics: port };
    }
    return { health: await this.serve(health, ['/healthz', '/readyz']), metrics: await this.serve(metrics, ['/metrics']) };
  }

  private handle(paths: string[], req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://ops').pathname;
    if (!paths.includes(path)) return text(res, 404, `not found: ${path}; this port serves ${paths.join(', ')}\n`);
    if (path === '/healthz') {
      const stalled = Date.now() - this.lastTick;
      return stalled > STALL_LIMIT_MS ? text(res, 503, `event loop stalled for ${stalled} ms\n`) : text(res, 200, 'ok\n');
    }
    if (path === '/readyz') {
      const why = this.s.notReady();
      return why ? text(res, 503, `not ready: ${why}\n`) : text(res, 200, 'ready\n');
    }
    this.s.registry.metrics().then(
      (body) => {
        res.writeHead(200, { 'content-type': this.s.registry.contentType });
        res.end(body);
      },
      (err: unknown) => text(res, 500, `metrics could not be collected: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  }

  private serve({ host, port }: OpsAddress, paths: string[]): Promise<number> {
    const server = createServer((req, res) => this.handle(paths, req, res));
    this.servers.push(server);
    return new Promise((resolve, reject) => {
      server.once('error', (err) =>
        reject(new Error(`cannot listen for ${paths.join(', ')} on ${shownListen(host, port)}: ${err.message}; choose another port (or stop what holds it)`)),
      );
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  async close(): Promise<void> {
    clearInterval(this.ticker);
    await Promise.all(this.servers.map((s) => new Promise((r) => s.close(r))));
  }
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(body);
}
