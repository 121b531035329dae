// What the agent does with each message the control plane sends on the
// session: acks release spooled updates, assignments become RLMeshEvaluations,
// cancellations stop them, a rotated credential is checked, written to its
// Secret, used, and confirmed, and the cluster's state (draining) is logged and
// exported, the platform's output hosts go to the egress proxy (output-hosts.ts). While the cluster drains (the platform said so, or the operator ran
// rlmesh drain) a new assignment is refused and reported (agent/drain-refusal.ts):
// a platform that keeps sending gets each one back as Failed.
//
// A rotation that fails the check (lib/credential-rotation.ts) is refused once:
// nothing is written, one error log line says why (without the value), and it
// is not confirmed. The protocol has no refusal message (CredentialRotated only
// confirms), so not confirming is the honest answer: the control plane keeps
// the rotation unconfirmed, which is true, and the credential in use keeps
// working until its overlap ends. The control plane re-sends an unconfirmed
// rotation every minute; a value already refused is dropped without a retry or
// another log line.
//
// A rotation for a Secret the operator delivered (GitOps, a secret manager) is
// not written: a sync would write its own value back. The agent says once what
// the operator must do (which Secret, which key, before when; never the value),
// shows it in its status as awaiting-secret, and checks the Secret again on each
// resend: once it holds the value, the rotation is confirmed. The control
// Secret is watched (credential-watch.ts), so the agent switches to the new
// value without a restart, and back to the old one should a sync restore it
// within the overlap.
import { create } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Logger } from 'pino';
import { errorFields } from '../lib/error-fields.ts';
import { CredentialRotatedSchema, type ControlMessage, type CredentialRotation } from '../lib/gen/rlmesh/v1/session_pb.ts';
import type { OperatorDrain } from '../lib/operator-drain.ts';
import type { Assignments } from './assignments.ts';
import { drainRefusal, type PlatformDrain } from './drain-refusal.ts';
import type { CredentialWatch } from './credential-watch.ts';
import { CREDENTIAL_PURPOSES, tokenHash } from '../lib/credential-secret.ts';
import { checkRotation } from '../lib/credential-rotation.ts';
import type { CredentialStore } from './credentials.ts';
import type { EvaluationStatus } from './evaluation-updates.ts';
import type { Metrics } from './metrics.ts';
import type { OutputHostsPublisher } from './output-hosts.ts';
import type { Retrying } from './retrying.ts';
import type { Session } from './control-plane-session.ts';
import type { Spool } from './spool.ts';
import type { RotationLog } from './status-publisher.ts';

export type ControlMessageParts = {
  log: Logger;
  session: Pick<Session, 'acked' | 'send'>;
  spool: Pick<Spool, 'ack'>;
  evaluations: Pick<EvaluationStatus, 'reported'>;
  assignments: Pick<Assignments, 'assign' | 'cancel'>;
  store: Pick<CredentialStore, 'writeRotation' | 'operatorSecret'>;
  credWatch: Pick<CredentialWatch, 'use' | 'credentials'>;
  metrics: Pick<Metrics, 'updatesAcked' | 'assignments' | 'draining' | 'credentialValidUntil'>;
  retrying: Retrying;
  /** controlPlane.registryHost: the one registry a rotated pull credential may be for */
  registryHost: string;
  /** told of each rotation being stored, stored, or refused (for the agent's status ConfigMap) */
  rotations?: Pick<RotationLog, 'storing' | 'stored' | 'refused' | 'awaitingSecret'>;
  /** told whether the platform drains this cluster (and since when), on each ClusterState */
  onDraining?: (draining: boolean, since?: string) => void;
  /** the operator's drain (rlmesh drain), asked as each new assignment is handled; throws while not read yet (the assignment is retried) */
  operatorDrain?: () => OperatorDrain | null;
  /** where the platform's output hosts go for the egress proxy, on each OutputHosts */
  outputHosts?: Pick<OutputHostsPublisher, 'publish'>;
  /** the release namespace, which an operator-drain refusal names */
  namespace?: string;
};

