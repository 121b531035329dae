// The control plane only speaks TLS. For local runs and tests it makes its own
// CA and a server certificate signed by it (ECDSA P-256); clients trust the CA
// file (the agent's controlPlane.caBundlePath, the CLI's --ca-file).
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { errorMessage } from '../lib/error-fields.ts';

export type TlsFiles = { caFile: string; certFile: string; keyFile: string };
export type TlsMaterial = TlsFiles & { ca: string; cert: string; key: string };

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DEFAULT_HOSTS = ['localhost', '127.0.0.1', '::1'];
const DAY_MS = 86_400_000;

export function readTls(files: TlsFiles): TlsMaterial {
  const read = (f: string, what: string): string => {
    try {
      return readFileSync(f, 'utf8');
    } catch (err) {
      throw new Error(`cannot read the TLS ${what} ${f}: ${errorMessage(err)}; pass an existing PEM file, or use --generate-tls <dir> for a local CA`);
    }
  };
  return { ...files, ca: existsSync(files.caFile) ? read(files.caFile, 'CA') : '', cert: read(files.certFile, 'certificate'), key: read(files.keyFile, 'key') };
}

/**
 * Reuses the CA and certificate already in `dir` (so clients that trust the CA
 * keep working across restarts) unless the certificate is missing a host;
 * otherwise writes ca.crt, tls.crt and tls.key.
 */
export async function ensureTls(dir: string, extraHosts: string[] = []): Promise<TlsMaterial> {
  const files = { caFile: join(dir, 'ca.crt'), certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  const hosts = [...new Set([...DEFAULT_HOSTS, ...extraHosts])];
  if (existsSync(files.caFile) && existsSync(files.certFile) && existsSync(files.keyFile)) {
    const existing = readTls(files);
    if (coversHosts(existing.cert, hosts)) return existing;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { ca, cert, key } = await generate(hosts);
  writeFileSync(files.caFile, ca);
  writeFileSync(files.certFile, cert);
  writeFileSync(files.keyFile, key, { mode: 0o600 });
  return { ...files, ca, cert, key };
}

function coversHosts(certPem: string, hosts: string[]): boolean {
  const cert = new X509Certificate(certPem);
  if (Date.parse(cert.validTo) < Date.now() + DAY_MS) return false;
  return hosts.every((h) => (isIP(h) ? cert.checkIP(h) : cert.checkHost(h)) !== undefined);
}

async function generate(hosts: string[]): Promise<{ ca: string; cert: string; key: string }> {
  // loaded only to generate: it takes a third of a second to import
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  x509.cryptoProvider.set(globalThis.crypto);
  const subtle = globalThis.crypto.subtle;
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 365 * DAY_MS);
  const caKeys = await subtle.generateKey(ALG, true, ['sign', 'verify']);
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=rlmesh reference control plane CA',
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const keys = await subtle.generateKey(ALG, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${hosts[0]}`,
    issuer: caCert.subject,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(hosts.map((h) => ({ type: isIP(h) ? 'ip' : 'dns', value: h }) as const)),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  const pkcs8 = await subtle.exportKey('pkcs8', keys.privateKey);
  return { ca: caCert.toString('pem') + '\n', cert: cert.toString('pem') + '\n', key: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY') + '\n' };
}

function serial(): string {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(16));
  b[0] = b[0]! & 0x7f; // positive
  return Buffer.from(b).toString('hex');
}
