// GitOps: no join token; the Secrets come from `rlmesh clusters join --format
// k8s-secret`. Until they exist (or while malformed) the agent says which
// Secret and key, stays up and not ready, and connects as soon as they are
// right — no restart. A new value written into the control Secret is followed
// without a restart too.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kubectl } from '../support/cluster.ts';
import { ROOT } from '../support/runtime.ts';
import { until } from '../support/until.ts';
import { cluster, decode, newCluster, runtimeConfig, RUNS, secret, SYSTEM } from './harness.ts';
import { agentSuite } from './suite.ts';
import { tempDir } from '../support/temp.ts';

describe('agent with Secrets delivered out of band (GitOps)', () => {
  const suite = agentSuite({ joinToken: false, controlSecret: 'rlmesh-secrets', pullSecret: 'rlmesh-registry-pull' });

  it('waits not ready naming the missing or malformed Secret, then connects with the CLI-written Secrets and follows a new value without restarting', async () => {
    const { clusterId, joinToken } = await newCluster(suite.cp, 'gitops');
    const agent = await suite.start({ configFile: runtimeConfig(suite.cp, { controlSecret: 'rlmesh-secrets', pullSecret: 'rlmesh-registry-pull' }) });
    const pid = agent.proc.pid;

    const missing = JSON.parse(await agent.waitFor('missing Secret line', /does not exist/)) as { level: number; msg: string };
    expect(missing.level).toBe(50);
    expect(missing.msg).toContain(`Secret ${SYSTEM}/rlmesh-secrets does not exist`);
    expect(missing.msg).toMatch(/rlmesh clusters join --token/);
    expect((await agent.readyz()).status).toBe(503);

    // malformed: the key "control" is missing
    kubectl(['-n', SYSTEM, 'create', 'secret', 'generic', 'rlmesh-secrets', `--from-literal=cluster-id=${clusterId}`]);
    const malformed = JSON.parse(await agent.waitFor('malformed Secret line', /has no key \\"control\\"/)) as { msg: string };
    expect(malformed.msg).toContain(`Secret ${SYSTEM}/rlmesh-secrets has no key "control"`);
    const ready = await agent.readyz();
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(/has no key "control"/);
    kubectl(['-n', SYSTEM, 'delete', 'secret', 'rlmesh-secrets']);

    // the CLI claims the token and writes the Secrets; applying them is all it takes
    const out = join(tempDir('gitops-'), 'rlmesh-secrets.yaml');
    const cli = spawnSync(
      join(ROOT, 'node_modules/.bin/node'),
      [join(ROOT, 'cli/main.ts'), 'clusters', 'join', '--token', joinToken, '--format', 'k8s-secret', '--out', out, '--api', suite.cp.url, '--ca-file', suite.cp.caFile, '--namespace', SYSTEM, '--runs-namespace', RUNS],
      { encoding: 'utf8' },
    );
    expect(cli.status, cli.stderr).toBe(0);
    kubectl(['apply', '-f', out]);
    await agent.waitFor('session connected', /session connected/, { timeoutMs: 60_000 });
    expect(agent.proc.pid).toBe(pid);
    expect(agent.proc.exitCode).toBeNull();
    await until('ready', async () => ((await agent.readyz()).status === 200 ? true : undefined), { timeoutMs: 15_000 });
    expect((await cluster(suite.cp, clusterId)).status).toBe('Connected');
    // the agent did not crash-loop, and never printed a stack trace
    expect(agent.log()).not.toMatch(/\n\s+at /);

    // a new value in the control Secret: the session re-authenticates with it, no restart
    const good = decode(secret(SYSTEM, 'rlmesh-secrets'), 'control')!;
    kubectl(['-n', SYSTEM, 'patch', 'secret', 'rlmesh-secrets', '-p', JSON.stringify({ stringData: { control: `rlm_cc_${'Z'.repeat(40)}` } })]);
    const refused = JSON.parse(await agent.waitFor('refused credential line', /refused the control credential/, { timeoutMs: 30_000 })) as { msg: string; cause: string };
    expect(refused.cause).toBe('unknown');
    expect(refused.msg).toMatch(/control credential unknown/);
    await until('not ready while refused', async () => ((await agent.readyz()).status === 503 ? true : undefined), { timeoutMs: 15_000 });
    kubectl(['-n', SYSTEM, 'patch', 'secret', 'rlmesh-secrets', '-p', JSON.stringify({ stringData: { control: good } })]);
    await until('reconnected with the restored value', () => (agent.lines().filter((l) => l.msg === 'session connected').length >= 2 ? true : undefined), { timeoutMs: 30_000 });
    await until('ready again', async () => ((await agent.readyz()).status === 200 ? true : undefined), { timeoutMs: 15_000 });
    expect(agent.proc.pid).toBe(pid);
    expect(agent.log()).not.toMatch(/rlm_cc_[0-9A-Za-z]{8}/);
  });
});
