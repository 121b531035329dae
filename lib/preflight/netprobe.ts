// The probe pod's whole job: try a TCP connection to a target the
// NetworkPolicies forbid and to one they allow (3 s each), write one line to
// the termination message, and exit 0 (enforced), 10 (forbidden target
// reachable), 11 (allowed target unreachable) or 12 (allowed name unresolved).
//   /usr/local/bin/node /app/lib/preflight/netprobe.js <forbidden host:port> <allowed host:port>
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';

type Result = 'connected' | 'unresolved' | 'blocked';

function tryConnect(target: string): Promise<Result> {
  const i = target.lastIndexOf(':');
  const host = target.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(target.slice(i + 1));
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 3000 });
    const done = (r: Result): void => {
      socket.destroy();
      resolve(r);
    };
    socket.once('connect', () => done('connected'));
    socket.once('timeout', () => done('blocked'));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN' ? 'unresolved' : 'blocked'));
  });
}

const [forbidden, allowed] = process.argv.slice(2);
if (!forbidden || !allowed) {
  console.error('usage: netprobe.ts <forbidden host:port> <allowed host:port>');
  process.exit(2);
}
const [f, a] = await Promise.all([tryConnect(forbidden), tryConnect(allowed)]);
const code = f === 'connected' ? 10 : a === 'unresolved' ? 12 : a !== 'connected' ? 11 : 0;
const line = `forbidden ${forbidden}: ${f}; allowed ${allowed}: ${a}`;
try {
  writeFileSync('/dev/termination-log', line);
} catch {
  // outside a pod there is no termination log
}
console.log(line);
process.exit(code);
