// OpenShift's restricted-v2 SCC on the real node: the released chart installed with
// podSecurity.arbitraryUid=true through a helm post-renderer that does what the SCC's
// admission does (test/e2e/scc-post-renderer.ts: refuses a fixed user, injects a random
// UID of the 1000770000 range with group 0 and that UID as fsGroup), and a
// ValidatingAdmissionPolicy that refuses, as the SCC would, every pod in the release's
// namespaces whose user is outside that range: so the pods the controller creates itself
// (the NetworkPolicy probe, evaluations) are admitted only if they set no user. The
// released image's processes then run as that UID with group 0: the agent joins and
// writes its spool, the egress proxy and the controller become ready, the probe passes
// and an evaluation runs to Succeeded. Logs are logging.format=text there too.
import { readFileSync, writeFileSync, chmodSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realNodes } from '../cluster/real-node.ts';
import { kubectl, run } from '../support/cluster.ts';
import { api, ROOT, type ControlPlane } from '../support/runtime.ts';
import { template, TOKEN } from '../chart/chart.ts';
import { NS, RUNS, cleanSlate, controlPlane, evaluationImage, releasedChart, Runtime, runInstallCommand, smallEvaluation, submit, waitConnected, waitFinished, type Chart } from './harness.ts';
import { tempDir } from '../support/temp.ts';

const BASE = 1000770000;
const RANGE = 10000;
// OpenShift gives each namespace a range of its own and assigns its first UID; here both share one range, at random offsets
const UID = { [NS]: BASE + Math.floor(Math.random() * RANGE), [RUNS]: BASE + Math.floor(Math.random() * RANGE) };
const POLICY = 'rlmesh-e2e-scc-restricted-v2';

let chart: Chart;
let cp: ControlPlane;
let clusterId = '';
const rt = new Runtime();

const inRange = (f: string) => `(${f} >= ${BASE} && ${f} < ${BASE + RANGE})`;
const containersOk = (list: string) =>
  `${list}.all(c, !has(c.securityContext) || ((!has(c.securityContext.runAsUser) || ${inRange('c.securityContext.runAsUser')}) && (!has(c.securityContext.runAsGroup) || c.securityContext.runAsGroup == 0)))`;

function sccPolicy(): unknown {
  const sc = 'object.spec.securityContext';
  return {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name: POLICY },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
          validations: [
            {
              expression: `!has(${sc}) || ((!has(${sc}.runAsUser) || ${inRange(`${sc}.runAsUser`)}) && (!has(${sc}.fsGroup) || ${inRange(`${sc}.fsGroup`)}) && (!has(${sc}.runAsGroup) || ${sc}.runAsGroup == 0))`,
              message: `restricted-v2 (emulated): the pod's runAsUser and fsGroup must be in [${BASE}, ${BASE + RANGE}) and its runAsGroup 0, or unset for the SCC to assign`,
            },
            { expression: containersOk('object.spec.containers'), message: 'restricted-v2 (emulated): a container sets a user outside the range' },
            { expression: `!has(object.spec.initContainers) || ${containersOk('object.spec.initContainers')}`, message: 'restricted-v2 (emulated): an init container sets a user outside the range' },
          ],
        },
      },
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: POLICY },
        spec: {
          policyName: POLICY,
          validationActions: ['Deny'],
          matchResources: { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [NS, RUNS] }] } },
        },
      },
    ],
  };
}

