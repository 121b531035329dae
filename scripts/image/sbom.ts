// The software bill of materials each image and the CLI ship: a CycloneDX 1.5
// JSON document listing every component with its version, license and purl.
// Written from plain types that the zod schema below checks (the part of
// CycloneDX 1.5 this project writes; sbom.test.ts). The same components give
// the same bytes: no timestamp (the Dockerfile build has no commit to date it
// by), components sorted, and a serial number derived from the content.
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';

/** Where an image holds its document: Syft's sbom-cataloger reads files named *.cdx.* (syft scan --select-catalogers +sbom-cataloger). */
export const sbomPath = (image: string): string => `usr/share/sbom/${image}.cdx.json`;

const license = z.union([z.strictObject({ license: z.strictObject({ name: z.string().min(1) }) }), z.strictObject({ expression: z.string().min(1) })]);

const component = z.strictObject({
  type: z.enum(['application', 'library', 'container']),
  'bom-ref': z.string().min(1),
  name: z.string().min(1),
  version: z.string().min(1),
  purl: z.string().regex(/^pkg:[a-z]+\/[^@]+@[^@]+$/),
  // left out where the license cannot be read from the component itself
  licenses: z.array(license).min(1).optional(),
});

/** What this project writes of CycloneDX 1.5 (bom-1.5.schema.json: bomFormat, specVersion, serialNumber's pattern, metadata.component, components). */
export const bomSchema = z.strictObject({
  bomFormat: z.literal('CycloneDX'),
  specVersion: z.literal('1.5'),
  serialNumber: z.string().regex(/^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
  version: z.literal(1),
  metadata: z.strictObject({ component: z.strictObject({ type: z.enum(['container', 'application']), 'bom-ref': z.string(), name: z.string(), version: z.string() }) }),
  components: z.array(component),
});

export type License = z.infer<typeof license>;
export type Component = Omit<z.infer<typeof component>, 'bom-ref'>;
export type Bom = z.infer<typeof bomSchema>;

/** The document for `subject` (the image or the CLI artifact) and what it contains; one entry per purl, sorted by purl. */
export function cycloneDx(subject: { type: 'container' | 'application'; name: string; version: string }, components: Component[]): Bom {
  const byPurl = new Map(components.map((c) => [c.purl, { type: c.type, 'bom-ref': c.purl, name: c.name, version: c.version, purl: c.purl, ...(c.licenses ? { licenses: c.licenses } : {}) }]));
  const sorted = [...byPurl.values()].sort((a, b) => (a.purl < b.purl ? -1 : a.purl > b.purl ? 1 : 0));
  const body = { metadata: { component: { ...subject, 'bom-ref': `${subject.name}@${subject.version}` } }, components: sorted };
  return bomSchema.parse({ bomFormat: 'CycloneDX', specVersion: '1.5', serialNumber: `urn:uuid:${uuidV5(JSON.stringify(body))}`, version: 1, ...body });
}

/** Writes `bom` to `path` (relative to `root`), making its folders. */
export function writeBom(root: string, path: string, bom: Bom): string {
  const file = join(root, path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(bom, null, 2)}\n`);
  return file;
}

// RFC 4122's URL namespace: a name-based UUID, so the serial number is unique per content and the same for the same content
const URL_NAMESPACE = Buffer.from('6ba7b8119dad11d180b400c04fd430c8', 'hex');

/** A version 5 (SHA-1, name-based) UUID of `name` in the URL namespace (RFC 4122, 4.3). */
export function uuidV5(name: string): string {
  const b = createHash('sha1').update(URL_NAMESPACE).update(name, 'utf8').digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
