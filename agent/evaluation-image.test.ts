import { describe, expect, it } from 'vitest';
import { admitImage, imageRegistry } from './evaluation-image.ts';
import { parseImageReference, referenceString } from './image-reference.ts';

const SHA = 'a'.repeat(64);
const PLATFORM = 'registry.rlmesh.dev';

describe('an image reference, read as the kubelet and container runtimes read it', () => {
  // [reference, registry compared, fully qualified form the evaluation runs]
  it.each([
    ['busybox', 'docker.io', 'docker.io/library/busybox'],
    ['busybox:1.36', 'docker.io', 'docker.io/library/busybox:1.36'],
    ['library/busybox:1.36', 'docker.io', 'docker.io/library/busybox:1.36'],
    ['someone/app', 'docker.io', 'docker.io/someone/app'],
    ['docker.io/busybox', 'docker.io', 'docker.io/library/busybox'],
    ['docker.io/library/busybox', 'docker.io', 'docker.io/library/busybox'],
    ['index.docker.io/busybox', 'docker.io', 'docker.io/library/busybox'],
    ['index.docker.io/someone/app:2', 'docker.io', 'docker.io/someone/app:2'],
    [`busybox@sha256:${SHA}`, 'docker.io', `docker.io/library/busybox@sha256:${SHA}`],
    // a single component is a Docker Hub name even when it looks like a host: the port is the tag
    ['localhost:5000', 'docker.io', 'docker.io/library/localhost:5000'],
    [`${PLATFORM}/evals/gym@sha256:${SHA}`, PLATFORM, `${PLATFORM}/evals/gym@sha256:${SHA}`],
    [`${PLATFORM}/evals/gym:1@sha256:${SHA}`, PLATFORM, `${PLATFORM}/evals/gym:1@sha256:${SHA}`],
    [`${PLATFORM}/evals/gym@sha512:${'b'.repeat(128)}`, PLATFORM, `${PLATFORM}/evals/gym@sha512:${'b'.repeat(128)}`],
    [`${PLATFORM}/a__b/c--d/e.f_g:V1_rc-2.x`, PLATFORM, `${PLATFORM}/a__b/c--d/e.f_g:V1_rc-2.x`],
    ['registry.example.com:5000/x:1', 'registry.example.com:5000', 'registry.example.com:5000/x:1'],
    ['reg:5000/x', 'reg:5000', 'reg:5000/x'],
    ['127.0.0.1:5000/team/x', '127.0.0.1:5000', '127.0.0.1:5000/team/x'],
    ['localhost/x', 'localhost', 'localhost/x'],
    ['localhost:5000/x:dev', 'localhost:5000', 'localhost:5000/x:dev'],
    ['[::1]:5000/x', '[::1]:5000', '[::1]:5000/x'],
    ['[2001:db8::1]/team/x', '[2001:db8::1]', '[2001:db8::1]/team/x'],
    // an upper-case first component is a registry host, compared in lower case and run as written
    ['MYREG/x', 'myreg', 'MYREG/x'],
    ['Evil/x:1', 'evil', 'Evil/x:1'],
    ['Registry.RLMesh.dev/evals/gym:1', PLATFORM, 'Registry.RLMesh.dev/evals/gym:1'],
    // lower case, the same component is a Docker Hub namespace
    ['myreg/x', 'docker.io', 'docker.io/myreg/x'],
  ])('%s comes from %s and runs as %s', (image, registry, qualified) => {
    expect(imageRegistry(image)).toBe(registry);
    const ref = parseImageReference(image);
    expect('problem' in ref ? ref.problem : referenceString(ref)).toBe(qualified);
    // the qualified form names the same image
    expect(imageRegistry(qualified)).toBe(registry);
    expect(parseImageReference(qualified)).toEqual(ref);
  });

  // [reference, what the refusal says is wrong]
  it.each([
    [`${PLATFORM}/Evals/gym`, 'the repository path "Evals/gym" has upper-case letters'],
    ['library/Busybox', 'the repository path "library/Busybox" has upper-case letters'],
    ['Busybox', 'the repository path "library/Busybox" has upper-case letters'],
    [`${PLATFORM}//gym`, 'the repository path "/gym" has an empty component'],
    [`${PLATFORM}/gym/`, 'the repository path "gym/" has an empty component'],
    ['/gym', 'the repository path "/gym" has an empty component'],
    [`${PLATFORM}/a_-b`, 'the repository path component "a_-b" is not'],
    [`${PLATFORM}/a..b`, 'the repository path component "a..b" is not'],
    [`${PLATFORM}/-gym`, 'the repository path component "-gym" is not'],
    ['busybox:', 'the tag "" is not'],
    ['busybox:-rc', 'the tag "-rc" is not'],
    ['busybox:1:2', 'the tag "1:2" is not'],
    [`busybox:${'t'.repeat(129)}`, 'is not 1 to 128 letters'],
    ['busybox@sha256:abc', 'the digest "sha256:abc" is not algorithm:hex'],
    ['busybox@', 'the digest "" is not algorithm:hex'],
    [`busybox@sha256:${'A'.repeat(64)}`, 'a sha256 digest is 64 lower-case hex digits'],
    [`busybox@sha256:${'a'.repeat(63)}`, 'a sha256 digest is 64 lower-case hex digits'],
    [`busybox@md5:${'a'.repeat(32)}`, 'the digest algorithm md5 is not sha256, sha384 or sha512'],
    [`busybox@constructor:${SHA}`, 'the digest algorithm constructor is not sha256'],
    [`busybox@sha256:${SHA}:1`, 'is not algorithm:hex'],
    [`@sha256:${SHA}`, 'it names no repository'],
    [`https://${PLATFORM}/evals/gym`, 'it has a URL scheme'],
    [' busybox', 'it contains whitespace'],
    [`${PLATFORM}/evals/gym:1\n`, 'it contains whitespace'],
    [`${PLATFORM}/evals gym`, 'it contains whitespace'],
    [SHA, 'it is an image ID'],
    [`${PLATFORM}/${'a'.repeat(250)}`, 'is 270 characters long, and at most 255 are allowed'],
    [`index.docker.io/${'a'.repeat(250)}`, 'is 268 characters long'],
    ['reg:port/x', 'the registry host reg:port is not a host name'],
    ['reg:/x', 'the registry host reg: is not a host name'],
    ['-reg.example/x', 'the registry host -reg.example is not a host name'],
    ['::1/x', 'the registry host ::1 is not a host name'],
    ['[::1/x', 'the registry host [::1 is not a host name'],
    ['Bad_Host/x', 'the registry host Bad_Host is not a host name'],
  ])("%j is invalid: %s", (image, problem) => {
    const ref = parseImageReference(image);
    expect('problem' in ref ? ref.problem : referenceString(ref)).toContain(problem);
    expect(imageRegistry(image)).toBeUndefined();
  });
});

