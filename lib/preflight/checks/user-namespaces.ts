// evaluations.hostUsers: whether the nodes evaluation pods may use run them in user
// namespaces (lib/user-namespaces.ts decides, as the controller does before each pod).
// Fails only where user namespaces are required (false) and a node lacks them: then no
// evaluation starts, and the agent tells the platform so.
import { decideHostUsers, runtimeHandler, USER_NAMESPACES_FIX, USER_NAMESPACES_PREREQUISITE, userNamespaceSupport } from '../../user-namespaces.ts';
import { NO_PLACEMENT } from '../../evaluation-placement.ts';
import { listNodes } from '../kube.ts';
import type { CheckResult, PreflightContext } from '../types.ts';

export const USER_NAMESPACES_CHECK = 'user-namespaces';

export async function checkUserNamespaces(ctx: PreflightContext): Promise<CheckResult> {
  const setting = ctx.settings.hostUsers ?? 'auto';
  const placement = ctx.settings.placement ?? NO_PLACEMENT;
  const nodes = await listNodes(ctx);
  const handler = setting === true ? { name: '' } : await runtimeHandler(ctx.kc, placement.runtimeClassName);
  const d = decideHostUsers(setting, () => userNamespaceSupport(nodes, placement, handler));
  if ('wait' in d) return { id: USER_NAMESPACES_CHECK, verdict: 'fail', found: d.wait.split(';')[0]!, fix: `${USER_NAMESPACES_FIX}.` };
  if (d.hostUsers === false || setting === true) return { id: USER_NAMESPACES_CHECK, verdict: 'pass', found: d.found, fix: 'Nothing to do.' };
  return {
    id: USER_NAMESPACES_CHECK,
    verdict: 'warn',
    found: d.found,
    fix: `For user namespaces around evaluation code, run nodes whose kubelet reports them (${USER_NAMESPACES_PREREQUISITE}); to accept the node's users, set evaluations.hostUsers=true.`,
  };
}
