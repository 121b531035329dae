// Writes an OCI image layout (https://github.com/opencontainers/image-spec,
// layout.md) from folders on disk, with no container engine. The same inputs
// always give the same bytes: tar entries in sorted order, every owner fixed by
// the caller (root unless told otherwise), every mtime the source commit's, no
// uname/gname, gzip with no timestamp. So the manifest digest is a pure
// function of the files, and two builds of one commit publish one digest.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, lstatSync, writeFileSync, renameSync, createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { pack as tarPack } from 'tar-stream';

export const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

export type Descriptor = { mediaType: string; digest: string; size: number; annotations?: Record<string, string> };

/** Owner of one path inside the layer (relative, no leading slash). */
export type Owner = (path: string) => { uid: number; gid: number } | undefined;

export type LayerSource = {
  /** folder whose content becomes the layer's root */
  dir: string;
  /** what the image history says produced this layer */
  createdBy: string;
  owner?: Owner;
};

export type ImageConfig = {
  User: string;
  Entrypoint: string[];
  Env: string[];
  WorkingDir: string;
  Labels: Record<string, string>;
  Cmd?: string[];
};

export type BuiltImage = { layout: string; tag: string; digest: string; manifest: Descriptor; config: ImageConfig; layers: Descriptor[] };

/** Every path under dir, parents before children, sorted bytewise at each level. */
export function walk(dir: string, rel = ''): string[] {
  const out: string[] = [];
  const names = readdirSync(join(dir, rel)).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const name of names) {
    const path = rel ? `${rel}/${name}` : name;
    out.push(path);
    if (lstatSync(join(dir, path)).isDirectory()) out.push(...walk(dir, path));
  }
  return out;
}

/** Passes bytes through, hashing and counting them on the way. */
class Digester extends Transform {
  readonly hash = createHash('sha256');
  size = 0;
  override _transform(chunk: Buffer, _enc: string, done: (err: null, data: Buffer) => void): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }
}

function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

function writeBlob(layout: string, data: Buffer | string): Descriptor & { mediaType: '' } {
  const digest = sha256(data);
  writeFileSync(join(layout, 'blobs/sha256', digest.slice(7)), data);
  return { mediaType: '', digest, size: Buffer.byteLength(data) };
}

/** Packs one folder as a gzip layer blob; returns the blob's descriptor and the uncompressed diff ID. */
async function writeLayer(layout: string, src: LayerSource, mtime: Date): Promise<{ desc: Descriptor; diffId: string }> {
  const tar = tarPack();
  const raw = new Digester();
  const gz = new Digester();
  const tmp = join(layout, 'blobs/sha256', `.partial-${process.pid}`);
  const done = pipeline(tar, raw, createGzip({ level: 6 }), gz, createWriteStream(tmp));
  for (const path of walk(src.dir)) {
    const abs = join(src.dir, path);
    const st = lstatSync(abs);
    const { uid, gid } = src.owner?.(path) ?? { uid: 0, gid: 0 };
    const base = { uid, gid, uname: '', gname: '', mtime, mode: st.mode & 0o7777 };
    if (st.isDirectory()) await entry(tar, { ...base, name: `${path}/`, type: 'directory' });
    else if (st.isSymbolicLink()) await entry(tar, { ...base, name: path, type: 'symlink', linkname: readlinkSync(abs), mode: 0o777 });
    else if (st.isFile()) await entry(tar, { ...base, name: path, type: 'file', size: st.size }, readFileSync(abs));
    else throw new Error(`image layer ${src.dir}: ${path} is neither a file, a folder nor a symlink; layers hold only those`);
  }
  tar.finalize();
  await done;
  const digest = `sha256:${gz.hash.digest('hex')}`;
  renameSync(tmp, join(layout, 'blobs/sha256', digest.slice(7)));
  return { desc: { mediaType: MEDIA.layer, digest, size: gz.size }, diffId: `sha256:${raw.hash.digest('hex')}` };
}

function entry(tar: ReturnType<typeof tarPack>, header: Parameters<ReturnType<typeof tarPack>['entry']>[0], body?: Buffer): Promise<void> {
  return new Promise((ok, fail) => {
    const cb = (err?: Error | null) => (err ? fail(err) : ok());
    if (body) tar.entry(header, body, cb);
    else tar.entry(header, cb);
  });
}

/**
 * Writes layers, config, manifest and index.json into a fresh OCI layout at
 * `layout`, tagged `tag`. `created` is the source commit's time.
 */
export async function writeImage(opts: { layout: string; tag: string; layers: LayerSource[]; config: ImageConfig; created: Date }): Promise<BuiltImage> {
  const { layout, tag, created } = opts;
  mkdirSync(join(layout, 'blobs/sha256'), { recursive: true });
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const layers: Descriptor[] = [];
  const diffIds: string[] = [];
  for (const src of opts.layers) {
    const { desc, diffId } = await writeLayer(layout, src, created);
    layers.push(desc);
    diffIds.push(diffId);
  }
  const createdAt = created.toISOString();
  const config = {
    created: createdAt,
    architecture: 'amd64',
    os: 'linux',
    config: opts.config,
    rootfs: { type: 'layers', diff_ids: diffIds },
    history: opts.layers.map((l) => ({ created: createdAt, created_by: l.createdBy })),
  };
  const configDesc = { ...writeBlob(layout, JSON.stringify(config)), mediaType: MEDIA.config };
  const manifestJson = JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA.manifest,
    config: configDesc,
    layers,
    annotations: { 'org.opencontainers.image.created': createdAt },
  });
  const manifest = { ...writeBlob(layout, manifestJson), mediaType: MEDIA.manifest };
  const indexed = { ...manifest, annotations: { 'org.opencontainers.image.ref.name': tag }, platform: { architecture: 'amd64', os: 'linux' } };
  writeFileSync(join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.index, manifests: [indexed] }));
  return { layout, tag, digest: manifest.digest, manifest, config: opts.config, layers };
}

/** Reads the manifest and config of the single image in an OCI layout. */
export function readImage(layout: string): { manifest: { config: Descriptor; layers: Descriptor[] }; config: { config: ImageConfig }; digest: string } {
  const blob = (d: string) => readFileSync(join(layout, 'blobs/sha256', d.slice(7)), 'utf8');
  const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  const digest = index.manifests[0]!.digest;
  const manifest = JSON.parse(blob(digest)) as { config: Descriptor; layers: Descriptor[] };
  return { manifest, config: JSON.parse(blob(manifest.config.digest)) as { config: ImageConfig }, digest };
}
