// The go.mod and go.sum files the Go-built tools of the images are built from
// (test/cluster/build-binaries.sh, test/observability/build-prometheus.sh) pin
// the versions those scripts build by default and the images carry. Whether
// they are what the Go module proxy resolves is each script's `--go-mod check`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chartField, KUBECTL_VERSION } from './build.ts';
import { ROOT } from './source.ts';

const text = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const scriptDefault = (script: string, name: string) => new RegExp(`^${name}="\\$\\{${name}:-(v[0-9.]+)\\}"$`, 'm').exec(text(script))?.[1];
/** The version go.mod requires of `module`, in a require line or block. */
const required = (gomod: string, module: string) => new RegExp(`^(?:require)?\\s+${module.replaceAll('.', '\\.')} (v\\S+)$`, 'm').exec(gomod)?.[1];

describe('the committed Go module pins', () => {
  it('pin k8s.io/kubernetes at the version build-binaries.sh builds and the kubectl image is tagged with', () => {
    const gomod = text('test/cluster/go/kubernetes/go.mod');
    expect(required(gomod, 'k8s.io/kubernetes')).toBe(scriptDefault('test/cluster/build-binaries.sh', 'K8S_VERSION'));
    expect(required(gomod, 'k8s.io/kubernetes')).toBe(KUBECTL_VERSION);
  });

  it("pin github.com/prometheus/prometheus at the observability chart's appVersion, for prometheus and promtool", () => {
    const version = chartField('rlmesh-observability', 'appVersion');
    expect(scriptDefault('test/observability/build-prometheus.sh', 'PROMETHEUS_VERSION')).toBe(version);
    const [major, minor, patch] = version.slice(1).split('.').map(Number);
    const moduleVersion = `v0.${major}${String(minor).padStart(2, '0')}.${patch}`;
    for (const tool of ['prometheus', 'promtool']) expect(required(text(`test/observability/go/${tool}/go.mod`), 'github.com/prometheus/prometheus'), tool).toBe(moduleVersion);
  });
});
