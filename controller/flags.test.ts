import { describe, expect, it } from 'vitest';
import { parseControllerFlags } from './flags.ts';

describe('parseControllerFlags', () => {
  it('gives every default and converts numbers', () => {
    const f = parseControllerFlags(['--role=all', '--max-concurrent=3']);
    expect(f).toMatchObject({ role: 'all', 'lease-duration-seconds': 15, 'gc-after-seconds': 3600, concurrency: 16, 'max-concurrent': 3, 'cache-dir': '/var/lib/rlmesh/cache' });
    expect(f['node-name']).toBeUndefined();
  });

  it('refuses a bad flag at start, whichever role would use it, naming flag, value and rule', () => {
    // --gc-after-seconds is used only once a standby leads: it is still checked now
    expect(() => parseControllerFlags(['--role=cache-filler', '--gc-after-seconds=soon'])).toThrow(
      /^bad controller flags: --gc-after-seconds "soon": .*\. Fix them in the Deployment's args \(or see --help\)\.$/,
    );
    expect(() => parseControllerFlags(['--role=leader'])).toThrow(/--role "leader": .*reconciler.*cache-filler.*all/);
    expect(() => parseControllerFlags(['--concurrency=0', '--max-concurrent=-1'])).toThrow(/--max-concurrent "-1": Too small: expected number to be >=1; --concurrency "0": Too small/);
    expect(() => parseControllerFlags(['--max-concurrent='])).toThrow(/--max-concurrent "": /);
  });

  it('refuses a flag it does not know', () => {
    expect(() => parseControllerFlags(['--gc-after=5'])).toThrow(/Unknown option '--gc-after'/);
  });
});