/** How many refused rotations (purpose and value hash) are remembered: a bound, whatever the control plane sends. */
const MAX_REFUSED = 64;

export function controlMessageHandler(p: ControlMessageParts): (m: ControlMessage) => void {
  // the control plane sends an unconfirmed rotation again while the session lives: one writer per value
  const rotationsInFlight = new Set<string>();
  let draining: boolean | undefined;
  // what the platform last said; an assignment is judged by the drain as it stood when the assignment arrived
  let platformDrain: PlatformDrain = null;
  const refused = new Set<string>();
  // rotations whose operator-delivered Secret was named in a log line already: one line per value
  const announced = new Set<string>();

  return (m) => {
    switch (m.msg.case) {
      case 'welcome':
        p.log.debug({ sessionId: m.msg.value.sessionId, pingIntervalSeconds: m.msg.value.pingIntervalSeconds }, 'welcome');
        return;
      case 'ack': {
        const ids = m.msg.value.ids;
        p.session.acked(ids);
        p.spool.ack(ids).then(
          (acked) => {
            p.metrics.updatesAcked.inc(acked.length);
            if (acked.length) void p.evaluations.reported(acked);
          },
          (err: unknown) => p.log.error(errorFields(err), 'could not record acks in the spool; they will be redelivered and deduplicated'),
        );
        return;
      }
      case 'assignment': {
        const a = m.msg.value;
        const platform = platformDrain;
        const drained = () => drainRefusal(platform, p.operatorDrain?.() ?? null, p.namespace ?? 'rlmesh-system');
        p.retrying(`assignment ${a.evaluationId}`, () => p.assignments.assign(a, drained)).then(
          () => p.metrics.assignments.inc({ outcome: 'accepted' }),
          () => p.metrics.assignments.inc({ outcome: 'failed' }),
        );
        return;
      }
      case 'cancellation': {
        const c = m.msg.value;
        void p.retrying(`cancellation ${c.evaluationId}`, () => p.assignments.cancel(c)).catch(() => undefined);
        return;
      }
      case 'credentialRotation': {
        const key = `${m.msg.value.purpose}:${tokenHash(m.msg.value.value)}`;
        if (rotationsInFlight.has(key) || refused.has(key)) return;
        const checked = checkRotation(m.msg.value, p.registryHost);
        if (!checked.ok) {
          if (refused.size >= MAX_REFUSED) refused.clear();
          refused.add(key);
          pendingUntil(p.metrics, m.msg.value);
          refuse(p.log, m.msg.value, checked.problem);
          p.rotations?.refused(m.msg.value.purpose, checked.problem);
          return;
        }
        const r = checked.rotation;
        rotationsInFlight.add(key);
        pendingUntil(p.metrics, m.msg.value);
        const until = m.msg.value.oldValidUntil ? timestampDate(m.msg.value.oldValidUntil).toISOString() : undefined;
        const confirm = (line: string) => {
          p.metrics.credentialValidUntil.set({ purpose: r.purpose }, 0);
          p.session.send({ case: 'credentialRotated', value: create(CredentialRotatedSchema, { purpose: r.purpose }) });
          p.rotations?.stored(r.purpose);
          p.log.info({ purpose: r.purpose }, line);
        };
        p.rotations?.storing(r.purpose);
        void (async () => {
          // until stored: a rotation given up on leaves the agent with a credential that expires after the overlap
          const theirs = await p.retrying(
            `storing the rotated ${r.purpose} credential`,
            async () => {
              const delivered = await p.store.operatorSecret(r.purpose, r.value);
              if (!delivered) await p.store.writeRotation(r.purpose, r.value);
              return delivered;
            },
            { forever: true },
          );
          if (theirs) {
            if (theirs.holds) return confirm(`the rotated ${r.purpose} credential is in ${theirs.secrets.join(' and ')} (delivered out of band): confirmed`);
            p.rotations?.awaitingSecret(r.purpose, { secrets: theirs.secrets, key: theirs.key, ...(until ? { until } : {}) }, tokenHash(r.value));
            if (announced.has(key)) return;
            if (announced.size >= MAX_REFUSED) announced.clear();
            announced.add(key);
            p.log.warn(
              { purpose: r.purpose, secrets: theirs.secrets, key: theirs.key, ...(until ? { currentValidUntil: until } : {}) },
              `rotation pending: the control plane rotated the ${r.purpose} credential, and ${theirs.secrets.join(' and ')} is delivered out of band (GitOps, a secret manager), so the agent does not write it. ` +
                `Write the new value (the cluster's Settings, or the rotate call's answer) into ${theirs.secrets.length > 1 ? 'each, ' : ''}key "${theirs.key}"${until ? ` before ${until}, when the value in it now stops working` : ' before the overlap ends'}; ` +
                `${r.purpose === 'control' ? 'the agent follows the control Secret without a restart' : 'the agent confirms the rotation once the Secret holds it'}`,
            );
            return;
          }
          if (r.purpose === 'control') p.credWatch.use({ ...p.credWatch.credentials, control: r.value });
          confirm('rotated credential written to its Secret');
        })()
          .catch(() => undefined)
          .finally(() => rotationsInFlight.delete(key));
        return;
      }
      case 'clusterState': {
        const { drainingSince } = m.msg.value;
        const now = m.msg.value.draining;
        const since = drainingSince ? timestampDate(drainingSince).toISOString() : undefined;
        platformDrain = now ? (since ? { since } : {}) : null;
        p.metrics.draining.set(now ? 1 : 0);
        p.onDraining?.(now, since);
        if (now === draining) return;
        if (now) {
          p.log.warn({ drainingSince: since ?? 'now' }, 'the platform is draining this cluster: no new evaluations arrive, those running finish; once GET /v1/clusters shows none unfinished, helm uninstall is safe');
        } else if (draining) {
          p.log.info('the platform ended the drain: this cluster takes new evaluations again');
        }
        draining = now;
        return;
      }
      case 'outputHosts':
        p.outputHosts?.publish(m.msg.value.hosts, 'the session');
        return;
      default:
        return;
    }
  };
}

