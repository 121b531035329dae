// Benchmark of the egress proxy's header timeout (not a timed test): how long a
// client that sends a request line and then nothing waits for the 408 and the
// close, against the configured --header-timeout-ms. The functional test
// (test/egress/egress-proxy.test.ts "refuses oversized headers (431) and slow
// headers (408)") proves the answer; this measures when it comes. Loopback only.
//
//   node test/bench/egress-timeouts.ts [--timeout-ms 1500] [--clients 10]
//
// Prints each figure as a ratio to the configured timeout. Goal: at most 3.33
// (5 s for a 1.5 s timeout, the bound the functional test used to assert).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../support/free-port.ts';
import { ROOT } from '../support/runtime.ts';

const { values } = parseArgs({ options: { 'timeout-ms': { type: 'string', default: '1500' }, clients: { type: 'string', default: '10' } } });
const TIMEOUT_MS = Number(values['timeout-ms']);
const CLIENTS = Number(values.clients);
const GOAL = 5000 / 1500;

async function slowHeader(port: number): Promise<{ ms: number; answer: string }> {
  const s = net.connect({ host: '127.0.0.1', port });
  await once(s, 'connect');
  const chunks: Buffer[] = [];
  s.on('data', (d: Buffer) => chunks.push(d));
  s.write('CONNECT ok.bench.test:443 HTTP/1.1\r\n');
  const started = performance.now();
  await once(s, 'close');
  return { ms: performance.now() - started, answer: Buffer.concat(chunks).toString().split('\r\n')[0] ?? '' };
}

async function main(): Promise<void> {
  const [port, health, metrics] = [await freePort(), await freePort(), await freePort()];
  const proxy = spawn(process.execPath, [join(ROOT, 'egress/main.ts'), '--port', String(port), '--health-port', String(health), '--metrics-port', String(metrics),
    '--allow', 'ok.bench.test', '--header-timeout-ms', String(TIMEOUT_MS)], { env: { ...process.env, RLMESH_LISTEN_HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((ok, fail) => {
      proxy.stdout!.on('data', (d: Buffer) => d.toString().includes('egress proxy ready') && ok());
      proxy.once('exit', (code) => fail(new Error(`the egress proxy exited (${code}) before it was ready`)));
    });
    // one at a time, then all at once: a timer per connection, not one shared sweep
    const sequential = [];
    for (let i = 0; i < CLIENTS; i++) sequential.push(await slowHeader(port));
    const together = await Promise.all(Array.from({ length: CLIENTS }, () => slowHeader(port)));
    for (const r of [...sequential, ...together]) if (!r.answer.startsWith('HTTP/1.1 408')) throw new Error(`expected a 408, got ${JSON.stringify(r.answer)}`);
    const show = (what: string, runs: { ms: number }[]) => {
      const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
      const [median, worst] = [ms[Math.floor(ms.length / 2)]!, ms.at(-1)!];
      console.log(`${what.padEnd(28)} median ${median.toFixed(0)} ms (${(median / TIMEOUT_MS).toFixed(2)}x), slowest ${worst.toFixed(0)} ms (${(worst / TIMEOUT_MS).toFixed(2)}x of the ${TIMEOUT_MS} ms timeout; goal <= ${GOAL.toFixed(2)}x) ${worst / TIMEOUT_MS <= GOAL ? 'ok' : 'MISSED'}`);
    };
    show(`${CLIENTS} slow clients, one by one`, sequential);
    show(`${CLIENTS} slow clients at once`, together);
  } finally {
    proxy.kill('SIGTERM');
  }
}

await main();
