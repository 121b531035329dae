// The image's single entrypoint: `rlmesh-runtime <agent|controller|egress|controlplane|cli|gpu-discovery> [flags]`.
const components = {
  agent: '../agent/main.ts',
  controller: '../controller/main.ts',
  egress: '../egress/main.ts',
  controlplane: '../controlplane/main.ts',
  cli: '../cli/main.ts',
  'gpu-discovery': '../gpu-discovery/main.ts',
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
process.argv = [process.argv[0]!, components[name as keyof typeof components], ...rest];
const loaded: unknown = await import(components[name as keyof typeof components]);
// cli/main.ts runs by itself only as the main module (its tests import it): run it here
if (name === 'cli') {
  const { run } = loaded as typeof import('../cli/main.ts');
  process.exitCode = await run(rest, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
}
