import { defineConfig } from 'vitest/config';

// Three projects: unit tests sit next to the code they test; integration tests
// under test/ run against the real local cluster that test/cluster/up starts
// (the test toolkit's own tests in test/support and the cluster's forwarder test need no cluster: unit);
// the multi-node suites under test/multi-node run on that cluster with two more real nodes.
// Every run keeps their temporary files in a folder of the run and fail when a
// test leaves one behind (test/support/temp-dirs.ts).
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
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/support/*.test.ts', 'test/cluster/forward.test.ts', 'test/multi-node/**'],
          // temp-dirs.ts after the cluster's setup: the cluster's processes keep the machine's TMPDIR
          globalSetup: ['test/support/global-setup.ts', 'test/support/temp-dirs.ts'],
          testTimeout: 180_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
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
