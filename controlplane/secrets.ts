// Shapes of the values the control plane hands out, and how it remembers them:
// only a SHA-256 hash of a token or credential is ever stored; what it must
// deliver later (an assignment's S3 secret keys) is sealed with a key kept
// outside the database.
import { createCipheriv, createDecipheriv, createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { errorMessage } from '../lib/error-fields.ts';
import { CREDENTIAL_PREFIX } from '../lib/credential-secret.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 40; // ~238 bits

export const PREFIX = {
  joinToken: 'rlm_jt_',
  ...CREDENTIAL_PREFIX,
  admin: 'rlm_admin_',
} as const;

export function randomBase62(length = RANDOM_LENGTH): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

export function mint(prefix: string): string {
  return prefix + randomBase62();
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** A join token as the install command shows it: `rlm_jt_` and 32 or more base62 characters. */
export function looksLikeJoinToken(value: string): boolean {
  return /^rlm_jt_[0-9A-Za-z]{32,}$/.test(value);
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(sha256Hex(a), 'hex');
  const y = Buffer.from(sha256Hex(b), 'hex');
  return timingSafeEqual(x, y);
}

/**
 * Values the control plane must hand out later and so cannot hash, such as the
 * S3 secret keys of an assignment waiting for its cluster: sealed with
 * AES-256-GCM under a key kept in its own file (mode 0600), never in the
 * database. A copy of the database alone reveals none of them. (A hosted
 * control plane keeps this key in its KMS; the reference keeps a file.)
 */
export class Sealer {
  private readonly key: Buffer;
  private constructor(key: Buffer) {
    this.key = key;
  }

  /** Reads the key from `file`, creating it (32 random bytes, base64, mode 0600) on first use. */
  static fromFile(file: string): Sealer {
    try {
      writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`cannot create the sealing key ${file}: ${errorMessage(err)}`);
    }
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`the sealing key ${file} is not 32 base64-encoded bytes; restore it from a backup (without it the sealed S3 keys of undelivered evaluations are lost) or remove it to start a new one`);
    return new Sealer(key);
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return `v1:${Buffer.concat([iv, c.getAuthTag(), body]).toString('base64')}`;
  }

  open(sealed: string): string {
    const raw = Buffer.from(sealed.replace(/^v1:/, ''), 'base64');
    const d = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    d.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
  }
}