/**
 * rlmesh_agent_credential_valid_until_seconds: a rotation not yet stored leaves the value in use
 * valid until its overlap ends (oldValidUntil); the RLMeshCredentialNearExpiry alert watches it.
 * Purposes this agent does not know are not labels (a hostile peer could grow the series).
 */
function pendingUntil(metrics: Pick<Metrics, 'credentialValidUntil'>, r: CredentialRotation): void {
  if (!r.oldValidUntil || !(CREDENTIAL_PURPOSES as readonly string[]).includes(r.purpose)) return;
  metrics.credentialValidUntil.set({ purpose: r.purpose }, timestampDate(r.oldValidUntil).getTime() / 1000);
}

function refuse(log: Logger, r: CredentialRotation, problem: string): void {
  const known = (CREDENTIAL_PURPOSES as readonly string[]).includes(r.purpose);
  const what = known ? `the rotated ${r.purpose} credential` : `a credential rotation for purpose ${JSON.stringify(r.purpose.slice(0, 40))}`;
  const until = r.oldValidUntil ? timestampDate(r.oldValidUntil).toISOString() : undefined;
  const fix = known
    ? `rotate the ${r.purpose} credential again; if that is refused too, report it to the platform, and before the overlap ends run a New install command (new credentials) or write a valid value into the Secret`
    : 'the control plane is newer than this agent: upgrade the chart to the version its New install command names';
  log.error(
    { purpose: known ? r.purpose : 'unknown', ...(until ? { currentValidUntil: until } : {}) },
    `refused ${what} from the control plane: ${problem}. Nothing was written and it is not confirmed; the credential in use stays valid${until ? ` until ${until}` : ' until its overlap ends'}. To fix: ${fix}`,
  );
}
