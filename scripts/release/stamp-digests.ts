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
// Refused, with nothing written: an image block of the chart that no released
// image matches (it would ship unpinned), a released image the chart does not
// name, a digest that is not sha256:<64 hex>.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
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
  const sorted = Object.fromEntries(Object.entries(images).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(path, tpl.replace(define, `$1${JSON.stringify(sorted)}$2`));
}
