// The release's signing (cosign.ts, image-sbom.ts, provenance.ts) against a
// registry of the test's own on 127.0.0.1 (Debian's docker-registry, Basic
// auth, plain HTTP), checked with the verification the integration test runs
// on the real release (test/support/signatures.ts): a small image with an SBOM
// inside, a chart and a file are signed, attested and then verified, and the
// tampered copies and another key are refused. cosign comes from
// test/support/build-cosign.sh (cached; test/install-deps.sh builds it).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeImage } from '../image/oci-layout.ts';
import { cycloneDx, sbomPath, writeBom } from '../image/sbom.ts';
import { startPrivateRegistry, type PrivateRegistry } from '../../test/support/private-registry.ts';
import { cosignBinary, otherKeyPair, pushTamperedImage, tamperedBlob, verifyAttestation, verifyBlob, verifySignature, type Verifier } from '../../test/support/signatures.ts';
import { tempDir } from '../../test/support/temp.ts';
import { Signer, type RegistryAccess } from './cosign.ts';
import { extractImageSbom } from './image-sbom.ts';
import { provenance, PROVENANCE_TYPE } from './provenance.ts';
import { findTool } from './tools.ts';
import { pushedChartDigest } from './release.ts';

let registry: PrivateRegistry;
let access: RegistryAccess;
let cosign: string;
let keys: { key: string; publicKey: string; password: string };
let signer: Signer;
let verifier: Verifier;
let image: string;
let chart: string;
let blob: { file: string; bundle: string };

beforeAll(async () => {
  cosign = cosignBinary();
  keys = otherKeyPair(cosign);
  registry = await startPrivateRegistry('127.0.0.1');
  const work = tempDir('rlmesh-cosign-test-');
  const authFile = join(work, 'auth.json');
  writeFileSync(authFile, JSON.stringify({ auths: { [registry.address]: { auth: Buffer.from(`${registry.creds.username}:${registry.creds.password}`).toString('base64') } } }), { mode: 0o600 });
  access = { plainHttp: true, authFile };
  process.env.PATH = `${join(cosign, '..')}:${process.env.PATH}`;
  signer = new Signer(keys.key, access, { COSIGN_PASSWORD: keys.password });
  verifier = { cosign, publicKey: keys.publicKey, access };

  // an image holding an SBOM where the release's images hold theirs
  const root = join(work, 'rootfs');
  writeBom(root, sbomPath('tiny'), cycloneDx({ type: 'container', name: 'tiny', version: '1.0.0' }, [{ type: 'library', name: 'left-pad', version: '1.3.0', purl: 'pkg:npm/left-pad@1.3.0' }]));
  const built = await writeImage({
    layout: join(work, 'layout'),
    tag: '1.0.0',
    layers: [{ dir: root, createdBy: 'the SBOM' }],
    config: { User: '65532', Entrypoint: ['/nothing'], Env: [], WorkingDir: '/', Labels: { 'org.opencontainers.image.revision': 'test' } },
    created: new Date(0),
  });
  registry.push(built, 'rlmesh/tiny');
  image = `${registry.address}/rlmesh/tiny@${built.digest}`;
  signer.sign(image);
  signer.attest(image, 'cyclonedx', extractImageSbom(built.layout, built.digest, 'tiny', join(work, 'tiny.cdx.json')));
  const predicate = join(work, 'provenance.json');
  writeFileSync(predicate, JSON.stringify(provenance({ image: 'tiny', command: 'node scripts/release/release.ts --test', revision: 'abc123-dirty' })));
  signer.attest(image, PROVENANCE_TYPE, predicate);

  // a chart, pushed by helm as the release pushes its charts
  const src = join(work, 'chart');
  mkdirSync(join(src, 'templates'), { recursive: true });
  writeFileSync(join(src, 'Chart.yaml'), 'apiVersion: v2\nname: tiny-chart\nversion: 1.0.0\n');
  const helm = findTool('helm');
  execFileSync(helm, ['package', src, '-d', work], { stdio: ['ignore', 'pipe', 'pipe'] });
  // helm push reports the digest on stderr
  const pushed = spawnSync(helm, ['push', join(work, 'tiny-chart-1.0.0.tgz'), `oci://${registry.address}/rlmesh/charts`, '--plain-http', '--registry-config', authFile], { encoding: 'utf8' });
  expect(pushed.status, pushed.stderr).toBe(0);
  chart = `${registry.address}/rlmesh/charts/tiny-chart@${pushedChartDigest(`${pushed.stdout}\n${pushed.stderr}`, 'tiny-chart')}`;
  signer.sign(chart);

  const file = join(work, 'artifact.bin');
  writeFileSync(file, 'the CLI, say\n'.repeat(1000));
  blob = { file, bundle: signer.signBlob(file) };
}, 600_000);

