// Verifying what the release signed, the way a user does: cosign verify,
// verify-attestation and verify-blob with the release's public key and no
// transparency log (the release signs with --tlog-upload=false). Also makes
// the tampered artifacts those checks must refuse: an image copy with one
// label changed, pushed to the same repository, and a blob with one byte changed.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { registryFlags, runCosign, type CosignRun, type RegistryAccess } from '../../scripts/release/cosign.ts';
import { ROOT } from '../../scripts/image/source.ts';
import { findTool } from '../../scripts/release/tools.ts';
import { tempDir } from './temp.ts';

/** cosign, built from its Go module by test/support/build-cosign.sh (cached). */
export function cosignBinary(): string {
  return execFileSync('bash', [join(ROOT, 'test/support/build-cosign.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
}

export type Verifier = { cosign: string; publicKey: string; access: RegistryAccess };

/** An in-toto statement from a verified attestation. */
export type Statement = { _type: string; predicateType: string; subject: { name: string; digest: Record<string, string> }[]; predicate: unknown };

const run = (v: Verifier, args: string[]): CosignRun => runCosign(args, { cosign: v.cosign, ...(v.access.authFile ? { authFile: v.access.authFile } : {}) });

/** cosign verify of `ref` (repository@digest) with the key; status 0 when a signature by that key is attached. */
export function verifySignature(v: Verifier, ref: string): CosignRun {
  return run(v, ['verify', '--key', v.publicKey, '--insecure-ignore-tlog=true', ...registryFlags(v.access.plainHttp), ref]);
}

/** cosign verify-attestation of `type` on `ref`, and the statements it verified (decoded from their DSSE envelopes). */
export function verifyAttestation(v: Verifier, ref: string, type: string): CosignRun & { statements: Statement[] } {
  const r = run(v, ['verify-attestation', '--key', v.publicKey, '--insecure-ignore-tlog=true', '--type', type, ...registryFlags(v.access.plainHttp), ref]);
  const statements =
    r.status === 0
      ? r.stdout
          .split('\n')
          .filter((l) => l.trim() !== '')
          .map((l) => JSON.parse(Buffer.from((JSON.parse(l) as { payload: string }).payload, 'base64').toString('utf8')) as Statement)
      : [];
  return { ...r, statements };
}

/** cosign verify-blob of `file` against its cosign bundle with the key. */
export function verifyBlob(v: Verifier, file: string, bundle: string): CosignRun {
  return run(v, ['verify-blob', '--key', v.publicKey, '--insecure-ignore-tlog=true', '--bundle', bundle, file]);
}

/** cosign generate-key-pair in `dir` (cosign.key, cosign.pub), the private half under `password`. */
export function generateKeyPair(cosign: string, dir: string, password: string): { key: string; publicKey: string } {
  execFileSync(cosign, ['generate-key-pair'], { cwd: dir, env: { ...process.env, COSIGN_PASSWORD: password }, stdio: ['ignore', 'ignore', 'pipe'] });
  return { key: join(dir, 'cosign.key'), publicKey: join(dir, 'cosign.pub') };
}

/** A new cosign key pair in a temporary folder (another signer's), with its password. */
export function otherKeyPair(cosign: string): { key: string; publicKey: string; password: string } {
  const password = 'another-signer';
  return { ...generateKeyPair(cosign, tempDir('rlmesh-other-key-'), password), password };
}

/** A copy of `file` with its middle byte changed. */
export function tamperedBlob(file: string): string {
  const copy = join(tempDir('rlmesh-tampered-blob-'), `tampered-${file.split('/').pop()}`);
  copyFileSync(file, copy);
  const bytes = readFileSync(copy);
  const i = Math.floor(bytes.length / 2);
  bytes[i] = bytes[i]! ^ 0xff;
  writeFileSync(copy, bytes);
  return copy;
}

/**
 * Pushes a copy of image `ref` (repository@digest) with one label changed to the same repository under
 * `tag`, as someone who can push but does not hold the key would; returns the copy's repository@digest.
 */
export function pushTamperedImage(ref: string, tag: string, access: RegistryAccess): string {
  const skopeo = findTool('skopeo');
  const auth = access.authFile ? ['--authfile', access.authFile] : [];
  const layout = join(tempDir('rlmesh-tampered-image-'), 'oci');
  const [repository] = ref.split('@') as [string];
  execFileSync(skopeo, ['copy', '--quiet', ...auth, ...(access.plainHttp ? ['--src-tls-verify=false'] : []), `docker://${ref}`, `oci:${layout}:original`], { stdio: ['ignore', 'pipe', 'pipe'] });
  const blob = (digest: string) => join(layout, 'blobs/sha256', digest.slice('sha256:'.length));
  const put = (data: string): { digest: string; size: number } => {
    const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
    writeFileSync(blob(digest), data);
    return { digest, size: Buffer.byteLength(data) };
  };
  const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: { mediaType: string; digest: string; size: number; annotations?: Record<string, string> }[] };
  const original = index.manifests[0]!;
  const manifest = JSON.parse(readFileSync(blob(original.digest), 'utf8')) as { config: { digest: string; size: number } };
  const config = JSON.parse(readFileSync(blob(manifest.config.digest), 'utf8')) as { config?: { Labels?: Record<string, string> } };
  config.config = { ...config.config, Labels: { ...config.config?.Labels, 'dev.rlmesh.tampered': 'yes' } };
  const newConfig = put(JSON.stringify(config));
  const newManifest = put(JSON.stringify({ ...manifest, config: { ...manifest.config, ...newConfig } }));
  index.manifests = [{ mediaType: original.mediaType, ...newManifest, annotations: { 'org.opencontainers.image.ref.name': tag } }];
  writeFileSync(join(layout, 'index.json'), JSON.stringify(index));
  execFileSync(skopeo, ['copy', '--quiet', '--preserve-digests', ...auth, ...(access.plainHttp ? ['--dest-tls-verify=false'] : []), `oci:${layout}:${tag}`, `docker://${repository}:${tag}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  return `${repository}@${newManifest.digest}`;
}
