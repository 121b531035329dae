// The SHA-256 the build checks each downloaded input of the images against
// before it uses it: the Node.js binary here (pins.json), the Debian packages
// in debian.lock (debian-lock.ts). The Go-built tools are pinned by the go.sum
// files beside the scripts that build them.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PINS_FILE = join(dirname(fileURLToPath(import.meta.url)), 'pins.json');

export type NodePin = { version: string; platform: string; sha256: string };

export function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

export function nodePin(file = PINS_FILE): NodePin {
  const pin = (JSON.parse(readFileSync(file, 'utf8')) as { node?: Partial<NodePin> }).node;
  if (!pin?.version || !pin.platform || !/^[0-9a-f]{64}$/.test(pin.sha256 ?? '')) {
    throw new Error(`${file} has no valid "node" pin: it needs { "version", "platform", "sha256" (64 hex digits) } for the Node.js binary the images and the CLI ship`);
  }
  return pin as NodePin;
}

/** Throws unless the file at `path` hashes to `expected`; the message names the input, both hashes and `remedy`. */
export function checkSha256(input: { what: string; path: string; expected: string; remedy: string }): void {
  const actual = sha256File(input.path);
  if (actual === input.expected) return;
  throw new Error(`${input.what} (${input.path}) is not the pinned file: its SHA-256 is ${actual}, the pin says ${input.expected}. ${input.remedy}`);
}
