// The cluster's own ranges the agent reads from the API (ConfigMap
// rlmesh-cluster-ranges, mounted as a file with one CIDR per line). The kubelet
// replaces the file when the ConfigMap changes, so it is read again every few
// seconds; a missing file (the ConfigMap not written yet) is no ranges.
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { parseClusterRange, type ClusterRange } from './classify-address.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';

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

/** Reads the file now and whenever its text changes; returns stop(). */
export async function followRangesFile(o: RangesFileOptions): Promise<() => void> {
  let last: string | undefined;
  const read = async (): Promise<void> => {
    let text = '';
    try {
      text = await readFile(o.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        o.log.warn({ path: o.path, ...errorFields(err) }, "cannot read the cluster's own address ranges; keeping the ranges already in use");
        return;
      }
    }
    if (text === last) return;
    last = text;
    const { ranges, skipped } = parseRangesFile(text);
    if (skipped.length) o.log.warn({ path: o.path, skipped }, 'skipped lines of the cluster ranges file that are not ranges');
    o.log.info({ path: o.path, ranges: ranges.length }, "the cluster's own address ranges changed");
    o.onChange(ranges);
  };
  await read();
  const timer = setInterval(() => void read(), o.intervalMs ?? 5_000);
  timer.unref();
  return () => clearInterval(timer);
}
