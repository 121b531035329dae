// What the release signed in the local registry, verified as a user verifies
// it (test/support/signatures.ts): every image and both charts by digest with
// the release's public key, each image's SBOM and SLSA provenance attestations,
// the CLI artifacts' bundles; and what must not verify: a tampered image copy
// pushed to the same repository, a CLI artifact with one byte changed, and
// everything checked against another key.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROVENANCE_TYPE, type Provenance } from '../../scripts/release/provenance.ts';
import { registryAuthFile } from '../support/cluster.ts';
import { releaseInfo, type Release } from '../support/release.ts';
import { cosignBinary, otherKeyPair, pushTamperedImage, tamperedBlob, verifyAttestation, verifyBlob, verifySignature, type Verifier } from '../support/signatures.ts';

let release: Release;
let verifier: Verifier;
let chartRefs: string[];

beforeAll(() => {
  release = releaseInfo();
  if (!release.signing || !release.cli.bundles) throw new Error('the test release is unsigned: test/support/release.ts always passes --signing-key; run it again');
  verifier = { cosign: cosignBinary(), publicKey: release.signing.publicKeyFile, access: { plainHttp: true, authFile: registryAuthFile() } };
  chartRefs = Object.entries(release.charts).map(([name, c]) => `${release.registry}/rlmesh/charts/${name}@${c.digest}`);
});

describe('the release', () => {
  it('writes its public key beside release.json and into it', () => {
    expect(readFileSync(release.signing!.publicKeyFile, 'utf8')).toBe(release.signing!.publicKey);
    expect(release.signing!.publicKey).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
  });

  it('signs every image and both charts, by digest', () => {
    expect(Object.keys(release.images).length).toBeGreaterThanOrEqual(3);
    expect(chartRefs).toHaveLength(2);
    for (const ref of [...Object.values(release.images).map((i) => i.ref), ...chartRefs]) {
      expect(ref).toMatch(/@sha256:[0-9a-f]{64}$/);
      const r = verifySignature(verifier, ref);
      expect(r.status, `${ref}: ${r.stderr}`).toBe(0);
    }
  });

  it('attests each image SBOM, naming the components the image carries', () => {
    for (const [name, image] of Object.entries(release.images)) {
      const r = verifyAttestation(verifier, image.ref, 'cyclonedx');
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      const carried = JSON.parse(readFileSync(image.attestations!.sbom, 'utf8')) as { components: { purl: string }[] };
      expect(carried.components.length, name).toBeGreaterThan(0);
      const attested = r.statements.find((s) => s.predicateType === 'https://cyclonedx.org/bom')!.predicate as { components: { purl: string }[] };
      expect(attested.components.map((c) => c.purl), name).toEqual(carried.components.map((c) => c.purl));
    }
  });

  it('attests each image SLSA provenance: the commit, the command, the pinned inputs', () => {
    for (const [name, image] of Object.entries(release.images)) {
      const r = verifyAttestation(verifier, image.ref, PROVENANCE_TYPE);
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      const p = r.statements.find((s) => s.predicateType === 'https://slsa.dev/provenance/v1')!.predicate as Provenance;
      expect(p.buildDefinition.externalParameters.revision).toBe(release.revision);
      expect(p.buildDefinition.resolvedDependencies[0]!.digest['gitCommit']).toBe(release.revision.replace(/-dirty$/, ''));
      expect(p.buildDefinition.externalParameters.command).toContain('scripts/release/release.ts');
      const names = p.buildDefinition.resolvedDependencies.map((d) => d.name);
      expect(names).toEqual(expect.arrayContaining(['package-lock.json', 'test/cluster/go/kubernetes/go.sum', expect.stringMatching(/^node-v.*\/bin\/node$/), expect.stringMatching(/^libc6_.*\.deb$/)]));
    }
  });

  it('signs the CLI npm package and executable into bundles verify-blob accepts', () => {
    for (const [artifact, bundle] of [
      [release.cli.npmPackage, release.cli.bundles!.npmPackage],
      [release.cli.executable, release.cli.bundles!.executable],
    ] as const) {
      const r = verifyBlob(verifier, artifact, bundle);
      expect(r.status, `${artifact}: ${r.stderr}`).toBe(0);
    }
  });
});

describe('verification refuses', () => {
  it('a copy of the runtime image with one label changed, pushed to its repository', () => {
    const tampered = pushTamperedImage(release.images['rlmesh-runtime']!.ref, 'tampered-signature-test', verifier.access);
    const r = verifySignature(verifier, tampered);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/no signatures found|no matching signatures/);
  });

  it('a CLI executable with one byte changed', () => {
    const r = verifyBlob(verifier, tamperedBlob(release.cli.executable), release.cli.bundles!.executable);
    expect(r.status).not.toBe(0);
  });

  it('another key', () => {
    const other = { ...verifier, publicKey: otherKeyPair(verifier.cosign).publicKey };
    expect(verifySignature(other, release.images['rlmesh-runtime']!.ref).status).not.toBe(0);
    expect(verifySignature(other, chartRefs[0]!).status).not.toBe(0);
    expect(verifyAttestation(other, release.images['rlmesh-runtime']!.ref, 'cyclonedx').status).not.toBe(0);
    expect(verifyBlob(other, release.cli.npmPackage, release.cli.bundles!.npmPackage).status).not.toBe(0);
  });
});
