// No container engine runs here, so this replays the Dockerfile's own steps
// (WORKDIR, COPY, COPY --from, RUN, ENV) in temporary folders, one per stage,
// then starts every entrypoint of the final stage with --help.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
type Stage = { name: string; dir: string; workdir: string; env: Record<string, string>; entrypoint: string[] };

export function replayDockerfile(): Stage {
  const lines = readFileSync(join(root, 'Dockerfile'), 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: Stage[] = [];
  let stage: Stage | undefined;
  const inStage = (p: string) => join(stage!.dir, p.startsWith('/') ? p : join(stage!.workdir, p));
  for (const line of lines) {
    const [op, ...words] = line.split(/\s+/);
    const rest = line.slice(op!.length).trim();
    switch (op) {
      case 'ARG':
        break;
      case 'FROM': {
        const name = words[2] ?? `stage${stages.length}`;
        stage = { name, dir: mkdtempSync(join(tmpdir(), `image-${name}-`)), workdir: '/', env: {}, entrypoint: [] };
        stages.push(stage);
        break;
      }
      case 'WORKDIR':
        stage!.workdir = rest;
        mkdirSync(inStage('.'), { recursive: true });
        break;
      case 'ENV':
        for (const pair of words) {
          const eq = pair.indexOf('=');
          stage!.env[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        break;
      case 'COPY': {
        const from = words[0]!.startsWith('--from=') ? stages.find((s) => s.name === words[0]!.slice(7)) : undefined;
        const args = from ? words.slice(1) : words;
        const dest = args.pop()!;
        for (const src of args) {
          const srcPath = from ? join(from.dir, src) : join(root, src);
          if (!existsSync(srcPath)) throw new Error(`Dockerfile COPY ${src}: ${srcPath} does not exist`);
          const target = dest.endsWith('/') ? join(inStage(dest), src.split('/').pop()!) : inStage(dest);
          cpSync(srcPath, target, { recursive: true });
        }
        break;
      }
      case 'RUN':
        execFileSync('sh', ['-c', rest], {
          cwd: inStage('.'),
          stdio: 'inherit',
          env: { ...process.env, ...stage!.env, PATH: `${join(root, 'node_modules/.bin')}:${process.env.PATH}` },
        });
        break;
      case 'USER':
        break;
      case 'ENTRYPOINT':
        stage!.entrypoint = (JSON.parse(rest) as string[]).map((a) => (a.startsWith('/app/') ? join(stage!.dir, a) : a));
        break;
      default:
        throw new Error(`test/image/check.ts does not know Dockerfile instruction ${op}; teach it before using it`);
    }
  }
  return stage!;
}

export function runEntrypoint(image: Stage, args: string[]): { status: number; out: string } {
  const [cmd, ...base] = image.entrypoint;
  const bin = cmd === 'node' ? join(root, 'node_modules/.bin/node') : cmd!;
  // paths under /app are the replayed stage's folder
  const env = Object.fromEntries(Object.entries(image.env).map(([k, v]) => [k, v.startsWith('/app/') ? join(image.dir, v) : v]));
  const r = spawnSync(bin, [...base, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH, ...env }, timeout: 30_000 });
  return { status: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const image = replayDockerfile();
  let failed = 0;
  for (const c of ['agent', 'controller', 'egress', 'controlplane', 'cli', 'gpu-discovery']) {
    const r = runEntrypoint(image, [c, '--help']);
    console.log(`${r.status === 0 ? 'ok  ' : 'FAIL'} rlmesh-runtime ${c} --help${r.status === 0 ? '' : `\n${r.out}`}`);
    if (r.status !== 0) failed++;
  }
  if (existsSync(join(image.dir, 'app/node_modules/vitest'))) {
    console.log('FAIL the final stage carries dev dependencies (vitest)');
    failed++;
  }
  process.exit(failed ? 1 : 0);
}
