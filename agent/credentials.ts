// The cluster's credentials as Kubernetes Secrets: the control Secret (keys
// `control`, `cluster-id`, annotated with the SHA-256 of the join token that
// produced it — never the token), the registry pull Secret in the system and
// runs namespaces, the CRD-upgrade hook's pull Secret and, with observability,
// the relay Secret. Reading them validates every key a component relies on and
// names the Secret and key that is wrong.
//
// The Secrets the agent writes, except the hook's, are owned by the agent's
// ClusterRole, which only the release holds: `helm uninstall` deletes it, and
// the garbage collector then deletes them. The hook pull Secret has no owner
// (the spec keeps it): it holds a copy of the live pull credential, valid until
// the platform revokes it (archive, confirmed rejoin, or 24 h after a pull
// rotation); the chart README says so. Secrets delivered out of band (GitOps,
// a secret manager, `rlmesh clusters join`) are never written here, not even
// by a rotation: a sync or refresh would write its own value back. A Secret is
// the agent's when it carries the agent's owner reference or its managed-by
// label; a rotation for one that is not is left to the operator
// (operatorSecret), and put() refuses to write it.
import * as k8s from '@kubernetes/client-node';
import type { RuntimeConfig } from '../lib/runtime-config.ts';
import { isConflict, isNotFound } from '../lib/kube-errors.ts';
import { withCommonLabels } from '../lib/common-labels.ts';
import { CLUSTER_ID_KEY, CONTROL_KEY, PULL_KEY, PULL_SECRET_TYPE, RELAY_KEY, TOKEN_HASH_ANNOTATION, controlSecretData, type CredentialPurpose, type JoinResult } from '../lib/credential-secret.ts';
const LABELS = { 'app.kubernetes.io/part-of': 'rlmesh', 'app.kubernetes.io/managed-by': 'rlmesh-cluster-agent' };

export type ControlCredentials = {
  control: string;
  clusterId: string;
  /** SHA-256 of the join token these came from; absent for Secrets delivered out of band */
  tokenHash: string | undefined;
  resourceVersion: string | undefined;
};

