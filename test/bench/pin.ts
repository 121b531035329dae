// The benchmarks' pinned mode: each party on its own core, as when a component
// runs as its own pod on its own node.
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';

/** Sets the CPUs of every thread of a process (taskset -a); threads and children started later inherit them. */
export function pin(pid: number, cpuList: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
}

/** Every CPU of the machine as a taskset list; refuses a machine with fewer than two, where nothing can be pinned apart. */
export function allCpus(): string {
  if (cpus().length < 2) throw new Error(`the pinned mode needs 2 CPUs and this machine has ${cpus().length}`);
  return `0-${cpus().length - 1}`;
}
