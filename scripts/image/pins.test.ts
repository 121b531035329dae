// The hash check every pinned input of the images goes through, on temporary
// files, and the recorded Node.js pin against the binary installed here.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkSha256, nodePin, sha256File } from './pins.ts';
import { pinnedNodeBinary } from './source.ts';
import { tempDir } from '../../test/support/temp.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('checkSha256', () => {
  const dir = tempDir('rlmesh-pins-');
  const file = join(dir, 'node');
  writeFileSync(file, 'the pinned bytes');
  const pinned = sha256('the pinned bytes');

  it('accepts the file whose SHA-256 is the pin', () => {
    expect(() => checkSha256({ what: 'the Node.js binary', path: file, expected: pinned, remedy: 'Reinstall it.' })).not.toThrow();
  });

  it('refuses a file with a different hash, naming the input, both hashes and what to do', () => {
    writeFileSync(file, 'the pinned bytes, changed');
    const check = () => checkSha256({ what: 'the Node.js binary', path: file, expected: pinned, remedy: 'Reinstall it.' });
    expect(check).toThrow(`the Node.js binary (${file}) is not the pinned file: its SHA-256 is ${sha256('the pinned bytes, changed')}, the pin says ${pinned}. Reinstall it.`);
  });
});

describe('the Node.js pin', () => {
  it('is read from a pins file, and a pins file without a valid hash is refused', () => {
    const dir = tempDir('rlmesh-pins-');
    writeFileSync(join(dir, 'ok.json'), JSON.stringify({ node: { version: '24.0.0', platform: 'linux-x64', sha256: sha256('any') } }));
    expect(nodePin(join(dir, 'ok.json'))).toEqual({ version: '24.0.0', platform: 'linux-x64', sha256: sha256('any') });
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ node: { version: '24.0.0', platform: 'linux-x64', sha256: 'abc' } }));
    expect(() => nodePin(join(dir, 'bad.json'))).toThrow(/has no valid "node" pin/);
  });

  it('is the binary this checkout installed (pinnedNodeBinary checks it)', () => {
    expect(sha256File(pinnedNodeBinary())).toBe(nodePin().sha256);
  });
});
