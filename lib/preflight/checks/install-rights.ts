// Whether the installing user may create what the chart creates outside one
// namespace: CRDs, cluster roles and bindings, admission policies and their
// bindings, roles and namespaces. Asked of
// the API server with SelfSubjectAccessReview, so it answers for the kube
// context the user will run helm with. CLI only.
import * as k8s from '@kubernetes/client-node';
import type { CheckResult, PreflightContext } from '../types.ts';

const ID = 'install-rights';

export type Right = { group: string; resource: string; namespace?: string };

export const INSTALL_RIGHTS = (namespace: string, runsNamespace: string): Right[] => [
  { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' },
  { group: 'rbac.authorization.k8s.io', resource: 'clusterroles' },
  { group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' },
  { group: 'admissionregistration.k8s.io', resource: 'validatingadmissionpolicies' },
  { group: 'admissionregistration.k8s.io', resource: 'validatingadmissionpolicybindings' },
  { group: '', resource: 'namespaces' },
  { group: 'rbac.authorization.k8s.io', resource: 'roles', namespace },
  { group: 'rbac.authorization.k8s.io', resource: 'rolebindings', namespace },
  { group: 'rbac.authorization.k8s.io', resource: 'roles', namespace: runsNamespace },
  { group: 'rbac.authorization.k8s.io', resource: 'rolebindings', namespace: runsNamespace },
];

export const describeRight = (r: Right): string => `create ${r.group ? `${r.resource}.${r.group}` : r.resource}${r.namespace ? ` in ${r.namespace}` : ''}`;

export function rightsVerdict(answers: { right: Right; allowed: boolean; reason?: string }[]): CheckResult {
  const denied = answers.filter((a) => !a.allowed);
  if (denied.length === 0) {
    return { id: ID, verdict: 'pass', found: `this kube context may ${answers.map((a) => describeRight(a.right)).join(', ')}`, fix: 'Nothing to do.' };
  }
  return {
    id: ID,
    verdict: 'fail',
    found: `this kube context may not: ${denied.map((a) => describeRight(a.right) + (a.reason ? ` (${a.reason})` : '')).join(', ')}`,
    fix: 'Install with a cluster-admin kube context (kubectl config use-context <admin context>), or ask a cluster admin to run the helm install.',
  };
}

export async function checkInstallRights(ctx: PreflightContext): Promise<CheckResult> {
  const authz = ctx.kc.makeApiClient(k8s.AuthorizationV1Api);
  const answers = await Promise.all(
    INSTALL_RIGHTS(ctx.settings.namespace, ctx.settings.runsNamespace).map(async (right) => {
      const review = await authz.createSelfSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { verb: 'create', group: right.group, resource: right.resource, ...(right.namespace ? { namespace: right.namespace } : {}) } },
        },
      });
      return { right, allowed: review.status?.allowed === true, reason: review.status?.reason || undefined };
    }),
  );
  return rightsVerdict(answers);
}