afterAll(async () => {
  await registry?.stop();
});

describe('signatures the release makes', () => {
  it('verify with the public key it prints, by digest, for an image and a chart', () => {
    expect(readFileSync(keys.publicKey, 'utf8')).toBe(signer.publicKey());
    for (const ref of [image, chart]) {
      const r = verifySignature(verifier, ref);
      expect(r.stderr, ref).toContain('The signatures were verified against the specified public key');
      expect(r.status, r.stderr).toBe(0);
    }
  }, 60_000);

  it('attach the SBOM the image carries as a CycloneDX attestation', () => {
    const r = verifyAttestation(verifier, image, 'cyclonedx');
    expect(r.status, r.stderr).toBe(0);
    expect(r.statements.map((s) => s.predicateType)).toEqual(['https://cyclonedx.org/bom']);
    expect(JSON.stringify(r.statements[0]!.predicate)).toContain('pkg:npm/left-pad@1.3.0');
    expect(r.statements[0]!.subject[0]!.digest['sha256']).toBe(image.split('@sha256:')[1]);
  }, 60_000);

  it('attach SLSA provenance naming the commit and the pinned inputs', () => {
    const r = verifyAttestation(verifier, image, PROVENANCE_TYPE);
    expect(r.status, r.stderr).toBe(0);
    expect(r.statements.map((s) => s.predicateType)).toEqual(['https://slsa.dev/provenance/v1']);
    const p = r.statements[0]!.predicate as ReturnType<typeof provenance>;
    expect(p.buildDefinition.resolvedDependencies[0]).toEqual({ name: 'source', digest: { gitCommit: 'abc123' } });
    expect(p.buildDefinition.externalParameters.revision).toBe('abc123-dirty');
    expect(p.buildDefinition.resolvedDependencies.map((d) => d.name)).toContain('package-lock.json');
  }, 60_000);

  it('sign a file into a bundle that verify-blob accepts', () => {
    const r = verifyBlob(verifier, blob.file, blob.bundle);
    expect(r.status, r.stderr).toBe(0);
  }, 60_000);
});

describe('verification refuses', () => {
  it('a copy of the image with one label changed, pushed to the same repository', () => {
    const tampered = pushTamperedImage(image, 'tampered', access);
    expect(tampered).not.toBe(image);
    const r = verifySignature(verifier, tampered);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/no signatures found|no matching signatures/);
    expect(verifyAttestation(verifier, tampered, 'cyclonedx').status).not.toBe(0);
  }, 120_000);

  it('a file with one byte changed', () => {
    const r = verifyBlob(verifier, tamperedBlob(blob.file), blob.bundle);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/invalid signature|verification failed|failed to verify/i);
  }, 60_000);

  it('another key', () => {
    const other = { ...verifier, publicKey: otherKeyPair(cosign).publicKey };
    for (const ref of [image, chart]) expect(verifySignature(other, ref).status, ref).not.toBe(0);
    expect(verifyAttestation(other, image, PROVENANCE_TYPE).status).not.toBe(0);
    expect(verifyBlob(other, blob.file, blob.bundle).status).not.toBe(0);
  }, 60_000);
});

describe('the signing key', () => {
  it('needs COSIGN_PASSWORD, and says so', () => {
    expect(() => new Signer(keys.key, access, {})).toThrow(/COSIGN_PASSWORD is not set; cosign reads the key's password from that variable/);
  });

  it('refuses a wrong password without printing it', () => {
    let message = '';
    try {
      new Signer(keys.key, access, { COSIGN_PASSWORD: 'not-the-password-xyz' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(`cosign could not read the signing key ${keys.key}`);
    expect(message).not.toContain('not-the-password-xyz');
  }, 30_000);
});
