// A file that holds credentials (rlmesh clusters join --out): it ends with mode
// 0600 whatever the file there had before, and nothing is ever written through
// a symlink (one planted at that path would send the credentials elsewhere).
// The content goes to a new file beside the target, created with O_EXCL and
// O_NOFOLLOW, then renamed over it; rename replaces the name and never follows
// a link. The target is checked before the join, so a refusal costs no token.
import { closeSync, constants, fchmodSync, fsyncSync, lstatSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join, resolve } from 'node:path';
import { errorMessage } from '../lib/error-fields.ts';

/** Why the target cannot take the file, or undefined when it can (absent, or a regular file). */
function targetProblem(path: string): string | undefined {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return `cannot check it: ${errorMessage(err)}`;
  }
  if (st.isSymbolicLink()) return 'it is a symbolic link, and credentials are never written through one (it could lead anywhere)';
  if (!st.isFile()) return 'it is not a regular file';
  return undefined;
}

export class PrivateFile {
  readonly path: string;
  private readonly temp: string;
  private fd: number | undefined;
  private renamed = false;

  private constructor(path: string, temp: string, fd: number) {
    this.path = path;
    this.temp = temp;
    this.fd = fd;
  }

  /** Checks `path` and creates the file beside it that commit() renames over it; throws what is wrong and what to do. */
  static open(path: string): PrivateFile {
    const target = resolve(path);
    const problem = targetProblem(target);
    if (problem) throw new Error(`refusing to write ${path}: ${problem}; remove it or pass another --out`);
    const temp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
    let fd: number;
    try {
      fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    } catch (err) {
      throw new Error(`cannot create a file in ${dirname(target)} for ${path}: ${errorMessage(err)}; pass an --out in a directory you can write to`);
    }
    return new PrivateFile(target, temp, fd);
  }

  /** Writes `content` and puts it in place with mode 0600. */
  commit(content: string): void {
    const fd = this.fd;
    if (fd === undefined) throw new Error(`${this.path}: already written or discarded`);
    this.fd = undefined;
    try {
      try {
        fchmodSync(fd, 0o600); // the umask may have taken bits away; 0600 exactly
        const bytes = Buffer.from(content, 'utf8');
        for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      // checked again: the path may have changed since open()
      const problem = targetProblem(this.path);
      if (problem) throw new Error(`refusing to write ${this.path}: ${problem}; remove it or pass another --out`);
      renameSync(this.temp, this.path);
      this.renamed = true;
    } catch (err) {
      this.discard();
      throw err;
    }
  }

  /** Removes the file open() created, unless commit() put it in place. */
  discard(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    if (this.renamed) return;
    try {
      unlinkSync(this.temp);
    } catch {
      // already gone
    }
  }
}
