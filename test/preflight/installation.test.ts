// One installation per cluster, and the installing user's rights, against the
// real local cluster: a second agent Deployment, a Helm release of a chart
// named rlmesh-runtime (installed with the real helm), a control Secret in
// another namespace; SelfSubjectAccessReview for an admin and for a
// ServiceAccount without rights.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInstallRights } from '../../lib/preflight/checks/install-rights.ts';
import { checkSingleInstallation } from '../../lib/preflight/checks/single-installation.ts';
import { helm, kubectl, serviceAccountKubeconfig } from '../support/cluster.ts';
import { agentKubeConfig, apply, context, NS, setUpNamespaces, tearDownNamespaces } from './support.ts';
import { until } from '../support/until.ts';
import { tempDir } from '../support/temp.ts';

const OTHER = 'rlmesh-pf-other';
const HELM_NS = 'rlmesh-pf-helm';
const SECRET_NS = 'rlmesh-pf-secret';

beforeAll(() => {
  setUpNamespaces();
  kubectl(['create', 'namespace', OTHER], { allowFail: true });
  kubectl(['create', 'namespace', SECRET_NS], { allowFail: true });
  kubectl(['create', 'serviceaccount', 'rlmesh-pf-nobody', '-n', NS], { allowFail: true });
});

afterAll(() => {
  helm(['uninstall', 'rlmesh', '-n', HELM_NS, '--wait'], { allowFail: true });
  kubectl(['delete', 'namespace', OTHER, HELM_NS, SECRET_NS, '--wait=false', '--ignore-not-found']);
  tearDownNamespaces();
});

describe('single-installation', () => {
  it('fails on an agent Deployment in another namespace, naming it; the agent sees its pods', async () => {
    apply(`
apiVersion: apps/v1
kind: Deployment
metadata: { name: rlmesh-cluster-agent, namespace: ${OTHER}, labels: { app.kubernetes.io/name: rlmesh-cluster-agent } }
spec:
  replicas: 1
  selector: { matchLabels: { app.kubernetes.io/name: rlmesh-cluster-agent } }
  template:
    metadata: { labels: { app.kubernetes.io/name: rlmesh-cluster-agent } }
    spec: { containers: [{ name: agent, image: registry.rlmesh.dev/rlmesh/runtime:test }] }
`);
    const r = await checkSingleInstallation(context());
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain(`namespace ${OTHER} (Deployment rlmesh-cluster-agent)`);
    expect(r.fix).toMatch(/^Install into .+ instead \(helm upgrade --install there\), or remove that installation first \(helm uninstall -n .+ rlmesh\): one cluster takes one runtime installation\.$/);

    // inside the cluster the agent, with its own rights, finds the other agent's pod
    const kc = await agentKubeConfig();
    const inCluster = await until('the other agent pod', async () => {
      const res = await checkSingleInstallation(context({}, 'agent', kc));
      return res.found.includes(`namespace ${OTHER}`) ? res : undefined;
    });
    expect(inCluster.verdict).toBe('fail');
    expect(inCluster.found).toMatch(new RegExp(`namespace ${OTHER} \\(agent pod rlmesh-cluster-agent-`));
  });

  it('fails on a Helm release of chart rlmesh-runtime in another namespace', async () => {
    const chart = join(tempDir('rlmesh-pf-chart-'), 'rlmesh-runtime');
    mkdirSync(join(chart, 'templates'), { recursive: true });
    writeFileSync(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: rlmesh-runtime\nversion: 0.0.1-preflight-test\n');
    writeFileSync(join(chart, 'templates', 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: rlmesh-pf-marker }\ndata: { a: b }\n');
    helm(['install', 'rlmesh', chart, '-n', HELM_NS, '--create-namespace']);
    const r = await checkSingleInstallation(context());
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain(`namespace ${HELM_NS} (Helm release rlmesh of chart rlmesh-runtime)`);
  });

  it('fails on a control Secret of another cluster in another namespace, naming the cluster id', async () => {
    kubectl(['create', 'secret', 'generic', 'rlmesh-cluster-control', '-n', SECRET_NS, '--from-literal=cluster-id=c_pf_other', '--from-literal=control=rlm_cc_not_a_real_credential'], { allowFail: true });
    const r = await checkSingleInstallation(context());
    expect(r.verdict).toBe('fail');
    expect(r.found).toContain(`namespace ${SECRET_NS} (control Secret rlmesh-cluster-control for cluster c_pf_other)`);
    expect(r.found).not.toContain('rlm_cc_not_a_real_credential');
  });

  it('ignores what is in its own namespace', async () => {
    kubectl(['create', 'secret', 'generic', 'rlmesh-cluster-control', '-n', NS, '--from-literal=cluster-id=c_pf_own'], { allowFail: true });
    const r = await checkSingleInstallation(context());
    expect(r.found).not.toContain(`namespace ${NS} `);
    expect(r.found).not.toContain('c_pf_own');
  });

  it('passes once the other installations are gone', async () => {
    helm(['uninstall', 'rlmesh', '-n', HELM_NS, '--wait']);
    kubectl(['delete', 'deployment', 'rlmesh-cluster-agent', '-n', OTHER]);
    kubectl(['delete', 'secret', 'rlmesh-cluster-control', '-n', SECRET_NS]);
    const r = await checkSingleInstallation(context());
    expect(r.found).not.toContain(OTHER);
    expect(r.found).not.toContain(HELM_NS);
    expect(r.found).not.toContain(SECRET_NS);
  });
});

describe('install-rights', () => {
  it('passes for the cluster admin', async () => {
    const r = await checkInstallRights(context());
    expect(r.verdict).toBe('pass');
    expect(r.found).toContain('create customresourcedefinitions.apiextensions.k8s.io');
  });
  it('fails for a user without rights, listing each missing one', async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(await serviceAccountKubeconfig(NS, 'rlmesh-pf-nobody'));
    const r = await checkInstallRights(context({}, 'cli', kc));
    expect(r.verdict).toBe('fail');
    expect(r.found).toMatch(/^this kube context may not: create customresourcedefinitions\.apiextensions\.k8s\.io, create clusterroles\.rbac\.authorization\.k8s\.io, create clusterrolebindings\.rbac\.authorization\.k8s\.io, create validatingadmissionpolicies\.admissionregistration\.k8s\.io, create validatingadmissionpolicybindings\.admissionregistration\.k8s\.io, create namespaces, create roles\.rbac\.authorization\.k8s\.io in rlmesh-pf-system/);
    expect(r.fix).toBe('Install with a cluster-admin kube context (kubectl config use-context <admin context>), or ask a cluster admin to run the helm install.');
  });
});
