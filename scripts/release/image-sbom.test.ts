import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeImage } from '../image/oci-layout.ts';
import { sbomPath } from '../image/sbom.ts';
import { tempDir } from '../../test/support/temp.ts';
import { extractImageSbom } from './image-sbom.ts';

const config = { User: '65532', Entrypoint: ['/x'], Env: [], WorkingDir: '/', Labels: {} };

async function image(files: Record<string, string>[]): Promise<{ layout: string; digest: string; out: string }> {
  const work = tempDir('rlmesh-image-sbom-');
  const layers = files.map((f, i) => {
    const dir = join(work, `layer${i}`);
    mkdirSync(dir, { recursive: true });
    for (const [path, content] of Object.entries(f)) {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), content);
    }
    return { dir, createdBy: `layer ${i}` };
  });
  const built = await writeImage({ layout: join(work, 'layout'), tag: 't', layers, config, created: new Date(0) });
  return { layout: built.layout, digest: built.digest, out: join(work, 'out.json') };
}

describe('the SBOM an image carries', () => {
  it('is read back from the layer that holds it; a later layer overrides an earlier one', async () => {
    const i = await image([{ [sbomPath('x')]: '{"old":true}' }, { 'etc/other': 'x' }, { [sbomPath('x')]: '{"new":true}' }]);
    expect(readFileSync(extractImageSbom(i.layout, i.digest, 'x', i.out), 'utf8')).toBe('{"new":true}');
  });

  it('missing, stops the release naming the image and the path', async () => {
    const i = await image([{ 'etc/other': 'x' }]);
    expect(() => extractImageSbom(i.layout, i.digest, 'x', i.out)).toThrow(`has no /${sbomPath('x')} in any layer`);
  });
});
