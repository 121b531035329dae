// The image's single entrypoint: `rlmesh-runtime <agent|controller|egress|controlplane|cli|gpu-discovery> [flags]`.
// From source each component is its main.ts; in the image, its one bundled main.js (scripts/image/bundle.ts).
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
const components = {
  agent: `../agent/main.${ext}`,
  controller: `../controller/main.${ext}`,
  egress: `../egress/main.${ext}`,
  controlplane: `../controlplane/main.${ext}`,
  cli: `../cli/main.${ext}`,
  'gpu-discovery': `../gpu-discovery/main.${ext}`,
} as const;

const [name, ...rest] = process.argv.slice(2);
if (!name || !(name in components)) {
  const known = Object.keys(components).join(' | ');
  console.error(
    name
      ? `unknown component '${name}': this image runs ${known}; pass one of them as the first argument`
      : `usage: rlmesh-runtime <${known}> [flags]  (each accepts --help)`,
  );
  process.exit(name ? 2 : 0);
}
// The component sees its own flags as if started directly.
const target = new URL(components[name as keyof typeof components], import.meta.url);
process.argv = [process.argv[0]!, target.pathname, ...rest];
const loaded: unknown = await import(target.href);
// cli/main.ts runs by itself only as the main module (its tests import it): run it here
if (name === 'cli') {
  const { run } = loaded as typeof import('../cli/main.ts');
  process.exitCode = await run(rest, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
}
