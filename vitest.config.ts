import { defineConfig } from 'vitest/config';

// Unit tests sit next to the code they test (the test toolkit's own tests in test/support and
// the cluster's forwarder test need no cluster: unit). The integration tests under test/ run
// against the real local cluster that test/cluster/up starts, in three projects, each one file at
// a time: `integration` (the end-to-end lane: the release rlmesh in rlmesh-system, the real node's
// traffic) and `components` (the agent, controller and preflight suites, each in namespaces of its
// own on kwok nodes, and the files that need no cluster) run side by side, as two vitest processes
// (test/ci); `exclusive` runs alone after them: its files restart kube-apiserver, the kubelet and
// containerd, delete the CRDs, or stop the cluster and start a new one (the demo), which the other
// lanes' files would see. The multi-node suites
// under test/multi-node run last on that cluster with two more real nodes. Every run keeps its
// temporary files in a folder of its own and fails when a test leaves one behind (test/support/temp-dirs.ts).
const COMPONENTS = [
  'test/agent/**/*.test.ts',
  'test/controller/**/*.test.ts',
  'test/preflight/**/*.test.ts',
  // no cluster: helm template, ct lint and cyclonus-free renders
  'test/chart/{evaluation-placement,knobs,lint,network-policy-reach,posture}.test.ts',
  'test/observability/{lint,metrics-relay}.test.ts',
];
const EXCLUSIVE = ['test/agent/apiserver-loss.test.ts', 'test/e2e/faults.test.ts', 'test/e2e/upgrade.test.ts', 'test/e2e/demo.test.ts'];
const NOT_INTEGRATION = ['test/support/*.test.ts', 'test/cluster/forward.test.ts', 'test/multi-node/**'];
const onCluster = {
  // temp-dirs.ts after the cluster's setup: the cluster's processes keep the machine's TMPDIR
  globalSetup: ['test/support/global-setup.ts', 'test/support/temp-dirs.ts'],
  testTimeout: 180_000,
  hookTimeout: 300_000,
  fileParallelism: false,
};

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{agent,controller,egress,controlplane,gpu-discovery,lib,cli,bin,scripts}/**/*.test.ts', 'test/support/*.test.ts', 'test/cluster/forward.test.ts'],
          testTimeout: 20_000,
          globalSetup: ['test/support/temp-dirs.ts'],
        },
      },
      { test: { name: 'integration', include: ['test/**/*.test.ts'], exclude: [...NOT_INTEGRATION, ...COMPONENTS, ...EXCLUSIVE], ...onCluster } },
      { test: { name: 'components', include: COMPONENTS, exclude: EXCLUSIVE, ...onCluster } },
      { test: { name: 'exclusive', include: EXCLUSIVE, ...onCluster } },
      {
        test: {
          name: 'multi-node',
          include: ['test/multi-node/**/*.test.ts'],
          globalSetup: ['test/multi-node/global-setup.ts', 'test/support/temp-dirs.ts'],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
