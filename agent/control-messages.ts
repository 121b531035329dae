// What the agent does with each message the control plane sends on the
// session: acks release spooled updates, assignments become RLMeshEvaluations,
// cancellations stop them, a rotated credential is written to its Secret,
// used, and confirmed, and the cluster's state (draining) is logged and exported.
import { create } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Logger } from 'pino';
import { errorFields } from '../lib/error-fields.ts';
import { CredentialRotatedSchema, type ControlMessage } from '../lib/gen/rlmesh/v1/session_pb.ts';
import type { Assignments } from './assignments.ts';
import type { CredentialWatch } from './credential-watch.ts';
import { tokenHash } from '../lib/credential-secret.ts';
import type { CredentialStore } from './credentials.ts';
import type { EvaluationStatus } from './evaluation-updates.ts';
import type { Metrics } from './metrics.ts';
import type { Retrying } from './retrying.ts';
import type { Session } from './control-plane-session.ts';
import type { Spool } from './spool.ts';

export type ControlMessageParts = {
  log: Logger;
  session: Pick<Session, 'acked' | 'send'>;
  spool: Pick<Spool, 'ack'>;
  evaluations: Pick<EvaluationStatus, 'reported'>;
  assignments: Pick<Assignments, 'assign' | 'cancel'>;
  store: Pick<CredentialStore, 'writeRotation'>;
  credWatch: Pick<CredentialWatch, 'use' | 'credentials'>;
  metrics: Pick<Metrics, 'updatesAcked' | 'assignments' | 'draining'>;
  retrying: Retrying;
};

export function controlMessageHandler(p: ControlMessageParts): (m: ControlMessage) => void {
  // the control plane sends an unconfirmed rotation again while the session lives: one writer per value
  const rotationsInFlight = new Set<string>();
  let draining: boolean | undefined;

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
        p.retrying(`assignment ${a.evaluationId}`, () => p.assignments.assign(a)).then(
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
        const r = m.msg.value;
        const key = `${r.purpose}:${tokenHash(r.value)}`;
        if (rotationsInFlight.has(key)) return;
        rotationsInFlight.add(key);
        void (async () => {
          // until stored: a rotation given up on leaves the agent with a credential that expires after the overlap
          await p.retrying(`storing the rotated ${r.purpose} credential`, () => p.store.writeRotation(r.purpose, r.value), { forever: true });
          if (r.purpose === 'control') p.credWatch.use({ ...p.credWatch.credentials, control: r.value });
          p.session.send({ case: 'credentialRotated', value: create(CredentialRotatedSchema, { purpose: r.purpose }) });
          p.log.info({ purpose: r.purpose }, 'rotated credential written to its Secret');
        })()
          .catch(() => undefined)
          .finally(() => rotationsInFlight.delete(key));
        return;
      }
      case 'clusterState': {
        const { drainingSince } = m.msg.value;
        const now = m.msg.value.draining;
        p.metrics.draining.set(now ? 1 : 0);
        if (now === draining) return;
        if (now) {
          const since = drainingSince ? timestampDate(drainingSince).toISOString() : 'now';
          p.log.warn({ drainingSince: since }, 'the platform is draining this cluster: no new evaluations arrive, those running finish; once GET /v1/clusters shows none unfinished, helm uninstall is safe');
        } else if (draining) {
          p.log.info('the platform ended the drain: this cluster takes new evaluations again');
        }
        draining = now;
        return;
      }
      default:
        return;
    }
  };
}
