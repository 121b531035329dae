// Temporary folders that the tests remove again. tempDir(prefix) makes one in os.tmpdir(); every
// folder made while a test file runs is removed after that file's tests (an afterAll this module
// registers when a test file imports it, which runs after the file's own afterAll hooks, so the
// processes those stop no longer write there). Outside vitest (the demo, benchmarks run with node)
// they are removed when the process exits. test/support/temp-dirs.ts fails a run that leaves
// anything behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];
const removeAll = (): void => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
};

if (process.env.VITEST) {
  const { afterAll } = await import('vitest');
  afterAll(removeAll);
} else {
  process.once('exit', removeAll);
}

/** A new folder `<tmpdir>/<prefix>XXXXXX`, removed after the current test file (or when the process exits). */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
