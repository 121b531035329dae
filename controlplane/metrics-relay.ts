// The metrics relay: Prometheus remote write 1.0 from a cluster's
// rlmesh-observability chart, at POST /v1/cells/<cluster id>/metrics.
// The body is a snappy-compressed (block format) protobuf WriteRequest; the
// bearer is the cluster's relay credential (Secret rlmesh-cluster-relay-secret,
// which Prometheus rereads from its file on every request). Answers follow the
// protocol: 204 stored; 400 and 401 are final (Prometheus drops the batch and
// counts it failed); 5xx would be retried.
import { fromBinary } from '@bufbuild/protobuf';
import type { ConnectNodeAdapterOptions } from '@connectrpc/connect-node';
import { uncompress } from 'snappyjs';
import { WriteRequestSchema } from '../lib/gen/prometheus/remote_pb.ts';
import type { Store } from './store.ts';
import { errorMessage } from '../lib/error-fields.ts';

/** What connect-node's fallback handler gets: node:http or node:http2 (compat) objects. */
type FallbackHandler = NonNullable<ConnectNodeAdapterOptions['fallback']>;
export type RelayRequest = Parameters<FallbackHandler>[0];
export type RelayResponse = Parameters<FallbackHandler>[1];

const PATH = /^\/v1\/cells\/([A-Za-z0-9_-]{1,128})\/metrics\/?$/;

/** The cluster id of a relay path, or undefined when the path is not the relay's. */
export function relayClusterId(pathname: string): string | undefined {
  return PATH.exec(pathname)?.[1];
}

export type RelayVerdict = { ok: true } | { ok: false; code: string; message: string };
/** Is `bearer` a valid relay credential of `clusterId`? A verdict explains a refusal. */
export type RelayVerifier = (clusterId: string, bearer: string) => boolean | RelayVerdict;

export type ReceivedSeries = { labels: Record<string, string>; samples: { value: number; timestampMs: number }[] };
export type ReceivedWrite = { clusterId: string; series: ReceivedSeries[]; metadata: number };
export interface RelaySink {
  record(write: ReceivedWrite): void;
}

export type RelayDeps = {
  verify: RelayVerifier;
  sink: RelaySink;
  /** Largest compressed body accepted (default 16 MiB). */
  maxBodyBytes?: number;
  /** Largest decompressed WriteRequest accepted (default 64 MiB). */
  maxDecodedBytes?: number;
};

const relayHelp =
  'Prometheus reads it from /etc/rlmesh/relay/relay-secret (Secret rlmesh-cluster-relay-secret, key relay-secret, written by the agent when the runtime is installed with observability.enabled=true)';

/** Verifies relay credentials against the control plane's store (rotation keeps the old one for 24 h). */
export function storeRelayVerifier(store: Store): RelayVerifier {
  return (clusterId, bearer) => {
    const r = store.authenticate('relay', bearer);
    if (r.ok) {
      if (r.clusterId === clusterId) return { ok: true };
      return { ok: false, code: 'credential_wrong_cluster', message: `the relay credential belongs to another cluster, not ${clusterId}: set prometheus.clusterLabel and the remote-write URL to the cluster the credential was issued to` };
    }
    switch (r.cause) {
      case 'unknown':
        return { ok: false, code: 'credential_invalid', message: `the relay credential is not one this control plane issued: ${relayHelp}; reinstall the runtime with observability.enabled=true and a new install command if the Secret is missing or stale` };
      case 'expired':
        return { ok: false, code: 'credential_expired', message: `the relay credential was rotated at ${r.supersededAt} and stopped being valid at ${r.validUntil}: write the current value into Secret rlmesh-cluster-relay-secret (the agent does it on rotation; check its log)` };
      case 'revoked':
        return {
          ok: false,
          code: 'credential_revoked',
          message:
            r.reason === 'rejoined'
              ? `the relay credential was revoked at ${r.at}: the cluster joined again and its agent wrote the new one into the relay Secret (rlmesh-cluster-relay-secret); have Prometheus read it from there`
              : `the relay credential was revoked at ${r.at}: reconnect the cluster with a new install command`,
        };
      case 'archived':
        return { ok: false, code: 'cluster_archived', message: `cluster ${r.clusterId} was archived at ${r.at} and takes no metrics: uninstall rlmesh-observability or connect the cluster again` };
    }
  };
}

