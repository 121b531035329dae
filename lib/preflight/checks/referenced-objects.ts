// The Secrets and ConfigMaps the values name but the chart does not create:
// evaluations.imagePullSecrets (dockerconfigjson Secrets in rlmesh-runs) and
// controlPlane.caBundleFrom (a ConfigMap or Secret in the release namespace and
// rlmesh-runs). Run by the CLI with the installer's rights: no pod of the
// product may read the operator's registry logins, so inside the cluster only
// the kubelet sees a missing pull Secret (the pull fails and the evaluation's
// start deadline quotes it), and a missing CA bundle keeps the pods from
// starting (optional: false).
import * as k8s from '@kubernetes/client-node';
import { isNotFound } from '../../kube-errors.ts';
import type { CaBundleSource, CheckResult, PreflightContext } from '../types.ts';

const ID = 'referenced-objects';
const DOCKER_CONFIG_JSON = 'kubernetes.io/dockerconfigjson';
const PEM = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

/** What the cluster holds of one named object: absent, or its type (Secrets) and data as text. */
export type Seen = { namespaceExists: boolean; object?: { type?: string; data: Record<string, string> } };

type Finding = { verdict: 'pass' | 'warn' | 'fail'; found: string; fix?: string };

export function pullSecretFinding(runs: string, name: string, seen: Seen): Finding {
  const create = `kubectl -n ${runs} create secret docker-registry ${name} --docker-server=<registry> --docker-username=<user> --docker-password=<password>`;
  if (!seen.namespaceExists) return { verdict: 'warn', found: `${runs} does not exist yet (the chart creates it), so pull Secret ${name} cannot be there`, fix: `After install, ${create}; until then the images it is for do not pull (ImagePullBackOff).` };
  if (!seen.object) return { verdict: 'fail', found: `pull Secret ${runs}/${name} (evaluations.imagePullSecrets) does not exist`, fix: `${create}.` };
  if (seen.object.type !== DOCKER_CONFIG_JSON) return { verdict: 'fail', found: `pull Secret ${runs}/${name} is of type ${seen.object.type ?? 'Opaque'}, not ${DOCKER_CONFIG_JSON}`, fix: `Recreate it: ${create}.` };
  return { verdict: 'pass', found: `pull Secret ${runs}/${name} (${DOCKER_CONFIG_JSON})` };
}

export function caBundleFinding(source: CaBundleSource, namespace: string, seen: Seen, createdByChart: boolean): Finding {
  const what = `${source.kind} ${namespace}/${source.name}`;
  const fix = `Create ${what} with the PEM bundle under key ${source.key} (or let your trust-manager Bundle write it there).`;
  if (!seen.namespaceExists) return { verdict: createdByChart ? 'warn' : 'fail', found: `${namespace} does not exist yet, so ${what} (controlPlane.caBundleFrom) cannot be there`, fix: createdByChart ? `After install, ${fix.charAt(0).toLowerCase()}${fix.slice(1)} The cache filler starts once it exists.` : fix };
  if (!seen.object) return { verdict: 'fail', found: `${what} (controlPlane.caBundleFrom) does not exist: the pods that mount it would not start`, fix };
  const value = seen.object.data[source.key];
  if (value === undefined) {
    const keys = Object.keys(seen.object.data);
    return { verdict: 'fail', found: `${what} has no key ${source.key} (it has ${keys.length ? keys.join(', ') : 'no keys'})`, fix: `Set controlPlane.caBundleFrom.${source.kind === 'ConfigMap' ? 'configMap' : 'secret'}.key to the key that holds the bundle, or add ${source.key}.` };
  }
  if (!PEM.test(value)) return { verdict: 'fail', found: `${what} key ${source.key} holds no PEM certificate`, fix: `Put the PEM CA bundle (-----BEGIN CERTIFICATE----- …) under ${source.key}.` };
  return { verdict: 'pass', found: `${what} key ${source.key} (PEM)` };
}

/** The findings as one result: the worst verdict, every finding listed, the fixes of those not passing. */
export function referencedObjectsVerdict(findings: Finding[]): CheckResult {
  if (findings.length === 0) return { id: ID, verdict: 'pass', found: 'the values name no pull Secret or CA bundle object of your own', fix: 'Nothing to do.' };
  const verdict = findings.some((f) => f.verdict === 'fail') ? 'fail' : findings.some((f) => f.verdict === 'warn') ? 'warn' : 'pass';
  const fixes = findings.filter((f) => f.verdict !== 'pass' && f.fix).map((f) => f.fix!);
  return { id: ID, verdict, found: findings.map((f) => f.found).join('; '), fix: fixes.length ? fixes.join(' ') : 'Nothing to do.' };
}

async function seen(core: k8s.CoreV1Api, kind: 'ConfigMap' | 'Secret', namespace: string, name: string): Promise<Seen> {
  const namespaceExists = await core.readNamespace({ name: namespace }).then(
    () => true,
    (err: unknown) => {
      if (isNotFound(err)) return false;
      throw err;
    },
  );
  if (!namespaceExists) return { namespaceExists };
  try {
    if (kind === 'ConfigMap') {
      const cm = await core.readNamespacedConfigMap({ name, namespace });
      return { namespaceExists, object: { data: { ...cm.data } } };
    }
    const s = await core.readNamespacedSecret({ name, namespace });
    const data = Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    return { namespaceExists, object: { ...(s.type ? { type: s.type } : {}), data } };
  } catch (err) {
    if (isNotFound(err)) return { namespaceExists };
    throw err;
  }
}

export async function checkReferencedObjects(ctx: PreflightContext): Promise<CheckResult> {
  const core = ctx.kc.makeApiClient(k8s.CoreV1Api);
  const { namespace, runsNamespace, evaluationPullSecrets = [], caBundleFrom } = ctx.settings;
  const findings: Finding[] = [];
  for (const name of evaluationPullSecrets) findings.push(pullSecretFinding(runsNamespace, name, await seen(core, 'Secret', runsNamespace, name)));
  if (caBundleFrom) {
    for (const ns of [namespace, runsNamespace]) findings.push(caBundleFinding(caBundleFrom, ns, await seen(core, caBundleFrom.kind, ns, caBundleFrom.name), ns === runsNamespace));
  }
  return referencedObjectsVerdict(findings);
}
