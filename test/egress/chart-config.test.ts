// The proxy runs from the config the chart renders: render ConfigMap
// rlmesh-runtime-config with extra domains and ports, start the image's
// entrypoint (`rlmesh-runtime egress`) on it, and check that the built-in
// hosts and egress.extraDomains are what the proxy lets through (the test DNS
// server answers with addresses the proxy then refuses, so nothing leaves
// the machine).
//
// Why a process and not the chart's pod: the proxy must use a resolver the test
// controls (answers that point at addresses it then refuses); a pod resolves
// through CoreDNS. The chart's proxy pods run on the real node in test/e2e.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../egress/config.ts';
import { OFFLINE_API_SERVER } from '../chart/chart.ts';
import { clusterInfo } from '../support/cluster.ts';
import { until } from '../support/until.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';
import { tempDir } from '../support/temp.ts';

const ROOT = join(import.meta.dirname, '../..');
const CHART = process.env.RLMESH_CHART_DIR ?? join(ROOT, 'charts/rlmesh-runtime');
const PORT = 23228;

let configFile: string;
let dns: TestDnsServer;
let proxy: ChildProcess;
const logs: string[] = [];

async function connectStatus(target: string): Promise<{ status: number; rule?: string }> {
  const socket = net.connect({ host: '127.0.0.1', port: PORT });
  await once(socket, 'connect');
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  let text = '';
  for await (const chunk of socket) {
    text += (chunk as Buffer).toString();
    if (text.includes('\r\n\r\n')) break;
  }
  socket.destroy();
  const rule = /x-rlmesh-egress-refused: (\S+)/i.exec(text)?.[1];
  return { status: Number(text.split(' ')[1]), rule };
}

beforeAll(async () => {
  const helm = process.env.HELM ?? join(clusterInfo().bin, 'helm');
  const rendered = execFileSync(helm, [
    'template', 'rlmesh', CHART, '-n', 'rlmesh-system', '--kube-version', '1.35.4',
    '--set', 'joinToken=rlm_jt_ci0123456789abcdefghijklmnop', ...OFFLINE_API_SERVER,
    '--set', 'egress.extraDomains={my-inputs.s3.eu-west-1.amazonaws.com,*.hub.example}',
    '--set', 'egress.allowedPorts={443,8443}',
  ], { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  const configMap = parseAllDocuments(rendered).map((d) => d.toJSON())
    .find((o) => o?.kind === 'ConfigMap' && o.metadata?.name === 'rlmesh-runtime-config' && o.metadata?.namespace === 'rlmesh-system');
  expect(configMap, 'the chart renders ConfigMap rlmesh-runtime-config in rlmesh-system').toBeDefined();
  configFile = join(tempDir('egress-chart-config-'), 'config.json');
  writeFileSync(configFile, configMap.data['config.json']);

  dns = await startDnsServer({
    'api.rlmesh.dev': { A: ['10.0.0.1'] },
    'registry.rlmesh.dev': { A: ['10.0.0.2'] },
    'my-inputs.s3.eu-west-1.amazonaws.com': { A: ['10.0.0.3'] },
    'models.hub.example': { A: ['127.0.0.1'] },
    'elsewhere.example': { A: ['10.0.0.4'] },
  });
  // in a pod the ranges file comes from ConfigMap rlmesh-cluster-ranges, which the agent writes
  const rangesFile = join(dirname(configFile), 'cluster-ranges');
  writeFileSync(rangesFile, '10.244.0.0/16\n');
  proxy = spawn(process.execPath, [join(ROOT, 'bin/rlmesh-runtime.ts'), 'egress',
    '--port', String(PORT), '--health-port', '23229', '--metrics-port', '23230', '--dns', dns.address, '--cluster-ranges-file', rangesFile,
  ], { env: { ...process.env, RLMESH_CONFIG: configFile, RLMESH_LISTEN_HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  createInterface({ input: proxy.stdout! }).on('line', (l) => logs.push(l));
  createInterface({ input: proxy.stderr! }).on('line', (l) => logs.push(l));
  await until(
    "the proxy to start from the chart's config",
    () => {
      if (proxy.exitCode !== null) throw new Error(`the proxy exited with ${proxy.exitCode}`);
      return logs.some((l) => l.includes('egress proxy ready'));
    },
    { timeoutMs: 15_000, intervalMs: 50, context: () => logs.join('\n') },
  );
});

afterAll(async () => {
  if (proxy && proxy.exitCode === null) proxy.kill('SIGKILL');
  await dns?.close();
});

describe('the proxy on the chart-rendered runtime config', () => {
  it('reads the built-in hosts, extra domains and ports from it', () => {
    const config = parseConfig([], { RLMESH_CONFIG: configFile });
    expect(config.allow).toEqual(expect.arrayContaining(['api.rlmesh.dev', 'registry.rlmesh.dev', 'my-inputs.s3.eu-west-1.amazonaws.com', '*.hub.example']));
    expect(config.ports).toEqual([443, 8443]);
    expect(config.listen.port).toBe(3128);
  });

  it.each([
    ['api.rlmesh.dev:443', 'private-use'],
    ['registry.rlmesh.dev:8443', 'private-use'],
    ['my-inputs.s3.eu-west-1.amazonaws.com:443', 'private-use'],
    ['models.hub.example:443', 'loopback'],
    ['hub.example:443', 'not-allowed'],
    ['elsewhere.example:443', 'not-allowed'],
    ['api.rlmesh.dev:80', 'port-not-allowed'],
  ])('CONNECT %s is decided by the chart’s allow-list (%s)', async (target, rule) => {
    expect(await connectStatus(target)).toEqual({ status: 403, rule });
  });
});
