// The text of ConfigMap rlmesh-cluster-ranges, which the agent writes and the
// egress proxy reads: one CIDR per line, or, when the agent could not read
// every source of them, one line `unknown: <why>`, so that the proxy refuses
// every destination with that reason rather than go on with ranges that may
// miss the cluster's own addresses (fail closed).
const UNKNOWN = 'unknown: ';

export function unknownRangesText(why: string): string {
  return `${UNKNOWN}${why.replace(/\s*\n\s*/g, ' ')}`;
}

/** Why the agent wrote the ranges as unknown, or undefined when the text lists them. */
export function unknownReason(text: string): string | undefined {
  const line = text.split('\n').find((l) => l.startsWith(UNKNOWN));
  return line === undefined ? undefined : line.slice(UNKNOWN.length).trim();
}
