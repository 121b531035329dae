// /healthz: the process can make progress (the event loop turns and is not
// stalled). /readyz: valid credentials AND a live session — a dead tunnel goes
// unready within the silence window instead of looking healthy forever.
// /metrics: Prometheus text.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { errorMessage } from '../lib/error-fields.ts';

export type HealthSources = {
  /** why the agent is not ready, or undefined when it is */
  notReady: () => string | undefined;
  registry: Registry;
};

export class Health {
  private lastTick = Date.now();
  private readonly ticker: NodeJS.Timeout;
  private readonly servers: Server[] = [];
  private readonly s: HealthSources;

  constructor(s: HealthSources) {
    this.s = s;
    this.ticker = setInterval(() => (this.lastTick = Date.now()), 1000);
    this.ticker.unref();
  }

  /** Listens on the health and metrics ports (one server when they are equal); returns the bound ports. */
  async listen(host: string, healthPort: number, metricsPort: number): Promise<{ health: number; metrics: number }> {
    const health = await this.serve(host, healthPort, healthPort === metricsPort);
    const metrics = healthPort === metricsPort ? health : await this.serve(host, metricsPort, true);
    return { health, metrics };
  }

  private serve(host: string, port: number, withMetrics: boolean): Promise<number> {
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/healthz') {
        const stalled = Date.now() - this.lastTick;
        if (stalled > 10_000) return text(res, 503, `event loop stalled for ${stalled} ms\n`);
        return text(res, 200, 'ok\n');
      }
      if (path === '/readyz') {
        const why = this.s.notReady();
        return why ? text(res, 503, `not ready: ${why}\n`) : text(res, 200, 'ready\n');
      }
      if (path === '/metrics' && withMetrics) {
        this.s.registry.metrics().then(
          (body) => {
            res.writeHead(200, { 'content-type': this.s.registry.contentType });
            res.end(body);
          },
          (err: unknown) => text(res, 500, `${errorMessage(err)}\n`),
        );
        return;
      }
      text(res, 404, 'not found: /healthz, /readyz, /metrics\n');
    });
    this.servers.push(server);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  async close(): Promise<void> {
    clearInterval(this.ticker);
    await Promise.all(this.servers.map((s) => new Promise((r) => s.close(r))));
  }
}

function text(res: import('node:http').ServerResponse, status: number, body: string) {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(body);
}
