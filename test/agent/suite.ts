// The setup and teardown every agent test file shares (kept apart from
// harness.ts, which the benchmarks also import outside vitest).
import { afterAll, beforeAll, beforeEach } from 'vitest';
import type { ControlPlane } from '../support/runtime.ts';
import { controlPlane, installAgentRbac, resetAgentState, startAgent, type AgentProcess, type RbacMode } from './harness.ts';

/**
 * The frame every agent suite shares: the chart's RBAC for `rbac`, a clean
 * slate, a control plane (suite.cp, which a test may replace), and at the end
 * every agent started through suite.start killed and the control plane stopped.
 */
export function agentSuite(rbac: RbacMode, hooks: { before?: () => unknown; after?: () => unknown; resetEach?: boolean } = {}) {
  const agents: AgentProcess[] = [];
  const suite = {
    cp: undefined as unknown as ControlPlane,
    async start(opts: Parameters<typeof startAgent>[0]): Promise<AgentProcess> {
      const agent = await startAgent(opts);
      agents.push(agent);
      return agent;
    },
  };
  beforeAll(async () => {
    installAgentRbac(rbac);
    if (!hooks.resetEach) resetAgentState();
    await hooks.before?.();
    suite.cp = await controlPlane();
  });
  if (hooks.resetEach) beforeEach(() => resetAgentState());
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop('SIGKILL')));
    await suite.cp?.stop();
    await hooks.after?.();
  });
  return suite;
}
