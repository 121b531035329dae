// rlmesh-egress-proxy: the only way out for evaluation pods.
//
//   RLMESH_LISTEN_HOST=127.0.0.1 node egress/main.ts --port 3128 --allow example.com --allow '*.example.org' \
//     --ports 443,80 --allow-range 198.18.0.0/15 --dns 127.0.0.1:5353
//
// In the cluster it reads the chart's runtime config instead (see config.ts).
import type { Server } from 'node:net';
import { once } from 'node:events';
import { createLogger } from '../lib/logger.ts';
import { AllowList } from './allow-list.ts';
import { parseAllowRange, parseClusterRange } from './classify-address.ts';
import { followRangesFile } from './cluster-ranges-file.ts';
import { followOutputHostsFile } from './output-hosts-file.ts';
import { parseConfig, USAGE, wantsHelp, type HostPort } from './config.ts';
import { createMetrics } from './metrics.ts';
import { OpsServer } from '../lib/ops-server.ts';
import { createProxy } from './proxy.ts';
import { DestinationResolver, localAddresses } from './resolve-destination.ts';
import { errorMessage } from '../lib/error-fields.ts';
import { outboundProxy } from '../lib/outbound-proxy.ts';
import { shownListen } from '../lib/listen-address.ts';

const logger = createLogger('egress');

async function listen(server: Server, at: HostPort, what: string): Promise<void> {
  server.listen({ port: at.port, ...(at.host === undefined ? {} : { host: at.host }) });
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([err]) => {
      throw new Error(`cannot listen for ${what} on ${shownListen(at.host, at.port)}: ${errorMessage(err)}; choose another address or port`);
    }),
  ]);
}

async function main(): Promise<void> {
  if (wantsHelp(process.argv.slice(2))) {
    console.log(`${USAGE}\n\nSee egress/README.md for the allow-list, address and allow-range rules.`);
    return;
  }
  const config = parseConfig(process.argv.slice(2));
  const allowList = new AllowList({ entries: config.allow, ports: config.ports });
  const allowRanges = config.allowRanges.map(parseAllowRange);
  const clusterRanges = config.clusterRanges.map(parseClusterRange);
  const metrics = createMetrics();
  let rangesProblem = (): string | undefined => undefined;
  const resolver = new DestinationResolver({
    servers: config.dns, timeoutMs: config.dnsTimeoutMs, allowRanges, clusterRanges, self: localAddresses(), rangesProblem: () => rangesProblem(),
  });
  // the ranges the agent reads from the API come on top of the configured ones, and follow the cluster;
  // while they are unknown the proxy is not ready and refuses every destination
  const ranges = config.clusterRangesFile
    ? await followRangesFile({ path: config.clusterRangesFile, log: logger, onChange: (more) => resolver.setClusterRanges([...clusterRanges, ...more]) })
    : { stop: () => undefined, problem: () => undefined };
  rangesProblem = ranges.problem;
  // the platform's output hosts, as the agent writes them: exact names beside the configured list
  const stopOutputHosts = config.outputHostsFile
    ? await followOutputHostsFile({ path: config.outputHostsFile, log: logger, onChange: (hosts) => allowList.setPlatformHosts(hosts) })
    : () => undefined;
  const parent = outboundProxy(config.parentProxy);
  const proxy = createProxy({ config, allowList, resolver, metrics, logger, ...(parent ? { parent } : {}) });
  let ready = false;
  const ops = new OpsServer({
    registry: metrics.registry,
    notReady: () => (!ready ? 'starting' : proxy.isDraining() ? 'draining: the pod is stopping' : ranges.problem()),
  });
  await ops.listen(config.healthListen, config.metricsListen);
  await listen(proxy.server, config.listen, 'the proxy');
  ready = true;
  logger.info({
    listen: config.listen, health: config.healthListen, metrics: config.metricsListen,
    allow: config.allow, ports: config.ports, allowRanges: allowRanges.map((r) => r.cidr), clusterRanges: clusterRanges.map((r) => r.cidr), clusterRangesFile: config.clusterRangesFile, outputHostsFile: config.outputHostsFile,
    maxTunnels: config.maxTunnels, maxTunnelsPerClient: config.maxTunnelsPerClient,
    maxConnections: config.maxConnections, maxConnectionsPerClient: config.maxConnectionsPerClient, dns: config.dns.length ? config.dns : 'system',
    parentProxy: parent?.shown, noProxy: config.parentProxy?.noProxy,
    memoryLimitBytes: config.buffers.memoryLimitBytes, bufferBudgetBytes: config.buffers.totalBytes, clientBufferShareBytes: config.buffers.perClientBytes,
  }, 'egress proxy ready');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, activeTunnels: proxy.activeTunnels(), drainTimeoutMs: config.drainTimeoutMs }, 'egress proxy draining');
    ranges.stop();
    stopOutputHosts();
    await proxy.drain(config.drainTimeoutMs);
    await ops.close();
    logger.info('egress proxy stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: Error) => {
  logger.fatal(err.message);
  console.error(`rlmesh-egress-proxy: ${err.message}\n${USAGE}`);
  process.exit(1);
});
