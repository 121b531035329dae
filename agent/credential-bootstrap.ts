// Getting the cluster's credentials at start. With a join token: if the control
// Secret already records this token's hash, use it (a restart or
// `helm upgrade --reuse-values` never re-trades a token); otherwise take the
// join Lease and trade the token once. Without a token (GitOps): wait for the
// Secrets named in the config. Every problem is one log line naming the cause
// and the fix, then a retry with backoff capped at 30 s — never a crash loop.
import { closeSync, fsyncSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join as joinPath } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { createBackoff, sleep } from '../lib/backoff.ts';
import type { AgentConfig } from './config.ts';
import type { ControlCredentials, CredentialStore } from './credentials.ts';
import { tokenHash, type JoinResult } from '../lib/credential-secret.ts';
import { JoinError, fetchInfo, join, type ControlPlaneClient } from './join.ts';
import { acquireJoinLease } from './join-lease.ts';
import { joinPhrase } from './readiness-phrases.ts';
import { errorFields, errorMessage } from '../lib/error-fields.ts';

export type BootstrapDeps = {
  cfg: AgentConfig;
  kc: k8s.KubeConfig;
  store: CredentialStore;
  cp: ControlPlaneClient;
  log: Logger;
  onJoinOutcome: (outcome: string) => void;
  /** not-ready reason while waiting, undefined once credentials are in hand */
  setProblem: (problem: string | undefined) => void;
  agentVersion: string;
  signal?: AbortSignal;
};

export async function obtainCredentials(d: BootstrapDeps): Promise<ControlCredentials> {
  return d.cfg.joinToken ? joinOnce(d, d.cfg.joinToken) : waitForSecrets(d);
}

async function waitForSecrets(d: BootstrapDeps): Promise<ControlCredentials> {
  const { log, store } = d;
  const backoff = createBackoff(d.cfg.timing.backoffBaseMs, d.cfg.timing.backoffMaxMs);
  const fix = 'deliver the Secrets (rlmesh clusters join --token <rlm_jt_…> --format k8s-secret --out rlmesh-secrets.yaml, then kubectl apply -f it) or install with --set joinToken=<rlm_jt_…>';
  for (;;) {
    try {
      const control = await store.readControl();
      const pull = control.ok ? await store.checkPull() : undefined;
      if (control.ok && pull?.ok) return control.value;
      const problem = !control.ok ? control.problem : (pull as { problem: string }).problem;
      d.setProblem(problem);
      const retryInMs = backoff.next();
      log.error({ retryInMs }, `no joinToken was given and ${problem}: ${fix}; the agent stays not ready and checks again`);
      await sleep(retryInMs, d.signal);
    } catch (err) {
      const retryInMs = backoff.next();
      d.setProblem(`cannot read the credential Secrets: ${errorMessage(err)}`);
      log.error({ retryInMs, ...errorFields(err) }, "cannot read the credential Secrets from the Kubernetes API; check the agent's RBAC (Role rlmesh-cluster-agent) and the API server");
      await sleep(retryInMs, d.signal);
    }
    if (d.signal?.aborted) throw new Error('aborted');
  }
}

export const pendingJoinFile = (spoolDir: string) => joinPath(spoolDir, 'join-result.json');

