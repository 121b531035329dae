// Regenerates every derived file from its single source of truth, or with
// --check fails (listing the files) when a committed copy has drifted.
// Each module in scripts/generators/ returns { path: content } for the files it owns.
import { readdir, readFile, writeFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');

type Generator = { outputs: () => Promise<Record<string, string>> };

const dir = join(root, 'scripts/generators');
const drifted: string[] = [];
for (const file of (await readdir(dir)).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts')).sort()) {
  const gen = (await import(join(dir, file))) as Generator;
  for (const [rel, content] of Object.entries(await gen.outputs())) {
    const abs = join(root, rel);
    const current = await readFile(abs, 'utf8').catch(() => undefined);
    if (current === content) continue;
    if (check) drifted.push(rel);
    else {
      await mkdir(dirname(abs), { recursive: true });
      await writeFile(abs, content);
      console.log(`generated ${rel}`);
    }
  }
}
if (drifted.length > 0) {
  console.error(
    `These generated files differ from their sources: ${drifted.join(', ')}.\n` +
      'They are derived from TypeScript (zod schemas, CRD types, refusal and name tables, the address registry, .proto); run `npm run generate` and commit the result.',
  );
  process.exit(1);
}
if (check) console.log('generated files match their sources');
