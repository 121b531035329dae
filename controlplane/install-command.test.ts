// The dashboard's hidden-prompt install command, run for real in bash, zsh and
// sh (dash), all from Debian, with a fake `helm` on PATH that records its
// arguments. Two ways in:
// - on a pseudo-terminal (util-linux `script`), as a person pastes it: the token
//   is typed after the prompt shows, so the terminal would echo it back unless
//   echo is off; the pty's output must not hold it, and `stty -a` afterwards
//   must show echo on again (also after Ctrl-C at the prompt);
// - with stdin piped, as a script or CI runs it (no terminal, so no stty).
// Either way the token must reach helm as `--set joinToken=<token>`, with the
// flags appended to the command after it.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../test/support/control-plane.ts';
import { api } from '../test/support/api.ts';
import { helmCommand, installCommands } from './install-command.ts';

const SHELLS = ['bash', 'zsh', 'dash'] as const;
const PROMPT = 'rlmesh join token: ';
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

let cp: TestControlPlane;
let dir: string;
let command: string;
let token: string;
let clusterId: string;

beforeAll(async () => {
  for (const sh of [...SHELLS, 'script', 'stty']) {
    if (spawnSync('sh', ['-c', `command -v ${sh}`]).status !== 0) throw new Error(`${sh} is not installed: run test/install-deps.sh (Debian packages zsh, util-linux)`);
  }
  cp = await startTestControlPlane({ chartVersion: '1.2.3' });
  const created = await api(cp, 'POST', '/v1/clusters', { name: 'prompt' });
  command = String(created.body.installCommandPrompt);
  token = String(created.body.joinToken);
  clusterId = String(created.body.clusterId);
  dir = mkdtempSync(join(tmpdir(), 'install-prompt-'));
  // helm as the command sees it: records one argument per line
  writeFileSync(join(dir, 'helm'), '#!/bin/sh\nprintf \'%s\\n\' "$@" > "$HELM_ARGS_FILE"\n');
  chmodSync(join(dir, 'helm'), 0o755);
});
afterAll(async () => {
  await cp?.close();
  if (cp) rmSync(cp.dir, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const env = (argsFile: string) => ({ PATH: `${dir}:${process.env.PATH ?? ''}`, HELM_ARGS_FILE: argsFile, SHELL: '/bin/sh', TERM: 'dumb', HOME: dir });

/** Runs `line` with `shell -c` on a pseudo-terminal; types `keys` once the prompt shows. */
function onTerminal(shell: string, line: string, keys: string, argsFile: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn('script', ['-q', '-e', '-c', `${shell} -c ${shq(line)}`, '/dev/null'], { env: env(argsFile), stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let typed = false;
    const timer = setTimeout(() => (p.kill('SIGKILL'), reject(new Error(`${shell}: no end within 15 s; terminal output: ${JSON.stringify(out)}`))), 15_000);
    p.stdout.on('data', (b: Buffer) => {
      out += b.toString('utf8');
      if (!typed && out.includes(PROMPT)) {
        typed = true;
        p.stdin.write(keys);
      }
    });
    p.on('exit', () => {
      clearTimeout(timer);
      resolve(out.replace(/\r/g, ''));
    });
  });
}

const helmArgs = (file: string) => readFileSync(file, 'utf8').trimEnd().split('\n');
const echoOn = (stty: string) => /(^|[\s;])echo([\s;]|$)/m.test(stty) && !/(^|[\s;])-echo([\s;]|$)/m.test(stty);

describe('the hidden-prompt install command', () => {
  it('is POSIX sh with no token in it, and refuses a helm command it cannot quote', () => {
    expect(command.startsWith("sh -c '")).toBe(true);
    expect(command).not.toContain(token);
    expect(command).not.toContain('read -rsp');
    expect(command).toContain('helm install rlmesh oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime --version 1.2.3 -n rlmesh-system --create-namespace');
    expect(() => installCommands("helm install 'x'", token)).toThrow(/single quote/);
  });

  for (const shell of SHELLS) {
    it(`${shell}, on a terminal: prompts, does not echo the token, passes it and the appended flags to helm, restores echo`, async () => {
      const argsFile = join(dir, `args-tty-${shell}`);
      const out = await onTerminal(shell, `${command} --plain-http --set 'egress.extraDomains={a.example}'; echo "rc=$?"; stty -a`, `${token}\r`, argsFile);
      expect(out).toContain(PROMPT);
      expect(out).toContain('rc=0');
      expect(out, 'the token was echoed on the terminal').not.toContain(token);
      expect(echoOn(out), `echo is not back on after the command: ${out}`).toBe(true);
      const args = helmArgs(argsFile);
      expect(args.slice(0, 2)).toEqual(['install', 'rlmesh']);
      expect(args).toContain(`joinToken=${token}`);
      expect(args[args.indexOf(`joinToken=${token}`) - 1]).toBe('--set');
      expect(args.slice(-3)).toEqual(['--plain-http', '--set', 'egress.extraDomains={a.example}']);
    });

    it(`${shell}, stdin piped: passes the token to helm; an empty answer stops before helm`, () => {
      const argsFile = join(dir, `args-pipe-${shell}`);
      const r = spawnSync(shell, ['-c', `${command} --plain-http`], { input: `${token}\n`, env: env(argsFile), encoding: 'utf8', timeout: 15_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toContain(PROMPT);
      expect(r.stdout + r.stderr).not.toContain(token);
      expect(helmArgs(argsFile)).toEqual(expect.arrayContaining(['--set', `joinToken=${token}`, '--plain-http']));

      const emptyArgs = join(dir, `args-empty-${shell}`);
      const empty = spawnSync(shell, ['-c', command], { input: '\n', env: env(emptyArgs), encoding: 'utf8', timeout: 15_000 });
      expect(empty.status).toBe(1);
      expect(empty.stderr).toMatch(/no join token entered: paste the token/);
      expect(existsSync(emptyArgs)).toBe(false);
    });
  }

  // The outer shell here is bash: a non-interactive `zsh -c` or `dash -c` is itself
  // killed by the terminal's SIGINT, while the user's interactive shell is not; the
  // script that handles Ctrl-C is the same sh -c script in every shell.
  it('Ctrl-C at the prompt: helm does not run and echo is back on', async () => {
    const argsFile = join(dir, 'args-ctrl-c');
    const out = await onTerminal('bash', `${command}; echo "rc=$?"; stty -a`, '\u0003', argsFile);
    expect(out).toContain('rc=130');
    expect(echoOn(out), `echo is not back on after Ctrl-C: ${out}`).toBe(true);
    expect(existsSync(argsFile)).toBe(false);
  });
});

// helm upgrade with a --set and no reuse flag resets every value the release was
// installed with to the chart's defaults (DNS peers, storage, extra domains, CA
// bundle, observability): the New install command must carry a reuse flag.
describe('the New install command for an installed cluster', () => {
  const chart = 'oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime --version 1.2.3';

  it('keeps the release\'s values: helm upgrade --install … --reset-then-reuse-values; the first install has no reuse flag', async () => {
    const fresh = await api(cp, 'POST', `/v1/clusters/${clusterId}/install-command`);
    const newToken = String(fresh.body.joinToken);
    expect(fresh.body.installCommand).toBe(`helm upgrade --install rlmesh ${chart} -n rlmesh-system --create-namespace --reset-then-reuse-values --set joinToken=${newToken}`);
    expect(helmCommand({ chartRef: 'oci://r/c', chartVersion: '1', existing: false })).toBe('helm install rlmesh oci://r/c --version 1 -n rlmesh-system --create-namespace');
    expect(helmCommand({ chartRef: 'oci://r/c', chartVersion: '1', existing: false })).not.toMatch(/reuse-values/);
  });

  it('its hidden-prompt variant passes --reset-then-reuse-values to helm before the token and the appended flags', async () => {
    const fresh = await api(cp, 'POST', `/v1/clusters/${clusterId}/install-command`);
    const argsFile = join(dir, 'args-new-install');
    const r = spawnSync('sh', ['-c', `${String(fresh.body.installCommandPrompt)} -f values.yaml`], { input: `${String(fresh.body.joinToken)}\n`, env: env(argsFile), encoding: 'utf8', timeout: 15_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(helmArgs(argsFile)).toEqual([
      'upgrade', '--install', 'rlmesh', 'oci://registry.rlmesh.dev/rlmesh/charts/rlmesh-runtime', '--version', '1.2.3', '-n', 'rlmesh-system', '--create-namespace',
      '--reset-then-reuse-values', '--set', `joinToken=${String(fresh.body.joinToken)}`, '-f', 'values.yaml',
    ]);
  });
});