async function joinOnce(d: BootstrapDeps, token: string): Promise<ControlCredentials> {
  const { log, store, cfg } = d;
  const hash = tokenHash(token);
  const backoff = createBackoff(cfg.timing.backoffBaseMs, cfg.timing.backoffMaxMs);
  for (;;) {
    try {
      // an interrupted join for another token holds credentials the new token replaces: removed here, whatever follows
      const saved = readPendingJoin(cfg.spoolDir, hash, log);
      const existing = await store.readControl();
      if (existing.ok && existing.value.tokenHash === hash) {
        if (saved) rmSync(pendingJoinFile(cfg.spoolDir), { force: true }); // written already: the crash came after the Secrets
        log.info({ clusterId: existing.value.clusterId }, 'credentials for this join token are already in the control Secret; not joining again');
        d.onJoinOutcome('reused');
        return existing.value;
      }
      // a join that succeeded before the agent died but whose Secrets were not written yet
      if (saved) {
        await store.writeJoined(saved, hash);
        rmSync(pendingJoinFile(cfg.spoolDir), { force: true });
        log.info({ clusterId: saved.clusterId }, 'finished writing the credentials of an interrupted join');
        d.onJoinOutcome('resumed');
        return { control: saved.control, clusterId: saved.clusterId, tokenHash: hash, resourceVersion: undefined };
      }
      const facts = clusterFacts(d); // read while the Lease is taken
      const lease = await acquireJoinLease({
        kc: d.kc,
        namespace: cfg.runtime.namespace,
        holder: cfg.podName,
        durationSeconds: cfg.timing.leaseSeconds,
        commonLabels: cfg.runtime.pods?.commonLabels,
        log,
        signal: d.signal,
      });
      try {
        const again = await store.readControl();
        if (again.ok && again.value.tokenHash === hash) continue; // another replica joined meanwhile
        d.setProblem('joining the control plane');
        log.info(
          { controlPlane: d.cp.baseUrl, replacing: existing.ok ? existing.value.clusterId : undefined },
          existing.ok ? 'a new join token was given: joining again and replacing the credentials' : 'joining the control plane with the join token',
        );
        // the token is spent only with a control plane whose session endpoint and registry are this installation's (fetchInfo checks both)
        await fetchInfo(d.cp);
        const result = await join(d.cp, token, await facts);
        savePendingJoin(cfg, hash, result);
        await store.writeJoined(result, hash);
        rmSync(pendingJoinFile(cfg.spoolDir), { force: true });
        log.info({ clusterId: result.clusterId, withRelayCredential: result.relay !== undefined }, 'joined: credentials written to the control, pull and registry Secrets');
        d.onJoinOutcome('joined');
        return { control: result.control, clusterId: result.clusterId, tokenHash: hash, resourceVersion: undefined };
      } finally {
        // not waited for: the Secrets are written (or the attempt failed), and the Lease only keeps another
        // replica from trading the token meanwhile; a release that fails is logged and the Lease expires
        void lease.release();
      }
    } catch (err) {
      const retryInMs = err instanceof JoinError && err.permanent ? cfg.timing.backoffMaxMs : backoff.next();
      if (err instanceof JoinError) {
        d.onJoinOutcome(err.code);
        d.setProblem(joinPhrase(err.code));
        log.error({ code: err.code, retryInMs }, err.message);
      } else {
        d.onJoinOutcome('error');
        d.setProblem(joinPhrase(undefined));
        log.error({ retryInMs, ...errorFields(err) }, "join failed while reading or writing the credential Secrets or the join Lease; check the agent's RBAC and the API server; retrying");
      }
      await sleep(retryInMs, d.signal);
      if (d.signal?.aborted) throw new Error('aborted');
    }
  }
}

async function clusterFacts(d: BootstrapDeps): Promise<Record<string, unknown>> {
  const facts: Record<string, unknown> = { agentVersion: d.agentVersion, observability: d.cfg.runtime.observability.enabled };
  try {
    const v = await d.kc.makeApiClient(k8s.VersionApi).getCode();
    facts.kubernetesVersion = v.gitVersion;
    facts.platform = v.platform;
  } catch {
    // facts are informative; a join does not wait for them
  }
  return facts;
}

function savePendingJoin(cfg: AgentConfig, hash: string, r: JoinResult) {
  const fd = openSync(pendingJoinFile(cfg.spoolDir), 'w', 0o600);
  try {
    writeSync(fd, JSON.stringify({ tokenHash: hash, result: r }));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * The saved answer of an interrupted join with the token whose hash is `hash`.
 * A file saved for another token (the token changed: helm upgrade --install
 * with a new install command) or one that cannot be read is removed: it holds
 * credentials that will never be written, and no credential stays at rest on
 * the spool longer than the join that needs it.
 */
export function readPendingJoin(spoolDir: string, hash: string, log: Logger): JoinResult | undefined {
  const file = pendingJoinFile(spoolDir);
  let saved: { tokenHash?: string; result?: JoinResult };
  try {
    saved = JSON.parse(readFileSync(file, 'utf8')) as { tokenHash?: string; result?: JoinResult };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    rmSync(file, { force: true });
    log.warn({ file }, 'removed an unreadable saved join answer from the spool; the agent joins with the token again');
    return undefined;
  }
  if (saved.tokenHash === hash && saved.result) return saved.result;
  rmSync(file, { force: true });
  log.info({ file }, 'removed the saved answer of an interrupted join with another join token: the token changed, so those credentials are never used');
  return undefined;
}

