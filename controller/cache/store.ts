// The artifact cache on disk, content-addressed by SHA-256:
//   <root>/sha256/<digest>          verified artifacts, read-only, what pods mount
//   <root>/tmp/<digest>.partial     a download in progress (never mounted)
//   <root>/tmp/<digest>.chunks      which ranges of the partial file are written
//   <root>/tmp/<digest>.lock        who is downloading it
// An artifact appears under sha256/ only by an atomic rename after its size and
// digest were verified, so a failed, corrupt or interrupted download is never visible.
import { constants } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

export type Entry = { digest: string; size: number; lastUsedMs: number };

const DIGEST = /^[a-f0-9]{64}$/;

export class ArtifactStore {
  readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  async init(): Promise<void> {
    await mkdir(join(this.root, 'sha256'), { recursive: true });
    await mkdir(join(this.root, 'tmp'), { recursive: true });
  }

  path(digest: string): string {
    if (!DIGEST.test(digest)) throw new Error(`not a sha256 digest: ${digest}`);
    return join(this.root, 'sha256', digest);
  }

  tmpPath(digest: string): string {
    return join(this.root, 'tmp', `${digest}.partial`);
  }

  journalPath(digest: string): string {
    return join(this.root, 'tmp', `${digest}.chunks`);
  }

  async has(digest: string): Promise<boolean> {
    return stat(this.path(digest)).then(
      (s) => s.isFile(),
      () => false,
    );
  }

  /** Marks an artifact used now (its mtime is the LRU clock, so it survives restarts). */
  async touch(digest: string): Promise<void> {
    const now = new Date();
    await utimes(this.path(digest), now, now).catch(() => {});
  }

  async entries(): Promise<Entry[]> {
    const names = await readdir(join(this.root, 'sha256')).catch(() => [] as string[]);
    const out: Entry[] = [];
    for (const digest of names) {
      if (!DIGEST.test(digest)) continue;
      const s = await stat(join(this.root, 'sha256', digest)).catch(() => undefined);
      if (s?.isFile()) out.push({ digest, size: s.size, lastUsedMs: s.mtimeMs });
    }
    return out;
  }

  async remove(digest: string): Promise<void> {
    await rm(this.path(digest), { force: true });
  }

  /** Publishes a verified temp file: read-only, renamed into place, directory synced. */
  async commit(digest: string): Promise<void> {
    const tmp = this.tmpPath(digest);
    const fh = await open(tmp, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await chmod(tmp, 0o444);
    // a kubelet creates a missing subPath as an empty directory: clear one left in the way
    const existing = await stat(this.path(digest)).catch(() => undefined);
    if (existing?.isDirectory()) await rm(this.path(digest), { recursive: true, force: true });
    await rename(tmp, this.path(digest));
    const dir = await open(join(this.root, 'sha256'), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
    await this.discardPartial(digest);
  }

  async discardPartial(digest: string): Promise<void> {
    await rm(this.tmpPath(digest), { force: true });
    await rm(this.journalPath(digest), { force: true });
  }

  /**
   * Takes the on-disk download lock of an artifact. A lock left by a process
   * that is gone (killed mid-download) is taken over, and its partial file is
   * resumed; a lock held by a live process on this host is reported as busy.
   */
  async lock(digest: string): Promise<{ release: () => Promise<void> } | 'busy'> {
    const file = join(this.root, 'tmp', `${digest}.lock`);
    const me = JSON.stringify({ host: hostname(), pid: process.pid, since: new Date().toISOString() });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fh = await open(file, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o644);
        await fh.writeFile(me);
        await fh.close();
        return { release: () => rm(file, { force: true }) };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = await readFile(file, 'utf8').then(
        (t) => JSON.parse(t) as { host?: string; pid?: number },
        () => ({}) as { host?: string; pid?: number },
      );
      if (holder.host === hostname() && holder.pid !== undefined && holder.pid !== process.pid && alive(holder.pid)) return 'busy';
      // a dead holder (or one on another host: only the leader fills, so it is a predecessor)
      await rm(file, { force: true });
    }
    await writeFile(file, me);
    return { release: () => rm(file, { force: true }) };
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