describe('the registries evaluation images may come from', () => {
  const allowed = [PLATFORM, 'mirror.corp.example:5000'];

  it('runs an image from an allowed registry by its fully qualified reference', () => {
    expect(admitImage(`${PLATFORM}/evals/gym:1`, allowed)).toEqual({ image: `${PLATFORM}/evals/gym:1` });
    expect(admitImage('mirror.corp.example:5000/gym:1', allowed)).toEqual({ image: 'mirror.corp.example:5000/gym:1' });
    expect(admitImage('busybox', [PLATFORM, 'docker.io'])).toEqual({ image: 'docker.io/library/busybox' });
  });

  it('refuses a bare image ID as InvalidImageName, even with Docker Hub allowed: a runtime may resolve it to any image the node holds', () => {
    const hex = 'c0ffee'.repeat(10) + 'c0fe';
    for (const image of [`sha256:${hex}`, hex, `SHA256:${hex}`, `sha512:${hex}${hex}`]) {
      const r = admitImage(image, [PLATFORM, 'docker.io']);
      expect(r, image).toMatchObject({ reason: 'InvalidImageName' });
      expect('refusal' in r && r.refusal, image).toContain(`image ${JSON.stringify(image)} is a bare image ID, which a container runtime may resolve to whatever image the node already holds`);
    }
    // a repository pinned by digest still runs
    expect(admitImage(`${PLATFORM}/evals/gym@sha256:${hex}`, [PLATFORM])).toEqual({ image: `${PLATFORM}/evals/gym@sha256:${hex}` });
  });

  it('refuses anything outside the allowed registries, naming the value that would allow it', () => {
    expect(admitImage('busybox', allowed)).toEqual({
      reason: 'ImageNotAllowed',
      refusal:
        'image busybox is the repository docker.io/library/busybox, and this cluster runs evaluation images only from under registry.rlmesh.dev/, mirror.corp.example:5000/: ask the platform to use its registry, or, if you trust every repository under it, add the prefix docker.io/library/ to the chart value evaluations.extraRegistries',
    });
    // a look-alike host is another registry
    expect(admitImage(`${PLATFORM}.evil.example/gym`, allowed)).toMatchObject({ refusal: expect.stringMatching(/is the repository registry\.rlmesh\.dev\.evil\.example\/gym,/) });
    expect(admitImage('', allowed)).toEqual({ reason: 'InvalidImageName', refusal: 'the assignment names no image' });
    expect(admitImage('  ', allowed)).toEqual({ reason: 'InvalidImageName', refusal: 'the assignment names no image' });
  });

  it('with Docker Hub allowed, still refuses a host named by an upper-case first component', () => {
    const withHub = [PLATFORM, 'docker.io/'];
    for (const image of ['MYREG/x', 'Evil/x', 'EvIl/x:1', 'Registry/evals/gym', `X/y@sha256:${SHA}`]) {
      const registry = image.split('/')[0]!.toLowerCase();
      const repository = `${registry}/${image.split('/').slice(1).join('/').split(/[:@]/)[0]}`;
      expect(admitImage(image, withHub), image).toEqual({
        reason: 'ImageNotAllowed',
        refusal: `image ${image} is the repository ${repository} (a first component with an upper-case letter names a registry host, as container runtimes read it), and this cluster runs evaluation images only from under registry.rlmesh.dev/, docker.io/: ask the platform to use its registry, or, if you trust every repository under it, add the prefix ${repository.slice(0, repository.lastIndexOf('/') + 1)} to the chart value evaluations.extraRegistries`,
      });
    }
    expect(admitImage('evil/x', withHub)).toEqual({ image: 'docker.io/evil/x' });
  });

  it('runs an image only under a repository prefix, at a path-segment boundary', () => {
    const prefixes = [PLATFORM, 'registry.corp.example/evals/', 'mirror.corp.example:5000/team/gym/', 'index.docker.io/corp/'];
    const admitted = (image: string) => 'image' in admitImage(image, prefixes);
    // under a prefix, at any depth, with a tag or a digest
    expect(admitted('registry.corp.example/evals/gym:1')).toBe(true);
    expect(admitted(`registry.corp.example/evals/team/gym@sha256:${SHA}`)).toBe(true);
    expect(admitted('Registry.Corp.Example/evals/gym')).toBe(true);
    expect(admitted('mirror.corp.example:5000/team/gym/v2:1')).toBe(true);
    // Docker Hub under either name, its short names qualified first
    expect(admitted('corp/gym:1')).toBe(true);
    expect(admitted('docker.io/corp/gym')).toBe(true);
    expect(admitted('index.docker.io/corp/gym')).toBe(true);
    expect(admitted('busybox')).toBe(false);
    expect(admitted('docker.io/corpx/gym')).toBe(false);
    // not a sibling that shares the letters, nor the repository named like the prefix itself, nor another port or host
    expect(admitted('registry.corp.example/evals-evil/gym:1')).toBe(false);
    expect(admitted('registry.corp.example/evalsx/gym')).toBe(false);
    expect(admitted('registry.corp.example/evals:1')).toBe(false);
    expect(admitted('registry.corp.example/other/gym:1')).toBe(false);
    expect(admitted('registry.corp.example:443/evals/gym')).toBe(false);
    expect(admitted('registry.corp.example.evil.example/evals/gym')).toBe(false);
    expect(admitted('mirror.corp.example/team/gym/v2')).toBe(false);
    expect(admitted('mirror.corp.example:5000/team/gymx:1')).toBe(false);
    // an upper-case path is no way around a prefix: the reference is invalid
    expect(admitImage('registry.corp.example/Evals/gym', prefixes)).toMatchObject({ reason: 'InvalidImageName' });
    expect(admitImage('registry.corp.example/evals-evil/gym:1', prefixes)).toMatchObject({
      reason: 'ImageNotAllowed',
      refusal: expect.stringContaining('add the prefix registry.corp.example/evals-evil/ to the chart value evaluations.extraRegistries'),
    });
  });

  it('refuses a reference the kubelet would refuse, even under an allowed registry, saying what is wrong', () => {
    expect(admitImage(`${PLATFORM}/Evals/gym:1`, allowed)).toEqual({
      reason: 'InvalidImageName',
      refusal:
        'image "registry.rlmesh.dev/Evals/gym:1" is not a valid image reference: the repository path "Evals/gym" has upper-case letters, and repository paths are lower-case. The kubelet would refuse it too (InvalidImageName), so no evaluation was created: ask the platform to send a reference such as registry.example.com/team/env:1.0 or registry.example.com/team/env@sha256:<64 hex digits>, its repository path in lower case',
    });
    expect(admitImage(`${PLATFORM}/gym:1 `, allowed)).toMatchObject({ reason: 'InvalidImageName', refusal: expect.stringContaining('image "registry.rlmesh.dev/gym:1 " is not a valid image reference: it contains whitespace.') });
    expect(admitImage(`https://${PLATFORM}/gym`, allowed)).toMatchObject({ reason: 'InvalidImageName' });
    const huge = admitImage(`${PLATFORM}/${'a'.repeat(100_000)}`, allowed);
    expect(huge).toMatchObject({ reason: 'InvalidImageName' });
    expect('refusal' in huge && huge.refusal.length).toBeLessThan(1000);
  });

  it('compares hosts without case and Docker Hub under either name, keeping the port', () => {
    expect(admitImage('index.docker.io/library/busybox', ['docker.io/'])).toEqual({ image: 'docker.io/library/busybox' });
    expect(admitImage('busybox', ['index.docker.io/'])).toEqual({ image: 'docker.io/library/busybox' });
    expect(admitImage('Registry.RLMesh.dev/evals/gym:1', allowed)).toEqual({ image: 'Registry.RLMesh.dev/evals/gym:1' });
    expect(admitImage('MYREG/x', ['myreg/'])).toEqual({ image: 'MYREG/x' });
    expect(admitImage('mirror.corp.example/gym:1', allowed)).toMatchObject({ reason: 'ImageNotAllowed', refusal: expect.stringContaining('is the repository mirror.corp.example/gym,') });
    expect(admitImage('mirror.corp.example:5001/gym:1', allowed)).toMatchObject({ reason: 'ImageNotAllowed' });
    expect(admitImage(`${PLATFORM}:443/gym:1`, allowed)).toMatchObject({ reason: 'ImageNotAllowed' });
  });

  it('never throws, whatever the assignment carries', () => {
    const odd = ['/', ':', '@', '//', ':/', '@/', 'a@b@c', 'a:b:c/d', '[', ']/x', '[]/x', 'é/x', 'x/é', '\u0000', 'a/b:c@', '.', './x', 'x/.', '__/x', 'a'.repeat(300), 'a.'.repeat(50_000) + ':x/y'];
    for (const image of odd) {
      const admitted = admitImage(image, allowed);
      expect('refusal' in admitted ? admitted.reason : 'admitted', image.slice(0, 20)).toMatch(/InvalidImageName|ImageNotAllowed/);
    }
  });
});
