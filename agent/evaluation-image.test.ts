import { describe, expect, it } from 'vitest';
import { imageRefusal, imageRegistry } from './evaluation-image.ts';

describe('the registry of an evaluation image', () => {
  it('reads the host the way container runtimes do', () => {
    expect(imageRegistry('registry.rlmesh.dev/evals/gym@sha256:' + 'a'.repeat(64))).toBe('registry.rlmesh.dev');
    expect(imageRegistry('registry.example.com:5000/x:1')).toBe('registry.example.com:5000');
    expect(imageRegistry('localhost/x')).toBe('localhost');
    expect(imageRegistry('busybox')).toBe('docker.io');
    expect(imageRegistry('library/busybox:1.36')).toBe('docker.io');
    expect(imageRegistry('docker.io/library/busybox')).toBe('docker.io');
  });

  it('refuses anything outside the allowed registries, naming the value that would allow it', () => {
    const allowed = ['registry.rlmesh.dev', 'mirror.corp.example:5000'];
    expect(imageRefusal('registry.rlmesh.dev/evals/gym:1', allowed)).toBeUndefined();
    expect(imageRefusal('mirror.corp.example:5000/gym:1', allowed)).toBeUndefined();
    expect(imageRefusal('busybox', allowed)).toBe(
      'image busybox comes from docker.io, and this cluster runs evaluation images only from registry.rlmesh.dev, mirror.corp.example:5000: ask the platform to use its registry, or add docker.io to the chart value evaluations.extraRegistries',
    );
    // a look-alike host is another registry
    expect(imageRefusal('registry.rlmesh.dev.evil.example/gym', allowed)).toMatch(/comes from registry\.rlmesh\.dev\.evil\.example/);
    expect(imageRefusal('', allowed)).toBe('the assignment names no image');
  });
});
