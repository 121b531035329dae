// Records the images a release pushed in an unpacked copy of a chart, before
// `helm package`. The source charts were never released: their
// templates/_released-images.tpl holds `{}` and they pull repository:tag. The
// release writes there, per image name (the repository's last path segment),
// the tag and digest it pushed; an image block with no digest of its own, whose
// tag is empty or that tag, then pulls repository@digest.
//
// Why a template and not values.yaml: `helm upgrade --reuse-values` carries the
// previous release's values forward, so digests stamped into values.yaml would
// keep an upgraded installation on the old images; templates always come from
// the chart being installed.
//
// Chart.yaml's `artifacthub.io/images` annotation lists the same images by
// repository:tag; the release appends each one's digest there too, so Artifact
// Hub shows (and scans) exactly what the chart pulls.
//
// Refused, with nothing written: an image block of the chart that no released
// image matches (it would ship unpinned), a released image the chart does not
// name, a digest that is not sha256:<64 hex>, an `artifacthub.io/images` list
// that names other images or tags than the release pushed.
import { createHash, createPublicKey } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseDocument, stringify } from 'yaml';
import { DIGEST } from '../../lib/chart-values.ts';

export const RELEASED_IMAGES_TPL = 'templates/_released-images.tpl';

export type ReleasedImage = { tag: string; digest: string };

/** repository of every image block (a map with repository, tag and digest) in a values tree */
export function imageRepositories(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(imageRepositories);
  if (value === null || typeof value !== 'object') return [];
  const o = value as Record<string, unknown>;
  if (typeof o.repository === 'string' && 'digest' in o && 'tag' in o) return o.repository === '' ? [] : [o.repository];
  return Object.values(o).flatMap(imageRepositories);
}

const imageName = (repository: string) => repository.split('/').pop()!;

export function stampDigests(chartDir: string, images: Record<string, ReleasedImage>): void {
  for (const [name, { digest, tag }] of Object.entries(images)) {
    if (!DIGEST.test(digest)) throw new Error(`the digest released for ${name} is ${JSON.stringify(digest)}, not sha256: followed by 64 lowercase hex digits`);
    if (!tag) throw new Error(`the image ${name} was released without a tag`);
  }
  const names = [...new Set(imageRepositories(parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8'))).map(imageName))];
  const missing = names.filter((n) => !images[n]);
  if (missing.length > 0)
    throw new Error(`${chartDir}: the chart runs ${missing.join(', ')} but the release built no such image (it built ${Object.keys(images).join(', ')}); a published chart must pin every image it names`);
  const extra = Object.keys(images).filter((n) => !names.includes(n));
  if (extra.length > 0) throw new Error(`${chartDir}: the chart names no image ${extra.join(', ')}; the release and the chart disagree about what this chart runs`);
  const path = join(chartDir, RELEASED_IMAGES_TPL);
  const tpl = readFileSync(path, 'utf8');
  const define = /(\{\{- define "[a-z]+\.releasedImages" -\}\})\{\}(\{\{- end \}\})/;
  if (!define.test(tpl)) throw new Error(`${path} is not an unreleased chart's template (a releasedImages define holding {}); stamp a fresh copy of the chart`);
  const chartYaml = stampArtifactHubImages(chartDir, images);
  const sorted = Object.fromEntries(Object.entries(images).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(path, tpl.replace(define, `$1${JSON.stringify(sorted)}$2`));
  writeFileSync(join(chartDir, 'Chart.yaml'), chartYaml);
}

export const ARTIFACTHUB_IMAGES = 'artifacthub.io/images';
type ArtifactHubImage = { name: string; image: string; platforms?: string[] };

/** The images Chart.yaml's artifacthub.io/images annotation lists. */
export function artifactHubImages(chartDir: string): ArtifactHubImage[] {
  const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { annotations?: Record<string, string> };
  const list = chart.annotations?.[ARTIFACTHUB_IMAGES];
  if (!list) throw new Error(`${chartDir}/Chart.yaml has no ${ARTIFACTHUB_IMAGES} annotation; list the images the chart runs there`);
  return parse(list) as ArtifactHubImage[];
}

/** Chart.yaml with each artifacthub.io/images entry pinned to the released digest (returned, not written). */
function stampArtifactHubImages(chartDir: string, images: Record<string, ReleasedImage>): string {
  const file = join(chartDir, 'Chart.yaml');
  const listed = artifactHubImages(chartDir);
  const names = listed.map((i) => imageName(i.image.replace(/[:@].*$/, '')));
  const differ = [...Object.keys(images).filter((n) => !names.includes(n)), ...names.filter((n) => !images[n])];
  if (differ.length > 0) throw new Error(`${file}: ${ARTIFACTHUB_IMAGES} lists ${names.join(', ')} but the release pushed ${Object.keys(images).join(', ')}; make the list name what the chart runs`);
  const stamped = listed.map((entry, i) => {
    const { tag, digest } = images[names[i]!]!;
    const m = /^([^@]+):([^:/@]+)$/.exec(entry.image);
    if (!m || m[2] !== tag) throw new Error(`${file}: ${ARTIFACTHUB_IMAGES} lists ${entry.image}, but the release pushed tag ${tag}; list it as <repository>:${tag}`);
    return { ...entry, image: `${m[1]}:${tag}@${digest}` };
  });
  const doc = parseDocument(readFileSync(file, 'utf8'));
  doc.setIn(['annotations', ARTIFACTHUB_IMAGES], stringify(stamped));
  return doc.toString();
}

export const ARTIFACTHUB_SIGN_KEY = 'artifacthub.io/signKey';

/** A public key's fingerprint: the SHA-256 of its DER SubjectPublicKeyInfo, in upper-case hex. */
export function keyFingerprint(publicKeyPem: string): string {
  const der = createPublicKey(publicKeyPem).export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('hex').toUpperCase();
}

/**
 * Records in Chart.yaml where the key that signs the chart is published (`url`, where the release's
 * cosign.pub is put) and its fingerprint, as Artifact Hub's artifacthub.io/signKey annotation.
 */
export function stampSignKey(chartDir: string, key: { publicKey: string; url: string }): void {
  if (!/^https:\/\/\S+$/.test(key.url)) throw new Error(`the signing key's address ${JSON.stringify(key.url)} is not an https:// URL; Artifact Hub shows it to users, who fetch the key from there to verify the chart`);
  const file = join(chartDir, 'Chart.yaml');
  const doc = parseDocument(readFileSync(file, 'utf8'));
  doc.setIn(['annotations', ARTIFACTHUB_SIGN_KEY], stringify({ fingerprint: keyFingerprint(key.publicKey), url: key.url }));
  writeFileSync(file, doc.toString());
}
