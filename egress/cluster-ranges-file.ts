// The cluster's own ranges the agent reads from the API (ConfigMap
// rlmesh-cluster-ranges, mounted as a file with one CIDR per line). The kubelet
// replaces the file when the ConfigMap changes, so it is read again every few
// seconds (mounted-file.ts). A cluster always has ranges (its nodes' addresses at least), so a
// file that is missing, unreadable or holds none is a problem that keeps the
// proxy not ready (fail closed), and the ranges already in use stay. So does a
// file in which the agent says it could not read the ranges (`unknown: <why>`).
import type { Logger } from 'pino';
import { unknownReason } from '../lib/cluster-ranges-text.ts';
import { parseClusterRange, type ClusterRange } from './classify-address.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';
import { followMountedFile, type MountedFileRead } from './mounted-file.ts';

/** The ranges in the file's text; a line that is not a usable range is skipped, with its reason. */
export function parseRangesFile(text: string): { ranges: ClusterRange[]; skipped: string[] } {
  const ranges: ClusterRange[] = [];
  const skipped: string[] = [];
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (!line || line.startsWith('#')) continue;
    try {
      ranges.push(parseClusterRange(line));
    } catch (err) {
      skipped.push(errorMessage(err));
    }
  }
  return { ranges, skipped };
}

export type RangesFileOptions = { path: string; log: Logger; onChange: (ranges: ClusterRange[]) => void; intervalMs?: number };
export type RangesFollower = { stop: () => void; /** why the proxy must not be ready, or undefined */ problem: () => string | undefined };

const WHY = "so the proxy cannot refuse the cluster's own addresses and stays not ready until it can";

/** Reads the file now and whenever its text changes. */
export async function followRangesFile(o: RangesFileOptions): Promise<RangesFollower> {
  let problem: string | undefined;
  const fail = (p: string, fields: object = {}): void => {
    if (p !== problem) o.log.warn({ path: o.path, ...fields }, p);
    problem = p;
  };
  const onRead = (r: MountedFileRead): void => {
    if ('error' in r) {
      const missing = r.error.code === 'ENOENT';
      return fail(
        missing
          ? `the cluster ranges file ${o.path} is missing: ConfigMap rlmesh-cluster-ranges holds no ranges yet, ${WHY}; the agent writes them at start (check that it runs and may list nodes)`
          : `cannot read the cluster ranges file ${o.path}: ${errorMessage(r.error)}, ${WHY}; check the pod's volume from ConfigMap rlmesh-cluster-ranges`,
        missing ? {} : errorFields(r.error),
      );
    }
    const unknown = unknownReason(r.text);
    if (unknown !== undefined) return fail(`the agent could not read the cluster's own address ranges: ${unknown}`);
    const { ranges, skipped } = parseRangesFile(r.text);
    if (skipped.length) o.log.warn({ path: o.path, skipped }, 'skipped lines of the cluster ranges file that are not ranges');
    if (ranges.length === 0) return fail(`the cluster ranges file ${o.path} holds no ranges (every cluster has at least its nodes' addresses), ${WHY}; check the agent's log for why it wrote none`);
    if (problem) o.log.info({ path: o.path }, 'the cluster ranges file is usable again');
    problem = undefined;
    o.log.info({ path: o.path, ranges: ranges.length }, "the cluster's own address ranges changed");
    o.onChange(ranges);
  };
  const stop = await followMountedFile(o.path, onRead, o.intervalMs);
  return { stop, problem: () => problem };
}
