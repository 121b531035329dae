// The platform's output hosts the agent writes (ConfigMap rlmesh-output-hosts,
// mounted as a file with one host per line, followed by mounted-file.ts) and handed to the
// allow-list. They only ever add exact names, so a file that is missing or
// unreadable means none (the proxy stays ready and allows the chart's own list):
// evaluations that upload to an output host fail until it is back, and the log
// says why. Each name is checked again here (lib/output-hosts.ts).
import type { Logger } from 'pino';
import { errorFields } from '../lib/error-fields.ts';
import { parseOutputHostsText } from '../lib/output-hosts.ts';
import { followMountedFile } from './mounted-file.ts';

export type OutputHostsFileOptions = { path: string; log: Logger; onChange: (hosts: string[]) => void; intervalMs?: number };

/** Reads the file now and whenever its text changes; returns stop(). */
export async function followOutputHostsFile(o: OutputHostsFileOptions): Promise<() => void> {
  let unreadable = false;
  return followMountedFile(o.path, (r) => {
    if ('error' in r) {
      if (unreadable) return;
      unreadable = true;
      const missing = r.error.code === 'ENOENT';
      o.log.warn(
        { path: o.path, ...(missing ? {} : errorFields(r.error)) },
        missing
          ? `the output hosts file ${o.path} is missing: ConfigMap rlmesh-output-hosts holds none yet (the agent writes what the platform names once it reaches GET /v1/info), so evaluations may reach only the chart's allow-list for now`
          : `cannot read the output hosts file ${o.path}, so the proxy allows only the chart's list; check the pod's volume from ConfigMap rlmesh-output-hosts`,
      );
      return o.onChange([]);
    }
    unreadable = false;
    const { hosts, refused } = parseOutputHostsText(r.text);
    if (refused.length) o.log.warn({ path: o.path, refused }, 'skipped lines of the output hosts file that are not exact public hostnames');
    o.log.info({ path: o.path, outputHosts: hosts }, "the platform's output hosts changed");
    o.onChange(hosts);
  }, o.intervalMs);
}
