// The SBOM an image carries (/usr/share/sbom/<name>.cdx.json, scripts/image/sbom.ts),
// read back from the image's layers in its OCI layout: the release attests exactly
// the document that ships inside the image.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sbomPath } from '../image/sbom.ts';

/** Copies image `name`'s SBOM out of the layout's manifest `digest` into `outFile`; the last layer holding it wins, as in the image. */
export function extractImageSbom(layout: string, digest: string, name: string, outFile: string): string {
  const blob = (d: string) => join(layout, 'blobs/sha256', d.slice('sha256:'.length));
  const manifest = JSON.parse(readFileSync(blob(digest), 'utf8')) as { layers: { digest: string }[] };
  const path = sbomPath(name);
  let found: string | undefined;
  for (const layer of manifest.layers) {
    const r = spawnSync('tar', ['-xzOf', blob(layer.digest), path], { encoding: 'utf8', maxBuffer: 256 * 2 ** 20, stdio: ['ignore', 'pipe', 'pipe'] });
    if (r.status === 0) found = r.stdout;
  }
  if (found === undefined) throw new Error(`release: image ${name} (${layout}@${digest}) has no /${path} in any layer; every image ships its SBOM there (scripts/image/sbom.ts): rebuild it`);
  writeFileSync(outFile, found);
  return outFile;
}
