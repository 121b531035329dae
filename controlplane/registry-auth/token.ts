// The bearer tokens the registry accepts: JWTs signed ES256 by the token
// service's key, whose certificate travels in the x5c header and is the
// registry's rootcertbundle (docker/distribution's token auth).
import { createPrivateKey, randomBytes, sign, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Access } from './grants.ts';

export type Signer = { key: KeyObject; certificate: X509Certificate; issuer: string; service: string };

export function loadSigner(keyFile: string, certFile: string, issuer: string, service: string): Signer {
  return { key: createPrivateKey(readFileSync(keyFile)), certificate: new X509Certificate(readFileSync(certFile)), issuer, service };
}

const b64url = (b: Buffer | string): string => Buffer.from(b).toString('base64url');

export function issueToken(s: Signer, subject: string, access: Access[], ttlSeconds: number, now = new Date()): string {
  const iat = Math.floor(now.getTime() / 1000);
  const header = { typ: 'JWT', alg: 'ES256', x5c: [s.certificate.raw.toString('base64')] };
  const claims = { iss: s.issuer, sub: subject, aud: s.service, iat, nbf: iat - 10, exp: iat + ttlSeconds, jti: randomBytes(16).toString('hex'), access };
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  const signature = sign('sha256', Buffer.from(input), { key: s.key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${b64url(signature)}`;
}
