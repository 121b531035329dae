// The SBOM documents: their CycloneDX 1.5 shape, a serial number that follows
// the content, and each kind of component read from its source. What a
// scanner makes of a whole image's document: sbom.syft.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { bomSchema, cycloneDx, uuidV5, type Component } from './sbom.ts';
import { debianComponents, nodeComponent, npmComponents, parseGoBuildInfo } from './sbom-components.ts';
import { dep5Licenses } from './debian-copyright.ts';
import { pinnedNodeBinary, ROOT } from './source.ts';

const lib = (name: string, version: string): Component => ({ type: 'library', name, version, purl: `pkg:npm/${name}@${version}` });

describe('a CycloneDX 1.5 document', () => {
  it('has the fields CycloneDX 1.5 requires, one component per purl, sorted', () => {
    const bom = cycloneDx({ type: 'container', name: 'img', version: '1.0.0' }, [lib('b', '1'), lib('a', '2'), lib('b', '1')]);
    expect(bomSchema.safeParse(JSON.parse(JSON.stringify(bom))).success).toBe(true);
    expect([bom.bomFormat, bom.specVersion, bom.version]).toEqual(['CycloneDX', '1.5', 1]);
    expect(bom.components.map((c) => [c.purl, c['bom-ref']])).toEqual([
      ['pkg:npm/a@2', 'pkg:npm/a@2'],
      ['pkg:npm/b@1', 'pkg:npm/b@1'],
    ]);
    expect(JSON.stringify(bom)).not.toMatch(/timestamp|\d{4}-\d\d-\d\dT/);
  });

  it('takes its serial number from its content: the same for the same components in any order, another when one changes', () => {
    const subject = { type: 'container', name: 'img', version: '1.0.0' } as const;
    const serial = (cs: Component[]) => cycloneDx(subject, cs).serialNumber;
    expect(serial([lib('a', '1'), lib('b', '1')])).toBe(serial([lib('b', '1'), lib('a', '1')]));
    expect(serial([lib('a', '1'), lib('b', '1')])).not.toBe(serial([lib('a', '1'), lib('b', '2')]));
  });

  it('makes RFC 4122 version 5 UUIDs (the value Python\'s uuid.uuid5(NAMESPACE_URL, ...) gives)', () => {
    expect(uuidV5('https://rlmesh.dev/sbom')).toBe('2f0b87a6-9cbe-56f5-991d-67755bd3f23e');
  });

  it('refuses a component without a purl version', () => {
    expect(() => cycloneDx({ type: 'application', name: 'x', version: '1' }, [{ type: 'library', name: 'a', version: '1', purl: 'pkg:npm/a' }])).toThrow(/purl/);
  });
});

describe('Debian packages', () => {
  const dep5 = [
    'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
    'Source: http://ftp.debian.org/debian/pool/main/c/ca-certificates/',
    '',
    'Files: debian/*',
    'Copyright: 2003 Someone',
    'License: GPL-2+',
    ' This program is free software;',
    ' .',
    ' License: text inside the licence, not a field',
    '',
    'Files: mozilla/certdata.txt',
    'Copyright: Mozilla Contributors',
    'License: MPL-2.0',
    '',
    'License: GPL-2+',
    ' the text of a license named above, in a paragraph of its own',
  ].join('\n');

  it('reads the licenses of a machine-readable copyright file, and none from free text', () => {
    expect(dep5Licenses(dep5)).toEqual(['GPL-2+', 'MPL-2.0']);
    expect(dep5Licenses('This is the Debian prepackaged version of the GNU C Library.\n\nIt is under the LGPL.\n')).toBeUndefined();
  });

  it('names each package by the purl Syft gives it, its licenses by Debian\'s short names', () => {
    const osRelease = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n';
    const [c, l] = debianComponents(
      [
        { name: 'ca-certificates', version: '20250419~deb12u2', arch: 'all', licenses: ['GPL-2+', 'MPL-2.0'] },
        { name: 'libc6', version: '2.36-9+deb12u14', arch: 'amd64' },
      ],
      osRelease,
    );
    expect(c).toEqual({
      type: 'library',
      name: 'ca-certificates',
      version: '20250419~deb12u2',
      purl: 'pkg:deb/debian/ca-certificates@20250419~deb12u2?arch=all&distro=debian-12',
      licenses: [{ license: { name: 'GPL-2+' } }, { license: { name: 'MPL-2.0' } }],
    });
    expect(l).toEqual({ type: 'library', name: 'libc6', version: '2.36-9+deb12u14', purl: 'pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64&distro=debian-12' });
    expect(() => debianComponents([], 'NAME=x\n')).toThrow(/os-release has no ID or VERSION_ID/);
  });
});

