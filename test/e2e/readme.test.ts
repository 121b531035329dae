// The README's and the chart README's shell blocks, run as a platform engineer
// copies them, against the real local cluster: each block is read from its file
// and run by bash with only its placeholders replaced (<v> and <new> by the
// released chart's version, the join token by a fresh one from the reference
// control plane), so docs and product cannot drift apart. The lab is a staging
// cell, set up around the text and never in it:
//   - `rlmesh` on PATH is the released single executable; RLMESH_API and
//     NODE_EXTRA_CA_CERTS point it at the reference control plane;
//   - `helm` is the local build, wrapped so that the chart's reference
//     (oci://registry.rlmesh.dev/…, which this machine cannot resolve) is the
//     local registry's, with --plain-http and --wait; an install also gets the
//     cell's values, as the README tells the reader to add their own;
//   - a comment line in a block is a step the reader does by other means (the
//     GitOps commit of rlmesh-secrets.yaml): the test applies the file there.
// The last test checks that every shell block of both files was run.
import { readFileSync, writeFileSync, chmodSync, mkdirSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterInfo, helm, kubectl, run } from '../support/cluster.ts';
import { api, type ControlPlane } from '../support/runtime.ts';
import { releaseInfo, releasedChart } from '../support/release.ts';
import { tempDir } from '../support/temp.ts';
import {
  CONTROL_PLANE_HOST, LAB_HOST_USERS, NS, PLUMBING, caBundleFile, cleanSlate, controlPlane, localValues, notReady, quoted, waitConnected, type Chart,
} from './harness.ts';
import { NET } from '../cluster/real-node.ts';

const ROOT = join(import.meta.dirname, '../..');
const FILES = { readme: 'README.md', chart: 'charts/rlmesh-runtime/README.md' } as const;
const PUBLISHED_CHART = 'oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime';

type Block = { file: keyof typeof FILES; line: number; text: string };