/** The post-renderer as helm runs it: an executable file. */
function postRenderer(): string {
  const dir = tempDir('rlmesh-scc-');
  const path = join(dir, 'scc-post-renderer');
  writeFileSync(path, `#!/bin/sh\nexec '${join(ROOT, 'node_modules/.bin/node')}' '${join(ROOT, 'test/e2e/scc-post-renderer.ts')}' "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

type Ids = { uid: number; gid: number; groups: number[]; pid: number };

/** The real user of a pod's container process, read from /proc on the node's host. */
function processIds(ns: string, pod: string): Ids {
  const p = JSON.parse(kubectl(['-n', ns, 'get', 'pod', pod, '-o', 'json']).stdout) as { spec: { nodeName: string }; status: { containerStatuses: { containerID: string }[] } };
  const id = p.status.containerStatuses[0]!.containerID.replace(/^containerd:\/\//, '');
  const node = realNodes().find((n) => n.name === p.spec.nodeName);
  if (!node) throw new Error(`pod ${ns}/${pod} is not on a real node (${p.spec.nodeName})`);
  const tasks = run('/usr/bin/ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', 'tasks', 'ls']).stdout;
  const line = tasks.split('\n').find((l) => l.startsWith(id));
  const pid = Number(line?.trim().split(/\s+/)[1]);
  if (!pid) throw new Error(`no task ${id} of ${ns}/${pod} on ${node.name}:\n${tasks}`);
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => status.match(new RegExp(`^${name}:\\s+(.*)$`, 'm'))![1]!.trim().split(/\s+/).map(Number);
  return { uid: field('Uid')[0]!, gid: field('Gid')[0]!, groups: field('Groups').filter((n) => !Number.isNaN(n)), pid };
}

beforeAll(async () => {
  cleanSlate();
  kubectl(['apply', '-f', '-'], { input: JSON.stringify(sccPolicy()) });
  chart = releasedChart();
  cp = await controlPlane(chart);
  const created = await api<{ clusterId: string; installCommand: string }>(cp, 'POST', '/v1/clusters', { name: 'openshift' });
  clusterId = created.body.clusterId;
  const renderer = postRenderer();
  // as printed, with the OpenShift values and the SCC emulation (PLUMBING's --wait: every pod ready)
  runInstallCommand(
    cp,
    `${created.body.installCommand} --set podSecurity.arbitraryUid=true --set logging.format=text --post-renderer '${renderer}' --post-renderer-args '${NS}=${UID[NS]}' --post-renderer-args '${RUNS}=${UID[RUNS]}'`,
  );
  await waitConnected(cp, clusterId);
}, 600_000);

afterAll(async () => {
  await cp?.stop();
  cleanSlate();
  kubectl(['delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', POLICY, '--ignore-not-found'], { allowFail: true });
});

describe('OpenShift restricted-v2: the runtime under an arbitrary UID with group 0', () => {
  it('the emulated SCC refuses the chart as it renders without podSecurity.arbitraryUid (so this suite can tell)', () => {
    const manifests = template(['--set', `joinToken=${TOKEN}`]).stdout;
    const r = run(postRenderer(), [`${NS}=${UID[NS]}`, `${RUNS}=${UID[RUNS]}`], { input: manifests });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('Deployment/rlmesh-system/rlmesh-cluster-agent spec.securityContext.runAsUser=65532');
    const admitted = run(postRenderer(), [`${NS}=${UID[NS]}`, `${RUNS}=${UID[RUNS]}`], { input: template(['--set', `joinToken=${TOKEN}`, '--set', 'podSecurity.arbitraryUid=true']).stdout });
    expect(admitted.status, admitted.stderr).toBe(0);
  });

  it('agent, controller, egress proxy and cache filler are ready, each process running as its namespace\'s UID with group 0', async () => {
    for (const w of ['agent', 'controller', 'egress', 'filler'] as const) {
      await rt.ready(w);
      for (const p of rt.pods(w).filter((x) => realNodes().some((n) => n.name === x.spec.nodeName))) {
        const ns = w === 'filler' ? RUNS : NS;
        const ids = processIds(ns, p.metadata.name);
        expect({ w, uid: ids.uid, gid: ids.gid }).toEqual({ w, uid: UID[ns], gid: 0 });
        expect(ids.groups, w).toContain(UID[ns]); // fsGroup, as the SCC assigns it
        expect(p.status.containerStatuses?.[0]?.restartCount, `${w} restarted`).toBe(0);
      }
    }
  });

  it('the agent wrote its spool as that UID, and logs as text', () => {
    const agent = rt.pod('agent');
    const { pid } = processIds(NS, agent.metadata.name);
    const spool = `/proc/${pid}/root/var/lib/rlmesh/spool`;
    const files = readdirSync(spool);
    expect(files.length, `spool ${files.join(', ')}`).toBeGreaterThan(0);
    const owners = new Set(files.map((f) => statSync(join(spool, f)).uid));
    expect([...owners]).toEqual([UID[NS]]);
    const log = rt.log('agent');
    expect(log).toMatch(/^\d{4}-\d\d-\d\dT\S+Z INFO +agent: /m);
    expect(log).not.toMatch(/^\{"level"/m);
  });

  it('the pods the controller creates set no user, so the SCC admits them: the probe passes and an evaluation succeeds', async () => {
    // the emulated SCC is in force: a pod with the fixed user the runtime used to set is refused
    const fixed = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'fixed-user', namespace: RUNS }, spec: { securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } }, containers: [{ name: 'c', image: 'x', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }] } };
    const refused = kubectl(['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(fixed), allowFail: true });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain(POLICY);
    const image = await evaluationImage();
    const id = await submit(cp, clusterId, smallEvaluation(image));
    const done = await waitFinished(cp, id, 240);
    expect(done.phase, JSON.stringify(done.updates)).toBe('Succeeded');
    const events = kubectl(['-n', RUNS, 'get', 'events', '-o', 'jsonpath={range .items[*]}{.reason} {.message}{"\\n"}{end}']).stdout;
    expect(events).not.toContain(POLICY);
  });
});
