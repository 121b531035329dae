// The components the image runs (`rlmesh-runtime <name> [flags]`), each with the
// source file its bundle starts from. The CLI's is the released CLI's entry,
// which calls run() itself, as every other component's main.ts starts itself.
export const COMPONENT_SOURCES = {
  agent: 'agent/main.ts',
  controller: 'controller/main.ts',
  egress: 'egress/main.ts',
  controlplane: 'controlplane/main.ts',
  cli: 'scripts/release/cli-entry.ts',
  'gpu-discovery': 'gpu-discovery/main.ts',
} as const;

export type Component = keyof typeof COMPONENT_SOURCES;

export const COMPONENTS = Object.keys(COMPONENT_SOURCES) as Component[];
