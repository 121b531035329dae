// Running a real Prometheus in a test: a loopback port, a config file, its log,
// the components' registries served on 127.0.0.1, and polling helpers.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { stringify } from 'yaml';
import { until } from '../support/until.ts';

export { freePort } from '../support/free-port.ts';

/** Serves a prom-client registry at http://127.0.0.1:<port>/metrics. */
export async function serveRegistry(registry: Registry): Promise<{ port: number; server: Server }> {
  const server = createServer((_req, res) => {
    void registry.metrics().then((text) => {
      res.writeHead(200, { 'content-type': registry.contentType });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

export type RunningPrometheus = { url: string; port: number; proc: ChildProcess; log(): string; stop(): Promise<void> };

/** Checks the config with promtool (when given) and starts Prometheus on 127.0.0.1:port. */
export async function startPrometheus(opts: { binary: string; promtool?: string; config: unknown; dir: string; port: number }): Promise<RunningPrometheus> {
  const configFile = join(opts.dir, 'prometheus.yml');
  writeFileSync(configFile, stringify(opts.config));
  if (opts.promtool) {
    const check = spawnSync(opts.promtool, ['check', 'config', configFile], { encoding: 'utf8' });
    if (check.status !== 0) throw new Error(`promtool check config failed:\n${check.stdout}${check.stderr}`);
  }
  let log = '';
  const proc = spawn(opts.binary, [`--config.file=${configFile}`, `--storage.tsdb.path=${join(opts.dir, 'data')}`, `--web.listen-address=127.0.0.1:${opts.port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const url = `http://127.0.0.1:${opts.port}`;
  const running: RunningPrometheus = {
    url,
    port: opts.port,
    proc,
    log: () => log,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
  await until('Prometheus ready', async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok || undefined, { timeoutMs: 60_000, context: () => logTail(log) });
  return running;
}

/** The tail of Prometheus's log, for a timeout error's context. */
export const logTail = (log: string): string => `prometheus log (tail):\n${log.slice(-3000)}`;

/** Sum of the samples of Prometheus's own /metrics lines matching `line`. */
export async function ownMetric(url: string, line: RegExp): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const l of text.split('\n')) if (line.test(l)) sum += Number(l.split(' ').pop());
  return sum;
}

export type Target = { labels: Record<string, string>; health: string; scrapePool: string; lastError?: string };

export async function activeTargets(url: string, pool: string): Promise<Target[]> {
  const body = (await (await fetch(`${url}/api/v1/targets?state=active`)).json()) as { data: { activeTargets: Target[] } };
  return body.data.activeTargets.filter((t) => t.scrapePool === pool);
}