function send(res: RelayResponse, status: number, body?: { code: string; message: string }): void {
  if (body === undefined) {
    res.writeHead(status);
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

class BodyTooLarge extends Error {}

async function readBody(req: RelayRequest, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Handles one remote-write request for `clusterId` (taken from the path by relayClusterId). */
export async function handleRemoteWrite(req: RelayRequest, res: RelayResponse, clusterId: string, deps: RelayDeps): Promise<void> {
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    send(res, 405, { code: 'method_not_allowed', message: `${req.method} is not supported here: Prometheus remote write sends POST /v1/cells/<cluster id>/metrics` });
    return;
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''));
  if (!m) {
    send(res, 401, { code: 'unauthenticated', message: `remote write needs "authorization: Bearer <relay credential>": set authorization.credentials_file in prometheus.remoteWrite; ${relayHelp}` });
    return;
  }
  const verdict = deps.verify(clusterId, m[1]!);
  if (verdict !== true && (verdict === false || !verdict.ok)) {
    const v = verdict === false ? { code: 'credential_invalid', message: `the relay credential is not valid for cluster ${clusterId}: ${relayHelp}` } : verdict;
    send(res, 401, { code: v.code, message: v.message });
    return;
  }
  const encoding = String(req.headers['content-encoding'] ?? '').toLowerCase();
  if (encoding !== 'snappy') {
    send(res, 400, { code: 'bad_encoding', message: `the body must be snappy-compressed (content-encoding: snappy), got "${encoding || 'none'}": send Prometheus remote write 1.0` });
    return;
  }
  const maxBody = deps.maxBodyBytes ?? 16 * 1024 * 1024;
  let body: Buffer;
  try {
    body = await readBody(req, maxBody);
  } catch (err) {
    if (!(err instanceof BodyTooLarge)) throw err;
    send(res, 413, { code: 'too_large', message: `the body exceeds ${maxBody} bytes: lower queue_config.max_samples_per_send in prometheus.remoteWrite` });
    return;
  }
  let write: ReceivedWrite;
  try {
    const request = fromBinary(WriteRequestSchema, uncompress(body, deps.maxDecodedBytes ?? 64 * 1024 * 1024));
    write = {
      clusterId,
      metadata: request.metadata.length,
      series: request.timeseries.map((ts) => ({
        labels: Object.fromEntries(ts.labels.map((l) => [l.name, l.value])),
        samples: ts.samples.map((s) => ({ value: s.value, timestampMs: Number(s.timestamp) })),
      })),
    };
  } catch (err) {
    send(res, 400, { code: 'malformed_body', message: `the body is not a snappy-compressed protobuf WriteRequest (${errorMessage(err)}): send Prometheus remote write 1.0` });
    return;
  }
  deps.sink.record(write);
  send(res, 204);
}

type SeriesState = { labels: Record<string, string>; samples: number; lastValue: number; lastTimestampMs: number };
type ClusterState = { requests: number; samples: number; metadata: number; droppedSeries: number; series: Map<string, SeriesState> };

/**
 * What the relay received, per cluster, in memory: request and sample counts and
 * the latest sample of each series (at most maxSeriesPerCluster series each).
 */
export class RelaySeriesStore implements RelaySink {
  readonly #clusters = new Map<string, ClusterState>();
  readonly #maxSeries: number;

  constructor(maxSeriesPerCluster = 100_000) {
    this.#maxSeries = maxSeriesPerCluster;
  }

  record(write: ReceivedWrite): void {
    let c = this.#clusters.get(write.clusterId);
    if (!c) {
      c = { requests: 0, samples: 0, metadata: 0, droppedSeries: 0, series: new Map() };
      this.#clusters.set(write.clusterId, c);
    }
    c.requests++;
    c.metadata += write.metadata;
    for (const s of write.series) {
      c.samples += s.samples.length;
      const key = JSON.stringify(Object.entries(s.labels).sort(([a], [b]) => (a < b ? -1 : 1)));
      let st = c.series.get(key);
      if (!st) {
        if (c.series.size >= this.#maxSeries) {
          c.droppedSeries++;
          continue;
        }
        st = { labels: s.labels, samples: 0, lastValue: NaN, lastTimestampMs: -Infinity };
        c.series.set(key, st);
      }
      for (const sample of s.samples) {
        st.samples++;
        if (sample.timestampMs >= st.lastTimestampMs) {
          st.lastValue = sample.value;
          st.lastTimestampMs = sample.timestampMs;
        }
      }
    }
  }

  /** Counts for one cluster (zeros if it never wrote). */
  stats(clusterId: string): { requests: number; samples: number; metadata: number; series: number; droppedSeries: number } {
    const c = this.#clusters.get(clusterId);
    return c
      ? { requests: c.requests, samples: c.samples, metadata: c.metadata, series: c.series.size, droppedSeries: c.droppedSeries }
      : { requests: 0, samples: 0, metadata: 0, series: 0, droppedSeries: 0 };
  }

  /** Series of a cluster whose labels include every pair of `match` (e.g. {__name__: 'up'}). */
  series(clusterId: string, match: Record<string, string> = {}): SeriesState[] {
    const c = this.#clusters.get(clusterId);
    if (!c) return [];
    return [...c.series.values()].filter((s) => Object.entries(match).every(([k, v]) => s.labels[k] === v));
  }
}
