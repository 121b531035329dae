// Shapes of the values the control plane hands out, and how it remembers them:
// only a SHA-256 hash of a token or credential is ever stored.
import { createHash, randomInt, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 40; // ~238 bits

export const PREFIX = {
  joinToken: 'rlm_jt_',
  control: 'rlm_cc_',
  pull: 'rlm_rp_',
  relay: 'rlm_rs_',
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
