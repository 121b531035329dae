// What an image records about the source it was built from: the commit, its
// time (every file's mtime and the image's created date), and the version.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

export type SourceFacts = { revision: string; created: Date; version: string };

export function sourceFacts(): SourceFacts {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  let revision: string;
  let seconds: number;
  try {
    revision = git('rev-parse', 'HEAD');
    seconds = Number(git('log', '-1', '--format=%ct'));
  } catch (err) {
    throw new Error(`image: cannot read the source commit (${(err as Error).message.split('\n')[0]}); images are built from a git checkout, whose commit dates them`, { cause: err });
  }
  // a tree with uncommitted changes is not that commit: say so in the label
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  return { revision: dirty ? `${revision}-dirty` : revision, created: new Date(seconds * 1000), version };
}
