// Image references read with the grammar of github.com/distribution/reference
// (ParseNormalizedNamed), which the kubelet applies before it asks the runtime
// to pull and containerd applies again: a reference it refuses never runs, and
// what it takes for the registry host is where the node pulls from. The
// notable rule: the first component of a name with a slash is a registry host
// when it holds `.` or `:`, is `localhost`, or has an upper-case letter
// (repository paths are lower-case), so `MYREG/x` comes from the host MYREG,
// not from Docker Hub.

export type ImageReference = {
  /** the registry host as written (with its port), `docker.io` for Docker Hub */
  domain: string;
  /** the repository in that registry: `library/busybox` for `busybox` */
  path: string;
  tag?: string;
  digest?: string;
};

const DOCKER_HUB = 'docker.io';
const LEGACY_DOCKER_HUB = 'index.docker.io';
const NAME_MAX = 255;

const ALNUM = '[a-z0-9]+';
const PATH_COMPONENT = new RegExp(`^${ALNUM}(?:(?:[._]|__|-+)${ALNUM})*$`);
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
// a DNS-like name or IPv4 address, or an IPv6 address in brackets; any port digits
const DOMAIN = new RegExp(`^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?$`);
const TAG = /^\w[\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
// the algorithms the kubelet's go-digest accepts, with their lower-case hex lengths
const DIGEST_HEX_LENGTH = new Map([['sha256', 64], ['sha384', 96], ['sha512', 128]]);
const IMAGE_ID = /^[a-f0-9]{64}$/;

// `sha256:<hex>` is a valid name (sha256) and tag to distribution, but containerd and CRI-O take a
// digest-shaped reference for the ID of an image already on the node, whoever pulled it
const ALGORITHM_IMAGE_ID = /^(?:sha256|sha384|sha512):[0-9a-f]+$/i;

/** Whether `image` is a bare image ID (`sha256:<hex>`, or 64 hex digits alone) rather than a repository reference. */
export const isBareImageId = (image: string): boolean => IMAGE_ID.test(image) || ALGORITHM_IMAGE_ID.test(image);

/** `domain/path[:tag][@digest]`: the fully qualified form, which means the same to every runtime. */
export function referenceString(r: ImageReference): string {
  return `${r.domain}/${r.path}${r.tag === undefined ? '' : `:${r.tag}`}${r.digest === undefined ? '' : `@${r.digest}`}`;
}

/** The reference `input` names, normalised as distribution does, or what makes it invalid. */
export function parseImageReference(input: string): ImageReference | { problem: string } {
  if (input === '') return { problem: 'it is empty' };
  if (/\s/.test(input)) return { problem: 'it contains whitespace' };
  if (input.includes('://')) return { problem: 'it has a URL scheme (…://), and a reference is host/repository without one' };
  if (IMAGE_ID.test(input)) return { problem: 'it is an image ID (64 hex digits), not a repository name' };

  const at = input.indexOf('@');
  const nameAndTag = at < 0 ? input : input.slice(0, at);
  const digest = at < 0 ? undefined : input.slice(at + 1);
  if (nameAndTag === '') return { problem: 'it names no repository' };
  const { domain, remainder } = splitDomain(nameAndTag);
  const colon = remainder.indexOf(':');
  const path = colon < 0 ? remainder : remainder.slice(0, colon);
  const tag = colon < 0 ? undefined : remainder.slice(colon + 1);

  const name = `${domain}/${path}`;
  if (name.length > NAME_MAX) return { problem: `its name ${name.slice(0, 40)}… is ${name.length} characters long, and at most ${NAME_MAX} are allowed` };
  if (!DOMAIN.test(domain)) return { problem: `the registry host ${domain} is not a host name or an IPv4 or [IPv6] address with an optional numeric port` };
  const pathProblem = repositoryPathProblem(path);
  if (pathProblem) return { problem: pathProblem };
  if (tag !== undefined && !TAG.test(tag)) return { problem: `the tag "${tag}" is not 1 to 128 letters, digits, _, . or -, starting with a letter, digit or _` };
  if (digest !== undefined) {
    const digestProblem = digestProblemOf(digest);
    if (digestProblem) return { problem: digestProblem };
  }
  return { domain, path, ...(tag === undefined ? {} : { tag }), ...(digest === undefined ? {} : { digest }) };
}

// distribution's splitDockerDomain
function splitDomain(name: string): { domain: string; remainder: string } {
  const slash = name.indexOf('/');
  if (slash < 0) return { domain: DOCKER_HUB, remainder: `library/${name}` };
  const first = name.slice(0, slash);
  let domain = DOCKER_HUB;
  let remainder = name;
  if (first === 'localhost' || first.includes('.') || first.includes(':') || first !== first.toLowerCase()) {
    domain = first === LEGACY_DOCKER_HUB ? DOCKER_HUB : first;
    remainder = name.slice(slash + 1);
  }
  if (domain === DOCKER_HUB && !remainder.includes('/')) remainder = `library/${remainder}`;
  return { domain, remainder };
}

function repositoryPathProblem(path: string): string | undefined {
  const components = path.split('/');
  if (components.includes('')) return `the repository path "${path}" has an empty component`;
  if (path !== path.toLowerCase()) return `the repository path "${path}" has upper-case letters, and repository paths are lower-case`;
  const bad = components.find((c) => !PATH_COMPONENT.test(c));
  if (bad !== undefined) return `the repository path component "${bad}" is not lower-case letters and digits joined by single ., _ or __, or by dashes`;
  return undefined;
}

function digestProblemOf(digest: string): string | undefined {
  if (!DIGEST.test(digest)) return `the digest "${digest}" is not algorithm:hex (sha256:<64 hex digits>)`;
  const [algorithm, hex] = digest.split(':') as [string, string];
  const length = DIGEST_HEX_LENGTH.get(algorithm);
  if (length === undefined) return `the digest algorithm ${algorithm} is not sha256, sha384 or sha512`;
  if (hex.length !== length || !/^[a-f0-9]+$/.test(hex)) return `a ${algorithm} digest is ${length} lower-case hex digits, and "${hex}" is not`;
  return undefined;
}
