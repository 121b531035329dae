import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AllowList, parseAuthority, type Destination } from './allow-list.ts';
import { followOutputHostsFile } from './output-hosts-file.ts';
import { tempDir } from '../test/support/temp.ts';

const rule = (list: AllowList, authority: string) => list.check(parseAuthority(authority) as Destination)?.rule ?? 'allowed';

describe("the platform's output hosts file", () => {
  it('adds exact names to the allow-list as the file changes; missing means none; a line that is no exact public name is skipped', async () => {
    const file = join(tempDir('output-hosts-'), 'hosts');
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const list = new AllowList({ entries: ['api.rlmesh.dev'], ports: [443] });
    const stop = await followOutputHostsFile({ path: file, log, intervalMs: 20, onChange: (hosts) => list.setPlatformHosts(hosts) });
    try {
      expect(lines[0]).toMatchObject({ msg: expect.stringMatching(/output hosts file .* is missing: ConfigMap rlmesh-output-hosts holds none yet/) });
      expect(rule(list, 'outputs.rlmesh.dev:443')).toBe('not-allowed');

      writeFileSync(file, 'outputs.rlmesh.dev\n*.rlmesh.dev\n10.0.0.1\n');
      await expect.poll(() => rule(list, 'outputs.rlmesh.dev:443')).toBe('allowed');
      expect(rule(list, 'OUTPUTS.rlmesh.dev.:443')).toBe('allowed');
      expect(rule(list, 'x.outputs.rlmesh.dev:443')).toBe('not-allowed'); // exact names only
      expect(rule(list, 'other.rlmesh.dev:443')).toBe('not-allowed'); // the wildcard line is skipped
      expect(rule(list, 'outputs.rlmesh.dev:80')).toBe('port-not-allowed'); // the ports still hold
      expect(rule(list, 'api.rlmesh.dev:443')).toBe('allowed'); // the chart's own list stays
      expect(lines.find((l) => String(l.msg).startsWith('skipped lines'))).toMatchObject({ refused: [{ host: '*.rlmesh.dev' }, { host: '10.0.0.1' }] });

      writeFileSync(file, 'checkpoints.rlmesh.dev\n');
      await expect.poll(() => rule(list, 'checkpoints.rlmesh.dev:443')).toBe('allowed');
      expect(rule(list, 'outputs.rlmesh.dev:443')).toBe('not-allowed'); // replaced, not added to

      rmSync(file);
      await expect.poll(() => rule(list, 'checkpoints.rlmesh.dev:443')).toBe('not-allowed');
      expect(rule(list, 'api.rlmesh.dev:443')).toBe('allowed');
    } finally {
      stop();
    }
  });
});
