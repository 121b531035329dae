// Stamps the digests of the images a release pushed into an unpacked copy of a
// chart, before `helm package`: the source charts carry no digest (an image block's
// digest defaults to empty and the chart pulls repository:tag); the published chart
// pulls repository@digest, exactly the image that release built.
//
//   stampDigests('/tmp/release/rlmesh-runtime', {
//     'rlmesh/rlmesh-runtime': 'sha256:…',
//     'rlmesh/kubectl': 'sha256:…',
//   });
//
// Keys are repositories without their registry host: an image block (a map with
// repository, tag and digest) whose repository is <any host>/<key> gets the key's
// digest, so a chart whose repositories were pointed at another registry is still
// stamped. values.yaml is rewritten through the yaml Document API, so its comments
// stay; the runtime chart's templates/_defaults.tpl (the same defaults, for
// rlmesh.defaults) is stamped alike. Refused, with nothing written: a key that
// matches no image block, an image block that no key matches (it would ship
// without a digest), a digest that is not sha256:<64 hex>. An image block with an
// empty repository names no image (Grafana in rlmesh-observability) and is left as it is.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { isMap, isScalar, isSeq, parseDocument, Scalar, type Node, type YAMLMap } from 'yaml';
import { DIGEST } from '../../lib/chart-values.ts';

const DEFAULTS_TPL = 'templates/_defaults.tpl';
const DEFAULTS_DEFINE = /^(\{\{- define "[^"]+" -\}\}\n)(.*)(\n\{\{- end \}\}\n?)$/ms;

/** The key of `repository` (its path after the registry host), if any key matches. */
function keyOf(repository: string, keys: string[]): string | undefined {
  return keys.find((k) => repository.endsWith(`/${k}`) && !repository.slice(0, -k.length - 1).includes('/') && repository.length > k.length + 1);
}

type Block = { path: string; repository: string; setDigest: (digest: string) => void };

function yamlBlocks(node: Node | null | undefined, path: string[] = []): Block[] {
  if (isSeq(node)) return node.items.flatMap((item, i) => yamlBlocks(item as Node, [...path, String(i)]));
  if (!isMap(node)) return [];
  const map = node as YAMLMap;
  const repository = map.get('repository', true);
  if (isScalar(repository) && typeof repository.value === 'string' && map.has('digest') && map.has('tag'))
    return [{ path: path.join('.'), repository: repository.value, setDigest: (d) => map.set('digest', new Scalar(d)) }];
  return map.items.flatMap((pair) => (isScalar(pair.key) ? yamlBlocks(pair.value as Node, [...path, String(pair.key.value)]) : []));
}

function jsonBlocks(value: unknown, path: string[] = []): Block[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => jsonBlocks(v, [...path, String(i)]));
  if (value === null || typeof value !== 'object') return [];
  const o = value as Record<string, unknown>;
  if (typeof o.repository === 'string' && 'digest' in o && 'tag' in o)
    return [{ path: path.join('.'), repository: o.repository, setDigest: (d) => (o.digest = d) }];
  return Object.entries(o).flatMap(([k, v]) => jsonBlocks(v, [...path, k]));
}

/** Sets each image block's digest from `digests`; returns the stamped paths. Throws on any mismatch. */
function stamp(blocks: Block[], digests: Record<string, string>, file: string): string[] {
  const keys = Object.keys(digests);
  const named = blocks.filter((b) => b.repository !== '');
  const unstamped = named.filter((b) => keyOf(b.repository, keys) === undefined);
  if (unstamped.length > 0)
    throw new Error(
      `${file}: no digest given for ${unstamped.map((b) => `${b.path} (${b.repository})`).join(', ')}; ` +
        `the digests given are for ${keys.join(', ') || 'no repository'}: pass the digest of every image the chart names, keyed by its repository without the registry host`,
    );
  const unused = keys.filter((k) => !named.some((b) => keyOf(b.repository, [k]) === k));
  if (unused.length > 0)
    throw new Error(
      `${file}: no image block has repository <host>/${unused.join(' or <host>/')}; ` +
        `its repositories are ${[...new Set(named.map((b) => b.repository))].join(', ')}: a digest for an image the chart does not run means the release and the chart disagree`,
    );
  for (const b of named) b.setDigest(digests[keyOf(b.repository, keys)!]!);
  return named.map((b) => b.path);
}

export function stampDigests(chartDir: string, digests: Record<string, string>): void {
  for (const [key, digest] of Object.entries(digests)) {
    if (!DIGEST.test(digest)) throw new Error(`the digest for ${key} is ${JSON.stringify(digest)}, not sha256: followed by 64 lowercase hex digits`);
    if (key === '' || key.startsWith('/') || key.includes(':') || key.includes('@'))
      throw new Error(`${JSON.stringify(key)} is not a repository without its registry host (such as rlmesh/rlmesh-runtime)`);
  }
  const valuesPath = join(chartDir, 'values.yaml');
  const doc = parseDocument(readFileSync(valuesPath, 'utf8'));
  if (doc.errors.length > 0) throw new Error(`${valuesPath}: ${doc.errors[0]!.message}`);
  const stamped = stamp(yamlBlocks(doc.contents as Node), digests, valuesPath);

  let defaults: string | undefined;
  const defaultsPath = join(chartDir, DEFAULTS_TPL);
  if (existsSync(defaultsPath)) {
    const tpl = readFileSync(defaultsPath, 'utf8');
    // the generated file holds a comment line, then the define with one line of JSON
    const at = tpl.indexOf('{{- define ');
    const m = DEFAULTS_DEFINE.exec(tpl.slice(at));
    if (at < 0 || !m) throw new Error(`${defaultsPath} is not the generated defaults template (a define holding one line of JSON)`);
    const json = JSON.parse(m[2]!) as unknown;
    const inDefaults = stamp(jsonBlocks(json), digests, defaultsPath);
    if (inDefaults.join() !== stamped.join())
      throw new Error(`${defaultsPath} has image blocks ${inDefaults.join(', ')} but values.yaml has ${stamped.join(', ')}: regenerate the chart (npm run generate)`);
    defaults = `${tpl.slice(0, at)}${m[1]}${JSON.stringify(json)}${m[3]}`;
  }

  writeFileSync(valuesPath, doc.toString({ lineWidth: 0, flowCollectionPadding: false }));
  if (defaults !== undefined) writeFileSync(defaultsPath, defaults);
}
