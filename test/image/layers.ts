// Reading images as a registry serves them: pull by digest into an OCI
// layout (skopeo), then list the files their layers hold, with owner, mode,
// link target and a hash of the content, the way a runtime would unpack them.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, lstatSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import { readImage, walk } from '../../scripts/image/oci-layout.ts';
import { registryAuthFile } from '../support/cluster.ts';
import { tempDir } from '../support/temp.ts';

export type TreeEntry = { type: 'file' | 'directory' | 'symlink'; mode: number; uid: number; gid: number; sha256?: string; linkname?: string };
export type Tree = Map<string, TreeEntry>;

/**
 * Pulls `ref` (host:port/repo@sha256:…) from the local plain-HTTP registry, as its publisher, into a fresh OCI layout; returns its folder.
 * skopeo retries a blob read the registry cut short (seen once under load: "happened during read: unexpected EOF").
 */
export function pullLayout(ref: string): string {
  const dir = tempDir('rlmesh-pulled-');
  execFileSync('skopeo', ['copy', '--quiet', '--retry-times', '3', '--src-tls-verify=false', '--src-authfile', registryAuthFile(), '--preserve-digests', `docker://${ref}`, `oci:${dir}:img`], { stdio: ['ignore', 'ignore', 'pipe'] });
  return dir;
}

/** Every path the image's layers hold (no leading slash, no trailing slash on folders). */
export async function layoutTree(dir: string): Promise<Tree> {
  const tree: Tree = new Map();
  for (const layer of readImage(dir).manifest.layers) {
    const x = extract();
    x.on('entry', (h, stream, next) => {
      const name = h.name.replace(/^\.\//, '').replace(/\/$/, '');
      const base = { mode: (h.mode ?? 0) & 0o7777, uid: h.uid ?? 0, gid: h.gid ?? 0 };
      if (h.type === 'file') {
        const hash = createHash('sha256');
        stream.on('data', (c: unknown) => hash.update(c as Buffer));
        stream.on('end', () => {
          tree.set(name, { type: 'file', ...base, sha256: hash.digest('hex') });
          next();
        });
      } else {
        if (h.type === 'directory') tree.set(name, { type: 'directory', ...base });
        else if (h.type === 'symlink') tree.set(name, { type: 'symlink', ...base, mode: 0o777, linkname: h.linkname ?? '' });
        else throw new Error(`layer ${layer.digest}: ${name} is a ${h.type}; the image's layers hold only files, folders and symlinks`);
        stream.on('end', next);
        stream.resume();
      }
    });
    await pipeline(createReadStream(join(dir, 'blobs/sha256', layer.digest.slice(7))), createGunzip(), x);
  }
  return tree;
}

/** The same listing for a folder on disk (the Dockerfile's --rootfs output). */
export function folderTree(root: string): Tree {
  const tree: Tree = new Map();
  for (const rel of walk(root)) {
    const abs = join(root, rel);
    const st = lstatSync(abs);
    const base = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
    if (st.isDirectory()) tree.set(rel, { type: 'directory', ...base });
    else if (st.isSymbolicLink()) tree.set(rel, { type: 'symlink', ...base, mode: 0o777, linkname: readlinkSync(abs) });
    else tree.set(rel, { type: 'file', ...base, sha256: createHash('sha256').update(readFileSync(abs)).digest('hex') });
  }
  return tree;
}
