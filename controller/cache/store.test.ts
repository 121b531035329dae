import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ArtifactStore } from './store.ts';
import { tempDir } from '../../test/support/temp.ts';

const d = (c: string) => c.repeat(64);

async function store() {
  const s = new ArtifactStore(tempDir('rlmesh-store-'));
  await s.init();
  return s;
}

describe('ArtifactStore', () => {
  it('publishes only through commit, read-only, and lists entries by last use', async () => {
    const s = await store();
    writeFileSync(s.tmpPath(d('a')), 'hello');
    expect(await s.has(d('a'))).toBe(false);
    expect(await s.entries()).toEqual([]);
    await s.commit(d('a'));
    expect(await s.has(d('a'))).toBe(true);
    expect(readFileSync(s.path(d('a')), 'utf8')).toBe('hello');
    expect(existsSync(s.tmpPath(d('a')))).toBe(false);
    const [e] = await s.entries();
    expect(e).toMatchObject({ digest: d('a'), size: 5 });
    const before = e!.lastUsedMs;
    await new Promise((r) => setTimeout(r, 20));
    await s.touch(d('a'));
    expect((await s.entries())[0]!.lastUsedMs).toBeGreaterThan(before);
    await s.remove(d('a'));
    expect(await s.has(d('a'))).toBe(false);
  });

  it('publishes over an empty directory a kubelet left at the path', async () => {
    const s = await store();
    mkdirSync(s.path(d('e')));
    writeFileSync(s.tmpPath(d('e')), 'x');
    expect(await s.has(d('e'))).toBe(false);
    await s.commit(d('e'));
    expect(readFileSync(s.path(d('e')), 'utf8')).toBe('x');
  });

  it('refuses paths that are not digests', async () => {
    const s = await store();
    expect(() => s.path('../../etc/passwd')).toThrow(/not a sha256 digest/);
  });

  it('locks a download: busy while a live process holds it, taken over from a dead one', async () => {
    const s = await store();
    const lock = await s.lock(d('b'));
    expect(lock).not.toBe('busy');
    // a live process on this host
    const child = spawn('sleep', ['30']);
    writeFileSync(join(s.root, 'tmp', `${d('c')}.lock`), JSON.stringify({ host: hostname(), pid: child.pid }));
    expect(await s.lock(d('c'))).toBe('busy');
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    const taken = await s.lock(d('c'));
    expect(taken).not.toBe('busy');
    if (taken !== 'busy') await taken.release();
    if (lock !== 'busy') await lock.release();
    expect(existsSync(join(s.root, 'tmp', `${d('b')}.lock`))).toBe(false);
  });
});
