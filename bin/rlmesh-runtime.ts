// The image's single entrypoint: `rlmesh-runtime <agent|controller|egress|controlplane|cli|gpu-discovery> [flags]`.
// From source each component is its source file; in the image, its one bundle (<name>/main.js), which
// run-bundle.ts compiles with its code cache.
import { fileURLToPath } from 'node:url';
import { COMPONENT_SOURCES, COMPONENTS, type Component } from './components.ts';
import { runBundle } from './run-bundle.ts';

const [name, ...rest] = process.argv.slice(2);
if (!name || !(COMPONENTS as string[]).includes(name)) {
  const known = COMPONENTS.join(' | ');
  console.error(
    name
      ? `unknown component '${name}': this image runs ${known}; pass one of them as the first argument`
      : `usage: rlmesh-runtime <${known}> [flags]  (each accepts --help)`,
  );
  process.exit(name ? 2 : 0);
}
const fromSource = import.meta.url.endsWith('.ts');
const target = new URL(fromSource ? `../${COMPONENT_SOURCES[name as Component]}` : `../${name}/main.js`, import.meta.url);
// The component sees its own flags as if started directly.
process.argv = [process.argv[0]!, fileURLToPath(target), ...rest];
if (fromSource) await import(target.href);
else await runBundle(fileURLToPath(target));
