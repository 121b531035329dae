// lib/gen/ is generated from proto/ by buf + protoc-gen-es.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

export async function outputs(): Promise<Record<string, string>> {
  const out = mkdtempSync(join(tmpdir(), 'rlmesh-proto-'));
  try {
    const bin = join(root, 'node_modules/.bin');
    execFileSync(join(bin, 'buf'), ['generate', '--output', out], {
      cwd: root,
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const files: Record<string, string> = {};
    for (const f of walk(out)) files[relative(out, f)] = readFileSync(f, 'utf8');
    return files;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