describe('npm packages and the Node binary', () => {
  it('lists each package an output took code from (not one esbuild only read), with the version and license its package.json states', () => {
    const { dependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const input = { bytes: 1, imports: [] };
    const used = { bytesInOutput: 1 };
    const metafile: Metafile = {
      inputs: { 'node_modules/yaml/dist/index.js': input, 'node_modules/@aws-sdk/client-s3/dist-cjs/index.js': input, 'node_modules/jose/index.js': input, 'lib/config.ts': input },
      // esbuild read jose but no code of it went into an output
      outputs: {
        'out/a.js': { bytes: 1, imports: [], exports: [], inputs: { 'node_modules/yaml/dist/index.js': used, 'lib/config.ts': used } },
        'out/b.js': { bytes: 1, imports: [], exports: [], inputs: { 'node_modules/@aws-sdk/client-s3/dist-cjs/index.js': used } },
      },
    };
    expect(npmComponents(metafile)).toEqual(
      expect.arrayContaining([
        { type: 'library', name: 'yaml', version: dependencies['yaml'], purl: `pkg:npm/yaml@${dependencies['yaml']}`, licenses: [{ expression: 'ISC' }] },
        { type: 'library', name: '@aws-sdk/client-s3', version: dependencies['@aws-sdk/client-s3'], purl: `pkg:npm/%40aws-sdk/client-s3@${dependencies['@aws-sdk/client-s3']}`, licenses: [{ expression: 'Apache-2.0' }] },
      ]),
    );
    expect(npmComponents(metafile)).toHaveLength(2);
  });

  it('names the pinned Node binary as Syft does, with its npm package\'s license', () => {
    const { devDependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    expect(nodeComponent(pinnedNodeBinary())).toEqual({
      type: 'application',
      name: 'node',
      version: devDependencies['node'],
      purl: `pkg:generic/node@${devDependencies['node']}`,
      licenses: [{ expression: 'MIT' }],
    });
  });
});

describe('Go modules', () => {
  it('reads the standard library, the main module and each dependency (replaced where it is) from `go version -m`', () => {
    const info = [
      '/bin/kubectl: go1.26.8',
      '\tpath\tk8s.io/kubernetes/cmd/kubectl',
      '\tmod\tk8s.io/kubernetes\tv1.35.4\th1:o/8d=',
      '\tdep\tgithub.com/MakeNowJust/heredoc\tv1.0.0\th1:cX=',
      '\tdep\tk8s.io/api\tv0.35.4',
      '\t=>\tk8s.io/api\tv0.35.5\th1:P7=',
      '\tdep\texample.com/local\tv0.0.0',
      '\t=>\t./staging/local\t',
      '\tbuild\tCGO_ENABLED=0',
      '',
    ].join('\n');
    expect(parseGoBuildInfo(info).map((c) => [c.type, c.name, c.version, c.purl])).toEqual([
      ['library', 'stdlib', 'go1.26.8', 'pkg:golang/stdlib@1.26.8'],
      ['application', 'k8s.io/kubernetes', 'v1.35.4', 'pkg:golang/k8s.io/kubernetes@v1.35.4'],
      ['library', 'github.com/MakeNowJust/heredoc', 'v1.0.0', 'pkg:golang/github.com/MakeNowJust/heredoc@v1.0.0'],
      ['library', 'k8s.io/api', 'v0.35.5', 'pkg:golang/k8s.io/api@v0.35.5'],
    ]);
  });

  it('leaves out a local build\'s own module, "(devel)"', () => {
    const info = '/bin/prometheus: go1.26.8\n\tpath\trlmesh-testbin/prometheus\n\tmod\trlmesh-testbin/prometheus\t(devel)\t\n\tdep\tgithub.com/prometheus/prometheus\tv0.305.0\th1:x=\n';
    expect(parseGoBuildInfo(info).map((c) => c.name)).toEqual(['stdlib', 'github.com/prometheus/prometheus']);
  });

  it('says what it got when the output is not build info', () => {
    expect(() => parseGoBuildInfo('not a go binary')).toThrow(/printed no Go version on its first line: "not a go binary"/);
  });
});
