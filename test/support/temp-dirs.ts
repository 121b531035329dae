// A vitest globalSetup: every temporary file or folder the tests make goes into one folder of
// this run, and a test that leaves one behind fails the run.
//
// The run's folder becomes TMPDIR, so os.tmpdir() and mkdtemp in every test worker (and in the
// programs the tests start, which inherit the environment) land in it. At the end, whatever is
// still in it was made by a test or helper that did not remove it: the run names each entry and
// exits non-zero, then removes the folder so nothing stays in /tmp either way. Comparing /tmp
// before and after would blame this run for what other processes on the machine (other runs
// among them) create meanwhile; a folder of the run's own sees only the run.
//
// List it after any globalSetup that starts long-lived processes (test/cluster/up): those
// must keep the machine's TMPDIR. test/cluster/up and restart, run by a test, give the cluster's
// processes the machine's TMPDIR again (RLMESH_MACHINE_TMPDIR).
import { chmodSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const RUN_PREFIX = 'rlmesh-test-run-';

export default function setup(): () => void {
  const previous = process.env.TMPDIR;
  const machine = tmpdir();
  const dir = realpathSync(mkdtempSync(join(machine, RUN_PREFIX)));
  // like /tmp: programs the tests start under another user (squid runs as proxy) reach their folders
  chmodSync(dir, 0o1777);
  process.env.TMPDIR = dir;
  // what test/cluster/up and restart give the cluster's processes, which outlive the run
  process.env.RLMESH_MACHINE_TMPDIR = machine;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    delete process.env.RLMESH_MACHINE_TMPDIR;
    let left: string[] = [];
    try {
      // Node's own module compile cache (module.enableCompileCache() keeps it under the temporary folder), not a test's
      left = readdirSync(dir).filter((e) => e !== 'node-compile-cache');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    if (left.length === 0) return;
    console.error(
      `\n${left.length} temporary ${left.length === 1 ? 'entry was' : 'entries were'} left behind by the tests (removed now): ${left.sort().join(', ')}\n` +
        'Each test removes what it makes (afterEach/afterAll, or the stop function of the helper that made it); find the test by the prefix.',
    );
    process.exitCode = 1;
  };
}
