// A network namespace joined to the host by a veth pair, addressed from the
// benchmarking ranges (198.18.0.0/15, 2001:2::/48), for upstream servers the
// egress tests and benchmark reach through the proxy. Also routes a "dark"
// /24 through the namespace, which drops it (forwarding is off there), so a
// connection to it times out instead of being refused.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

export interface Netns {
  name: string;
  hostAddress: string;
  nsAddress: string;
  nsAddress6: string;
  darkAddress: string;
  /** runs `node <script> ...args` inside the namespace; resolves on its first stdout line */
  spawnNode: (script: string, args: string[]) => Promise<{ child: ChildProcess; firstLine: string }>;
  destroy: () => void;
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** `subnet` picks 198.18.<subnet>.0/24 and 2001:2:0:<subnet>::/64, so test and bench can coexist. */
export function createNetns(tag: string, subnet: number): Netns {
  const name = `rlm-${tag}`;
  const hostIf = `${tag}-h`;
  const nsIf = `${tag}-n`;
  const v4 = (host: number) => `198.18.${subnet}.${host}`;
  const v6 = (host: number) => `2001:2:0:${subnet.toString(16)}::${host}`;
  const dark = `198.18.${subnet + 100}.0/24`;
  const children: ChildProcess[] = [];
  const destroy = () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const args of [['route', 'del', dark], ['link', 'del', hostIf], ['netns', 'del', name]]) {
      try {
        ip(...args);
      } catch {
        // already gone
      }
    }
  };
  destroy(); // a previous run that died before its cleanup
  ip('netns', 'add', name);
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
  ip('link', 'set', nsIf, 'netns', name);
  ip('addr', 'add', `${v4(1)}/24`, 'dev', hostIf);
  ip('-6', 'addr', 'add', `${v6(1)}/64`, 'dev', hostIf, 'nodad');
  ip('link', 'set', hostIf, 'up');
  ip('-n', name, 'addr', 'add', `${v4(2)}/24`, 'dev', nsIf);
  ip('-n', name, '-6', 'addr', 'add', `${v6(2)}/64`, 'dev', nsIf, 'nodad');
  ip('-n', name, 'link', 'set', nsIf, 'up');
  ip('-n', name, 'link', 'set', 'lo', 'up');
  ip('route', 'add', dark, 'via', v4(2));
  return {
    name,
    hostAddress: v4(1),
    nsAddress: v4(2),
    nsAddress6: v6(2),
    darkAddress: `198.18.${subnet + 100}.9`,
    destroy,
    async spawnNode(script, args) {
      const child = spawn('ip', ['netns', 'exec', name, process.execPath, script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      const lines = createInterface({ input: child.stdout! });
      const first = await Promise.race([
        once(lines, 'line').then(([l]) => l as string),
        once(child, 'exit').then(([code]) => {
          throw new Error(`${script} in netns ${name} exited with ${code} before it was ready`);
        }),
      ]);
      return { child, firstLine: first };
    },
  };
}
