// A helm post-renderer that does to the chart's pods what OpenShift's restricted-v2
// SCC admission does: a pod template that sets runAsUser, runAsGroup or fsGroup
// outside the namespace's UID range is refused (exit 1, its path named), and every
// pod template gets the range's UID as runAsUser and fsGroup, with group 0.
// Usage: scc-post-renderer.ts <namespace>=<uid> ... < manifests > manifests
import { readFileSync } from 'node:fs';
import { parseAllDocuments, stringify } from 'yaml';

type SecurityContext = { runAsUser?: number; runAsGroup?: number; fsGroup?: number } & Record<string, unknown>;
type PodSpec = { securityContext?: SecurityContext; containers: { name: string; securityContext?: SecurityContext }[]; initContainers?: { name: string; securityContext?: SecurityContext }[] };
type Obj = { kind: string; metadata: { name: string; namespace?: string }; spec?: { template?: { spec: PodSpec } } };

/** The UID each namespace's range starts with (what restricted-v2's MustRunAsRange assigns). */
export function parseRanges(args: string[]): Map<string, number> {
  return new Map(args.map((a) => { const [ns, uid] = a.split('='); return [ns!, Number(uid)]; }));
}

/** The pod templates' fixed users (what the SCC would refuse), or the manifests with the SCC's user injected. */
export function admit(manifests: string, ranges: Map<string, number>, defaultNamespace: string): { refused: string[]; out: string } {
  const refused: string[] = [];
  const docs: string[] = [];
  for (const doc of parseAllDocuments(manifests)) {
    const o = doc.toJS() as Obj | null;
    if (!o) continue;
    const spec = o.spec?.template?.spec;
    if (spec && ['Deployment', 'DaemonSet', 'Job', 'StatefulSet'].includes(o.kind)) {
      const ns = o.metadata.namespace ?? defaultNamespace;
      const uid = ranges.get(ns);
      if (uid === undefined) throw new Error(`no UID range for namespace ${ns}: pass ${ns}=<uid>`);
      const where = `${o.kind}/${ns}/${o.metadata.name}`;
      for (const k of ['runAsUser', 'runAsGroup', 'fsGroup'] as const) if (spec.securityContext?.[k] !== undefined) refused.push(`${where} spec.securityContext.${k}=${spec.securityContext[k]}`);
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])])
        for (const k of ['runAsUser', 'runAsGroup'] as const) if (c.securityContext?.[k] !== undefined) refused.push(`${where} container ${c.name} securityContext.${k}=${c.securityContext[k]}`);
      spec.securityContext = { ...spec.securityContext, runAsUser: uid, runAsGroup: 0, fsGroup: uid };
    }
    docs.push(stringify(o));
  }
  return { refused, out: docs.map((d) => `---\n${d}`).join('') };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const ranges = parseRanges(process.argv.slice(2));
  const { refused, out } = admit(readFileSync(0, 'utf8'), ranges, process.env.HELM_NAMESPACE ?? 'default');
  if (refused.length > 0) {
    process.stderr.write(`restricted-v2 SCC emulation: pods set a fixed user outside the namespace's range:\n  ${refused.join('\n  ')}\n`);
    process.exit(1);
  }
  process.stdout.write(out);
}