/** The ```sh blocks of a Markdown file, each with the line it starts on. */
function shellBlocks(file: keyof typeof FILES): Block[] {
  const lines = readFileSync(join(ROOT, FILES[file]), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash|shell|console)\s*$/.test(lines[i]!)) continue;
    const start = i + 1;
    while (i + 1 < lines.length && !/^```\s*$/.test(lines[i + 1]!)) i++;
    blocks.push({ file, line: start + 1, text: lines.slice(start, i + 1).join('\n') });
    i++;
  }
  return blocks;
}

const all = [...shellBlocks('readme'), ...shellBlocks('chart')];
const ran = new Set<Block>();
/** The one block of `file` that contains `marker` (the test names blocks by what they say, not by position). */
function block(file: keyof typeof FILES, marker: string): Block {
  const found = all.filter((b) => b.file === file && b.text.includes(marker));
  if (found.length !== 1) throw new Error(`${FILES[file]} has ${found.length} shell blocks containing ${JSON.stringify(marker)}; the docs test names each block by a line it holds`);
  return found[0]!;
}

let chart: Chart;
let cp: ControlPlane;
let work: string;
let env: Record<string, string>;

/** Runs a block's text (placeholders replaced) in bash from the reader's directory; `steps` run at each comment line. */
function runBlock(b: Block, o: { token?: string; atComment?: () => void } = {}): { status: number; out: string } {
  const replaced = b.text
    .replaceAll('<v>', chart.version)
    .replaceAll('<new>', chart.version)
    .replace(/<?rlm_jt_…>?/g, () => {
      if (!o.token) throw new Error(`${FILES[b.file]}:${b.line} names a join token and the test gave none`);
      return o.token;
    });
  expect(replaced, `${FILES[b.file]}:${b.line}: a placeholder the docs test does not know`).not.toMatch(/<[a-z_…-]+>|…/);
  // a comment line splits the block: what precedes runs, then the reader's own step, then the rest
  const parts = replaced.split(/\n\s*#[^\n]*\n/);
  let out = '';
  for (const [i, part] of parts.entries()) {
    if (i > 0) o.atComment?.();
    const r = run('bash', ['-euo', 'pipefail', '-c', `${prelude()}\n${part}`], { cwd: work, env });
    out += r.stdout + r.stderr;
    if (r.status !== 0) {
      ran.add(b);
      return { status: r.status, out: `${out}\nwhat was not ready:\n${notReady()}` };
    }
  }
  ran.add(b);
  return { status: 0, out };
}

/** helm as the reader runs it, with the lab's chart reference, registry plumbing and, for an install, the cell's values. */
function prelude(): string {
  const install = quoted([...localValues(cp), ...LAB_HOST_USERS, ...PLUMBING]);
  const upgrade = quoted(PLUMBING);
  return `helm() {
  local args=() a from='${PUBLISHED_CHART}' to='${chart.ref}'
  for a in "$@"; do args+=("\${a/#"$from"/$to}"); done
  case "$1" in
    install) command helm "\${args[@]}" ${install} ;;
    upgrade) command helm "\${args[@]}" ${upgrade} ;;
    *) command helm "\${args[@]}" ;;
  esac
}`;
}

const token = async (name: string) => (await api<{ clusterId: string; joinToken: string }>(cp, 'POST', '/v1/clusters', { name })).body;

beforeAll(async () => {
  cleanSlate();
  chart = releasedChart();
  cp = await controlPlane(chart);
  work = tempDir('rlmesh-readme-');
  const bin = join(work, 'bin');
  mkdirSync(bin);
  copyFileSync(releaseInfo().cli.executable, join(bin, 'rlmesh'));
  chmodSync(join(bin, 'rlmesh'), 0o755);
  env = { PATH: `${bin}:${clusterInfo().bin}:/usr/bin:/bin`, RLMESH_API: cp.url, NODE_EXTRA_CA_CERTS: caBundleFile(cp), HOME: work };
  // the reader's values file: the cell's host, its CA and addresses, as the install adds them
  writeFileSync(join(work, 'values.yaml'), [
    'controlPlane:',
    `  apiHost: ${CONTROL_PLANE_HOST}`,
    `  addresses: [${NET.hostAddress}/32, ${NET.registryAddress}/32]`,
    '  caBundle: |',
    ...readFileSync(caBundleFile(cp), 'utf8').trim().split('\n').map((l) => `    ${l}`),
    'evaluations:',
    '  hostUsers: true',
    '',
  ].join('\n'));
}, 300_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
});

describe('README.md', () => {
  it('1. Check the cluster: rlmesh preflight -f values.yaml passes on the empty cluster', () => {
    const r = runBlock(block('readme', 'rlmesh preflight -f values.yaml'));
    expect(r.status, r.out).toBe(0);
    expect(r.out).not.toMatch(/FAIL/);
    expect(r.out).toMatch(/^PASS  kubernetes-version   Kubernetes v1\.\d+/m); // the checks ran and printed what they found
  });

  it('2a. the printed install command installs, and every Verify command succeeds', async () => {
    const t = await token('readme');
    const r = runBlock(block('readme', '--set joinToken=rlm_jt_…'), { token: t.joinToken });
    expect(r.status, r.out).toBe(0);
    await waitConnected(cp, t.clusterId);
    const verify = runBlock(block('readme', 'kubectl get rlmeshcaches'));
    expect(verify.status, verify.out).toBe(0);
    expect(verify.out).toMatch(/successfully rolled out[\s\S]*successfully rolled out/);
  });
});

describe('charts/rlmesh-runtime/README.md', () => {
  it('Verify: rlmesh status and the rollout and preflight commands succeed', () => {
    const r = runBlock(block('chart', 'rlmesh status'));
    expect(r.status, r.out).toBe(0);
    expect(r.out).toMatch(/^✓ agent /m);
  });

  it('Upgrade: helm upgrade --reuse-values keeps the release working', async () => {
    const r = runBlock(block('chart', '--reuse-values'));
    expect(r.status, r.out).toBe(0);
    expect(JSON.parse(helm(['-n', NS, 'status', 'rlmesh', '-o', 'json']).stdout)).toMatchObject({ version: 2, info: { status: 'deployed' } });
  });

  it('Uninstall: helm uninstall removes the release', () => {
    const r = runBlock(block('chart', 'helm uninstall rlmesh'));
    expect(r.status, r.out).toBe(0);
    expect(helm(['-n', NS, 'status', 'rlmesh'], { allowFail: true }).status).not.toBe(0);
    cleanSlate();
  });

  it('Install: the printed command installs and the agent connects', async () => {
    const t = await token('readme-chart');
    const r = runBlock(block('chart', 'joinToken=<rlm_jt_'), { token: t.joinToken });
    expect(r.status, r.out).toBe(0);
    await waitConnected(cp, t.clusterId);
    cleanSlate();
  });

  it('Bring your own Secrets: rlmesh clusters join writes them to rlmesh-secrets.yaml', async () => {
    const r = runBlock(block('chart', 'rlmesh clusters join'), { token: (await token('readme-chart-gitops')).joinToken });
    expect(r.status, r.out).toBe(0);
    expect(readFileSync(join(work, 'rlmesh-secrets.yaml'), 'utf8')).toMatch(/name: rlmesh-secrets\n/);
  });
});

describe('README.md, GitOps', () => {
  it('2b. the join, the commit (applied here as a GitOps tool would), the install without joinToken: the agent connects', async () => {
    const t = await token('readme-gitops');
    const r = runBlock(block('readme', 'rlmesh clusters join'), { token: t.joinToken, atComment: () => kubectl(['apply', '-f', join(work, 'rlmesh-secrets.yaml')]) });
    expect(r.status, r.out).toBe(0);
    await waitConnected(cp, t.clusterId);
    expect(kubectl(['-n', NS, 'get', 'secret', 'rlmesh-join-token'], { allowFail: true }).status).not.toBe(0);
  });

  it('every shell block of both READMEs was run', () => {
    expect(all.filter((b) => !ran.has(b)).map((b) => `${FILES[b.file]}:${b.line}`)).toEqual([]);
  });
});
