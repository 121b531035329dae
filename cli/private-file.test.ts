import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrivateFile } from './private-file.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'private-file-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const mode = (p: string) => statSync(p).mode & 0o777;
const leftovers = (d: string) => readdirSync(d).filter((f) => f.endsWith('.tmp'));

describe('PrivateFile', () => {
  it('writes a new file with mode 0600', () => {
    const p = join(dir, 'new.yaml');
    PrivateFile.open(p).commit('secret: 1\n');
    expect(readFileSync(p, 'utf8')).toBe('secret: 1\n');
    expect(mode(p)).toBe(0o600);
  });

  it('an existing file readable by others ends with mode 0600 and the new content', () => {
    const p = join(dir, 'existing.yaml');
    writeFileSync(p, 'old\n');
    chmodSync(p, 0o644);
    PrivateFile.open(p).commit('secret: 2\n');
    expect(readFileSync(p, 'utf8')).toBe('secret: 2\n');
    expect(mode(p)).toBe(0o600);
    expect(leftovers(dir)).toEqual([]);
  });

  it('refuses a symlink (even one to a file it could write), and the file it leads to is untouched', () => {
    const elsewhere = join(dir, 'elsewhere.txt');
    writeFileSync(elsewhere, 'not yours\n');
    chmodSync(elsewhere, 0o644);
    const link = join(dir, 'link.yaml');
    symlinkSync(elsewhere, link);
    expect(() => PrivateFile.open(link)).toThrow(/refusing to write .*link\.yaml: it is a symbolic link, .*; remove it or pass another --out/);
    expect(readFileSync(elsewhere, 'utf8')).toBe('not yours\n');
    expect(mode(elsewhere)).toBe(0o644);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);

    const dangling = join(dir, 'dangling.yaml');
    symlinkSync(join(dir, 'nowhere.yaml'), dangling);
    expect(() => PrivateFile.open(dangling)).toThrow(/symbolic link/);
    expect(readdirSync(dir)).not.toContain('nowhere.yaml');
    expect(leftovers(dir)).toEqual([]);
  });

  it('refuses a target that turned into a symlink between open and commit', () => {
    const elsewhere = join(dir, 'elsewhere2.txt');
    writeFileSync(elsewhere, 'not yours\n');
    const p = join(dir, 'raced.yaml');
    const f = PrivateFile.open(p);
    symlinkSync(elsewhere, p);
    expect(() => f.commit('secret: 3\n')).toThrow(/symbolic link/);
    expect(readFileSync(elsewhere, 'utf8')).toBe('not yours\n');
    expect(leftovers(dir)).toEqual([]);
  });

  it('refuses a directory, and a directory it cannot create in', () => {
    const d = join(dir, 'a-directory');
    mkdirSync(d);
    expect(() => PrivateFile.open(d)).toThrow(/it is not a regular file/);
    expect(() => PrivateFile.open(join(dir, 'missing', 'x.yaml'))).toThrow(/cannot create a file in .*missing for .*: .*pass an --out in a directory you can write to/);
  });

  it('discard leaves nothing behind and the target as it was', () => {
    const p = join(dir, 'kept.yaml');
    writeFileSync(p, 'kept\n');
    PrivateFile.open(p).discard();
    expect(readFileSync(p, 'utf8')).toBe('kept\n');
    expect(leftovers(dir)).toEqual([]);
  });
});
