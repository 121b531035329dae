// The released CLI's entry point: scripts/release/cli.ts bundles it, with
// everything it imports, into the one CommonJS file that both the npm package
// and the single executable run. CommonJS has no top-level await, so this
// calls run() itself instead of relying on cli/main.ts's `import.meta.main`
// block (the bundle defines that as false).
import { run } from '../../cli/main.ts';

void run(process.argv.slice(2), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }).then((code) => {
  process.exitCode = code;
});
