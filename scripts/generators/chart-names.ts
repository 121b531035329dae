// templates/_names.tpl: the fixed names and mount paths of lib/fixed-names.ts as
// rlmesh.name.<key> and rlmesh.mount.<key>, and the node requirements of the runtime's
// platform as JSON (rlmesh.platformNodeRequirements), the users of POD_USERS as rlmesh.user.<who>.uid
// and .gid, and the artifact-sources Secrets, so the chart and the code share one list.
import { ARTIFACT_SOURCES_SECRETS, MOUNTS, NAMES, PLATFORM_NODE_REQUIREMENTS, POD_USERS } from '../../lib/fixed-names.ts';

export function namesTemplate(): string {
  const define = (prefix: string, entries: Record<string, string>) =>
    Object.entries(entries).map(([k, v]) => `{{- define "rlmesh.${prefix}.${k}" -}}${v}{{- end }}\n`).join('');
  return `{{/* Generated from lib/fixed-names.ts by \`npm run generate\`; do not edit. */}}\n${define('name', NAMES)}${define('mount', MOUNTS)}` +
    `{{- define "rlmesh.platformNodeRequirements" -}}${JSON.stringify(PLATFORM_NODE_REQUIREMENTS)}{{- end }}\n` +
    `{{- define "rlmesh.artifactSourcesSecrets" -}}${JSON.stringify(ARTIFACT_SOURCES_SECRETS)}{{- end }}\n` +
    Object.entries(POD_USERS).map(([who, u]) => `{{- define "rlmesh.user.${who}.uid" -}}${u.uid}{{- end }}\n{{- define "rlmesh.user.${who}.gid" -}}${u.gid}{{- end }}\n`).join('');
}

export async function outputs(): Promise<Record<string, string>> {
  return { 'charts/rlmesh-runtime/templates/_names.tpl': namesTemplate() };
}
