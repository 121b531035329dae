// The probe pod's whole job: try a TCP connection to a target the
// NetworkPolicies forbid and to one they allow (3 s each), write one line to
// the termination message, and exit 0 (enforced), 10 (forbidden target
// reachable), 11 (allowed target unreachable) or 12 (allowed name unresolved).
// Some enforcers (kube-router, for one) program a new pod's rules a few seconds
// after it starts: a forbidden target that answers, and an allowed one that
// does not, are tried again once a second for the grace period (third
// argument, seconds, default 15), and the line says how long enforcement took.
// Evaluation pods run the same program as their first init container
// (controller/pod-spec.ts, network-ready), so no evaluation starts before its
// pod's policies are in force.
//   /usr/local/bin/node /app/lib/preflight/netprobe.js <forbidden host:port> <allowed host:port> [grace seconds]
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

const [forbidden, allowed, grace = '15'] = process.argv.slice(2);
if (!forbidden || !allowed || !/^\d{1,3}$/.test(grace)) {
  console.error('usage: netprobe.ts <forbidden host:port> <allowed host:port> [grace seconds, 0-999]');
  process.exit(2);
}
const ENFORCEMENT_GRACE_MS = Number(grace) * 1000;
const started = Date.now();
let [f, a] = await Promise.all([tryConnect(forbidden), tryConnect(allowed)]);
// both ways are retried: the forbidden target until it is blocked, the allowed one until it answers
// (an enforcer adds a new pod to the peers the allowed target accepts just as late)
while ((f === 'connected' || a !== 'connected') && Date.now() - started < ENFORCEMENT_GRACE_MS) {
  await new Promise((r) => setTimeout(r, 1000));
  [f, a] = await Promise.all([f === 'connected' ? tryConnect(forbidden) : f, a !== 'connected' ? tryConnect(allowed) : a]);
}
const late = f === 'blocked' && a === 'connected' && Date.now() - started > 1000 ? ` (enforced after ${Math.round((Date.now() - started) / 1000)} s)` : '';
const code = f === 'connected' ? 10 : a === 'unresolved' ? 12 : a !== 'connected' ? 11 : 0;
const line = `forbidden ${forbidden}: ${f}${late}; allowed ${allowed}: ${a}`;
try {
  writeFileSync('/dev/termination-log', line);
} catch {
  // outside a pod there is no termination log
}
console.log(line);
process.exit(code);
