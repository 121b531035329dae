// The controller's flags, every one parsed and checked at start by one schema:
// a bad value stops the process before it campaigns for a Lease, never at a
// later fail-over.
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { MOUNTS } from '../lib/fixed-names.ts';

const count = (min: number) => z.coerce.number().int().min(min);

const schema = z.object({
  help: z.boolean().default(false),
  role: z.enum(['reconciler', 'cache-filler', 'all']).default('reconciler'),
  kubeconfig: z.string().optional(),
  'cache-dir': z.string().min(1).default('/var/lib/rlmesh/cache'),
  'node-name': z.string().optional(),
  identity: z.string().optional(),
  'lease-duration-seconds': count(1).default(15),
  'gc-after-seconds': count(0).default(3600),
  'waiting-retry-seconds': count(0).default(10),
  'max-concurrent': count(1).optional(),
  'sources-dir': z.string().min(1).default(MOUNTS.artifactSourcesDir),
  'secret-grace-seconds': count(0).default(180),
  concurrency: count(1).default(16),
  'fetch-attempts': count(1).default(5),
  'fetch-retry-ms': count(0).default(500),
  'chunk-bytes': count(1024).default(32 * 1024 * 1024),
  'ranged-threshold-bytes': count(0).default(256 * 1024 * 1024),
  'metrics-port': count(0).max(65535).optional(),
  'health-port': count(0).max(65535).optional(),
});

// every flag is a string on the command line (--help a switch); the schema above names, converts and defaults them
const OPTIONS = Object.fromEntries(
  Object.keys(schema.shape).map((name) => [name, name === 'help' ? { type: 'boolean' as const, short: 'h' } : { type: 'string' as const }]),
);

export type ControllerFlags = z.infer<typeof schema>;

export const USAGE = `usage: rlmesh-runtime controller [--role reconciler|cache-filler|all] [--cache-dir DIR] [--sources-dir DIR]
  [--lease-duration-seconds 15] [--gc-after-seconds 3600] [--max-concurrent N] [--waiting-retry-seconds 10]
  [--concurrency 16] [--fetch-attempts 5] [--fetch-retry-ms 500] [--chunk-bytes N] [--ranged-threshold-bytes N]
  [--metrics-port N] [--health-port N] [--kubeconfig FILE] [--node-name NAME] [--identity ID]
The runtime config comes from RLMESH_CONFIG (default /etc/rlmesh/config/config.json). See controller/README.md.`;

/** Parses argv; throws one message naming every bad flag, its value and what it must be. */
export function parseControllerFlags(argv: string[]): ControllerFlags {
  const { values } = parseArgs({ args: argv, options: OPTIONS, strict: true });
  // an empty value (--max-concurrent=) is a mistake, not "unset"
  const parsed = schema.safeParse(values);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => {
    const flag = String(i.path[0]);
    return `--${flag} ${JSON.stringify((values as Record<string, unknown>)[flag])}: ${i.message}`;
  });
  throw new Error(`bad controller flags: ${problems.join('; ')}. Fix them in the Deployment's args (or see --help).`);
}
