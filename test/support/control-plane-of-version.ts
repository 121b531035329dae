// The reference control plane as another release of it: this tree's control
// plane and lib/ copied with package.json's version changed, which is all a
// release changes of it. The agents it accepts follow from that version
// (lib/version-skew.ts), so the current chart's agent meets a control plane
// that is too new for it, as after the platform upgraded past its window.
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './runtime.ts';
import { tempDir } from './temp.ts';

/** controlplane/main.ts of a copy whose package.json says `version`; the copy goes with the test file's temporary folders. */
export function controlPlaneMainOfVersion(version: string): string {
  const tree = tempDir('rlmesh-cp-version-');
  for (const d of ['controlplane', 'lib']) cpSync(join(ROOT, d), join(tree, d), { recursive: true, filter: (f) => !f.endsWith('.test.ts') });
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  writeFileSync(join(tree, 'package.json'), JSON.stringify({ ...pkg, version }, null, 2));
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
  return join(tree, 'controlplane/main.ts');
}