const decode = (v: string | undefined): string | undefined => (v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8'));

export type ReadResult<T> = { ok: true; value: T } | { ok: false; problem: string };

/** Parses a control Secret; the problem names the Secret and the key. */
export function parseControlSecret(secret: k8s.V1Secret | undefined, ns: string, name: string): ReadResult<ControlCredentials> {
  const where = `Secret ${ns}/${name}`;
  if (!secret) return { ok: false, problem: `${where} does not exist` };
  const control = decode(secret.data?.[CONTROL_KEY])?.trim();
  const clusterId = decode(secret.data?.[CLUSTER_ID_KEY])?.trim();
  if (!control) return { ok: false, problem: `${where} has no key "${CONTROL_KEY}" (the control credential)` };
  if (!/^\S+$/.test(control)) return { ok: false, problem: `${where} key "${CONTROL_KEY}" is malformed (it must be the credential alone, without spaces or newlines inside)` };
  if (!clusterId) return { ok: false, problem: `${where} has no key "${CLUSTER_ID_KEY}"` };
  return { ok: true, value: { control, clusterId, tokenHash: secret.metadata?.annotations?.[TOKEN_HASH_ANNOTATION], resourceVersion: secret.metadata?.resourceVersion } };
}

/** A pull Secret must be a kubernetes.io/dockerconfigjson Secret whose .dockerconfigjson has auths. */
export function parsePullSecret(secret: k8s.V1Secret | undefined, ns: string, name: string): ReadResult<true> {
  const where = `Secret ${ns}/${name}`;
  if (!secret) return { ok: false, problem: `${where} (the registry pull Secret) does not exist` };
  if (secret.type !== PULL_SECRET_TYPE) return { ok: false, problem: `${where} has type ${secret.type ?? 'Opaque'}; it must be ${PULL_SECRET_TYPE}` };
  const raw = decode(secret.data?.[PULL_KEY]);
  if (!raw) return { ok: false, problem: `${where} has no key "${PULL_KEY}"` };
  try {
    const parsed = JSON.parse(raw) as { auths?: Record<string, unknown> };
    if (!parsed.auths || Object.keys(parsed.auths).length === 0) throw new Error('no auths');
  } catch {
    return { ok: false, problem: `${where} key "${PULL_KEY}" is malformed (it must be JSON with a non-empty "auths" object)` };
  }
  return { ok: true, value: true };
}

/** Where a rotated value goes when the operator delivers the Secret, and whether it is there already. */
export type OperatorSecret = {
  /** namespace/name of each Secret that must hold the value */
  secrets: string[];
  key: string;
  /** every one of them holds the rotated value now */
  holds: boolean;
};

/** Whether the agent wrote this Secret (its join did, or it is the hook's copy): its owner reference or its managed-by label. */
export function isAgentsSecret(secret: k8s.V1Secret, ownerClusterRole: string): boolean {
  if (secret.metadata?.labels?.['app.kubernetes.io/managed-by'] === LABELS['app.kubernetes.io/managed-by']) return true;
  return (secret.metadata?.ownerReferences ?? []).some((o) => o.kind === 'ClusterRole' && o.name === ownerClusterRole);
}

/** Whether `secret` key `key` holds `value` as a rotation of `purpose` gives it (for pull, the same password for each registry). */
function holdsValue(secret: k8s.V1Secret, purpose: CredentialPurpose, key: string, value: string): boolean {
  const have = decode(secret.data?.[key])?.trim();
  if (have === undefined) return false;
  if (purpose !== 'pull') return have === value.trim();
  try {
    const want = (JSON.parse(value) as { auths: Record<string, { password?: string }> }).auths;
    const got = (JSON.parse(have) as { auths?: Record<string, { password?: string }> }).auths ?? {};
    return Object.entries(want).every(([host, a]) => got[host]?.password === a.password);
  } catch {
    return false;
  }
}

export class CredentialStore {
  private readonly core: k8s.CoreV1Api;
  private readonly rbac: k8s.RbacAuthorizationV1Api;
  private readonly cfg: RuntimeConfig;
  private ownerRef: Promise<k8s.V1OwnerReference> | undefined;

  constructor(kc: k8s.KubeConfig, cfg: RuntimeConfig) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
    this.cfg = cfg;
  }

  /** The agent's ClusterRole as an owner reference (read once: its uid changes only with a new release; a failed read is tried again next time). */
  private owner(): Promise<k8s.V1OwnerReference> {
    this.ownerRef ??= this.readOwner().catch((err: unknown) => {
      this.ownerRef = undefined;
      throw err;
    });
    return this.ownerRef;
  }

  private async readOwner(): Promise<k8s.V1OwnerReference> {
    let role: k8s.V1ClusterRole;
    try {
      role = await this.rbac.readClusterRole({ name: this.cfg.credentials.ownerClusterRole });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      throw new Error(`the ClusterRole ${this.cfg.credentials.ownerClusterRole} does not exist, so the agent cannot give its Secrets an owner that helm uninstall removes; install the agent with the rlmesh-runtime chart`, { cause: err });
    }
    return { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: this.cfg.credentials.ownerClusterRole, uid: role.metadata!.uid! };
  }

  private async get(namespace: string, name: string): Promise<k8s.V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async readControl(): Promise<ReadResult<ControlCredentials>> {
    const { namespace } = this.cfg;
    const name = this.cfg.credentials.controlSecret;
    return parseControlSecret(await this.get(namespace, name), namespace, name);
  }

  /** Checks the pull Secret in both namespaces (GitOps: delivered by the user). */
  async checkPull(): Promise<ReadResult<true>> {
    const name = this.cfg.credentials.pullSecret;
    for (const ns of [this.cfg.namespace, this.cfg.runsNamespace]) {
      const r = parsePullSecret(await this.get(ns, name), ns, name);
      if (!r.ok) return r;
    }
    return { ok: true, value: true };
  }

  /**
   * Creates or replaces a Secret. `owner`: 'agent' for what the join wrote (owned by the agent's
   * ClusterRole), 'none' for the hook's (uninstall keeps it), 'unchanged' for a rotation, which
   * keeps whoever owns the Secret (a Secret delivered out of band stays the user's).
   */
  private async put(namespace: string, name: string, type: string, stringData: Record<string, string>, annotations: Record<string, string>, owner: 'agent' | 'none' | 'unchanged'): Promise<void> {
    const data = Object.fromEntries(Object.entries(stringData).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
    const existing = await this.get(namespace, name);
    // a rotation keeps the Secret's labels, adding only the commonLabels it lacks
    const common = this.cfg.pods?.commonLabels;
    const ownership =
      owner === 'unchanged' && existing
        ? { labels: withCommonLabels(existing.metadata?.labels ?? {}, common), ownerReferences: existing.metadata?.ownerReferences ?? [] }
        : { labels: withCommonLabels(LABELS, common), ownerReferences: owner === 'none' ? [] : [await this.owner()] };
    if (owner === 'unchanged' && existing && !isAgentsSecret(existing, this.cfg.credentials.ownerClusterRole)) {
      throw deliveredOutOfBand(`${namespace}/${name}`);
    }
    const body: k8s.V1Secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace, annotations, ...ownership }, type, data };
    if (existing && (existing.type ?? 'Opaque') !== type) {
      // a Secret's type is immutable, and the agent may not delete Secrets
      throw new Error(
        `Secret ${namespace}/${name} exists with type ${existing.type ?? 'Opaque'} but must be ${type}: delete it (kubectl -n ${namespace} delete secret ${name}) and the agent writes it again`,
      );
    }
    if (existing) {
      await this.core.replaceNamespacedSecret({ namespace, name, body: { ...body, metadata: { ...body.metadata, annotations: { ...existing.metadata?.annotations, ...annotations } } } });
    } else {
      try {
        await this.core.createNamespacedSecret({ namespace, body });
      } catch (err) {
        if (!isConflict(err)) throw err;
        await this.core.replaceNamespacedSecret({ namespace, name, body });
      }
    }
  }

  /** Writes everything a join returned. The control Secret goes last: its token hash marks the join complete. */
  async writeJoined(r: JoinResult, joinTokenHash: string): Promise<void> {
    const { namespace, credentials, observability } = this.cfg;
    await allWritten([
      this.writePull(r.pull),
      observability.enabled && r.relay ? this.put(namespace, credentials.relaySecret, 'Opaque', { [RELAY_KEY]: r.relay }, {}, 'agent') : undefined,
    ]);
    await this.put(namespace, credentials.controlSecret, 'Opaque', controlSecretData(r.control, r.clusterId), { [TOKEN_HASH_ANNOTATION]: joinTokenHash }, 'agent');
  }

  async writePull(dockerconfigjson: string, owner: 'agent' | 'unchanged' = 'agent'): Promise<void> {
    const { namespace, runsNamespace, credentials } = this.cfg;
    const data = { [PULL_KEY]: dockerconfigjson };
    await allWritten([
      this.put(namespace, credentials.pullSecret, PULL_SECRET_TYPE, data, {}, owner),
      this.put(runsNamespace, credentials.pullSecret, PULL_SECRET_TYPE, data, {}, owner),
      this.put(namespace, credentials.crdHookPullSecret, PULL_SECRET_TYPE, data, {}, 'none'),
    ]);
  }

  /**
   * The Secrets a rotation of `purpose` goes into, when the operator delivered them: the agent does not write
   * those (undefined: they are the agent's, or do not exist yet, and writeRotation writes them).
   */
  async operatorSecret(purpose: CredentialPurpose, value: string): Promise<OperatorSecret | undefined> {
    const { namespace, runsNamespace, credentials } = this.cfg;
    const [name, key, namespaces] =
      purpose === 'control' ? [credentials.controlSecret, CONTROL_KEY, [namespace]] : purpose === 'pull' ? [credentials.pullSecret, PULL_KEY, [namespace, runsNamespace]] : [credentials.relaySecret, RELAY_KEY, [namespace]];
    const found = await Promise.all(namespaces.map(async (ns) => ({ ns, secret: await this.get(ns, name) })));
    const theirs = found.filter((f) => f.secret && !isAgentsSecret(f.secret, credentials.ownerClusterRole));
    if (!theirs.length) return undefined;
    return { secrets: found.map((f) => `${f.ns}/${name}`), key, holds: found.every((f) => f.secret !== undefined && holdsValue(f.secret, purpose, key, value)) };
  }

  /** A rotation the control plane sent over the session (checked: lib/credential-rotation.ts), for Secrets the agent owns. */
  async writeRotation(purpose: CredentialPurpose, value: string): Promise<void> {
    const { namespace, credentials } = this.cfg;
    // before any write: a pull rotation writes the hook's copy too, which must not change alone
    const theirs = await this.operatorSecret(purpose, value);
    if (theirs) throw deliveredOutOfBand(theirs.secrets.join(' and '));
    if (purpose === 'control') {
      const current = await this.get(namespace, credentials.controlSecret);
      const cur = parseControlSecret(current, namespace, credentials.controlSecret);
      if (!cur.ok) throw new Error(`cannot store the rotated control credential: ${cur.problem}`);
      await this.put(namespace, credentials.controlSecret, 'Opaque', controlSecretData(value, cur.value.clusterId), {}, 'unchanged');
    } else if (purpose === 'pull') {
      await this.writePull(value, 'unchanged');
    } else {
      await this.put(namespace, credentials.relaySecret, 'Opaque', { [RELAY_KEY]: value }, {}, 'unchanged');
    }
  }
}

const deliveredOutOfBand = (secrets: string): Error =>
  new Error(`Secret ${secrets} was delivered out of band (it has neither the agent's owner reference nor its managed-by label), so the agent does not write it: write the rotated value into it yourself`);

/**
 * Independent Secret writes at once (each is a read and a write on the API; one
 * after another they were most of a join's wait). Settles only when every write
 * has, so a retry never overlaps a write still in flight, then throws the first
 * failure.
 */
async function allWritten(writes: (Promise<void> | undefined)[]): Promise<void> {
  const failed = (await Promise.allSettled(writes)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
