// The RLMesh runtime dashboard: lib/dashboards/rlmesh-runtime.json is the source,
// and each chart carries a copy in files/ (a chart can read only its own files):
// the runtime chart's ConfigMap for a user's Grafana sidecar (metrics.grafanaDashboard)
// and the observability chart's provisioned Grafana.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const DASHBOARD_SOURCE = 'lib/dashboards/rlmesh-runtime.json';
export const DASHBOARD_COPIES = ['charts/rlmesh-runtime/files/dashboards/rlmesh-runtime.json', 'charts/rlmesh-observability/files/dashboards/rlmesh-runtime.json'];

export async function outputs(): Promise<Record<string, string>> {
  const text = await readFile(join(root, DASHBOARD_SOURCE), 'utf8');
  JSON.parse(text); // a broken source fails here, not in Grafana
  return Object.fromEntries(DASHBOARD_COPIES.map((p) => [p, text]));
}
