import { parseBearer } from '../../lib/bearer';
import { memoKeyHash } from '../../lib/keys';
import { tryLaterClose } from '../legacy';
import type { LegacyClose, LegacyObserver, ResultsSocketHooks, SunsetPolicy } from '../legacy';
import type { PassthroughEvent } from '../passthrough';
import type { StreamRecord } from '../store/store';
import type { GatewayMetrics } from './metrics';
import { clientFamily } from './migration';
import type { UsageRecorder } from './usage-recorder';

/** Endpoint name of the results socket in counters and the report. */
export const RESULTS_SOCKET_ENDPOINT = 'WS /v0.2/ws/streams/:id';

/** One observer that hands every event to each of `observers`, in order (absent ones skipped). */
export function fanOut(observers: ReadonlyArray<LegacyObserver | undefined>): LegacyObserver {
  const list = observers.filter((o): o is LegacyObserver => o !== undefined);
  const each =
    <K extends keyof LegacyObserver>(k: K) =>
    (...args: Parameters<NonNullable<LegacyObserver[K]>>): void => {
      for (const o of list) (o[k] as ((...a: typeof args) => void) | undefined)?.(...args);
    };
  return {
    streamCreated: each('streamCreated'),
    streamEnded: each('streamEnded'),
    inference: each('inference'),
    tickSkipped: each('tickSkipped'),
    rateLimited: each('rateLimited'),
    tickLateness: each('tickLateness'),
    upstreamError: each('upstreamError'),
    upstreamReach: each('upstreamReach'),
    fleetReplicas: each('fleetReplicas'),
    ownedStreamCount: each('ownedStreamCount'),
    streamAdopted: each('streamAdopted'),
    tickFenced: each('tickFenced'),
  };
}

/** The legacy adapter's events (the fleet's included) → Prometheus metrics and per-key deprecation counters. */
export function telemetryObserver(metrics: GatewayMetrics, usage: UsageRecorder): LegacyObserver {
  return {
    streamCreated(keyHash, spec) {
      metrics.streamsCreated.inc({ source: spec.transport, mode: spec.mode });
      for (const field of spec.deprecatedFields) metrics.deprecatedFields.inc({ field });
      usage.streamCreated(keyHash, spec);
    },
    streamEnded(keyHash, reason) {
      metrics.streamsEnded.inc({ reason });
      usage.streamEnded(keyHash, reason);
    },
    inference(e) {
      const outcome = e.ok ? 'ok' : 'error';
      metrics.inferences.inc({ model: e.model, outcome });
      if (e.tokens > 0) metrics.outputTokens.inc({ model: e.model }, e.tokens);
      metrics.inferenceLatency.observe({ model: e.model }, e.inferenceMs / 1000);
      metrics.totalLatency.observe({ model: e.model }, e.totalMs / 1000);
      metrics.resultOverhead.observe(e.overheadMs / 1000);
      usage.inference(e.keyHash, e.ok, e.tokens);
    },
    tickSkipped(_streamId, reason, count = 1) {
      metrics.ticksSkipped.inc({ reason }, count);
    },
    rateLimited(event) {
      metrics.rateLimited.inc({ event });
    },
    tickLateness(ms) {
      metrics.tickLateness.observe(Math.max(0, ms) / 1000);
    },
    upstreamError(status) {
      metrics.upstreamErrors.inc({ source: 'legacy', status: String(status) });
    },
    fleetReplicas(alive) {
      metrics.fleetReplicas.set(alive);
    },
    ownedStreamCount(count) {
      metrics.fleetOwnedStreams.set(count);
    },
    streamAdopted(_streamId, how) {
      metrics.fleetAdoptions.inc({ how });
    },
    tickFenced(reason) {
      metrics.fleetFencedTicks.inc({ reason });
    },
  };
}

/** Results-socket events → metrics, and a per-key connection count (the key comes from the stream's record). */
export function socketTelemetry(metrics: GatewayMetrics, usage: UsageRecorder): ResultsSocketHooks {
  return {
    onOpen(_streamId, rec) {
      metrics.socketsOpened.inc();
      metrics.legacyRequests.inc({ endpoint: RESULTS_SOCKET_ENDPOINT });
      usage.request(rec.keyHash, RESULTS_SOCKET_ENDPOINT, rec.accountId);
      usage.socketOpened(rec.keyHash);
    },
    onShed() {
      metrics.socketsShed.inc();
    },
    onRepeat() {
      metrics.resultsRepeated.inc();
    },
  };
}

/** A legacy HTTP request by endpoint → the request counter and the key's deprecation counters. */
export function requestTelemetry(metrics: GatewayMetrics, usage: UsageRecorder) {
  return (keyHash: string | undefined, endpoint: string, accountId?: string, userAgent?: string): void => {
    metrics.legacyRequests.inc({ endpoint });
    if (keyHash) usage.request(keyHash, endpoint, accountId, clientFamily(userAgent));
  };
}

/**
 * The sunset policy's admission of creates and results sockets, each refusal counted (metric and
 * the key's report row): a create throws the legacy refusal, a socket gets the 1013 close.
 */
export function countedAdmission(sunset: SunsetPolicy, metrics: GatewayMetrics, usage: UsageRecorder) {
  return {
    admitCreate(keyHash: string): void {
      const refusal = sunset.admitCreate(keyHash);
      if (!refusal) return;
      metrics.legacyRefusals.inc({ reason: refusal.reason, kind: 'create' });
      usage.refused(keyHash, refusal.reason);
      throw refusal.error;
    },
    admitSocket(record: StreamRecord): LegacyClose | undefined {
      const refusal = sunset.admitSocket(record.keyHash);
      if (!refusal) return undefined;
      metrics.legacyRefusals.inc({ reason: refusal.reason, kind: 'socket' });
      usage.refused(record.keyHash, refusal.reason);
      return tryLaterClose(refusal.closeReason);
    },
  };
}

/**
 * Migration progress from the passthrough: a successful /v1beta or /billing call made with one of
 * our keys (a refused key counts for nobody), recorded under the key's hash with its client family.
 */
export function passthroughMigration(usage: UsageRecorder, keyPrefix: string) {
  return (e: PassthroughEvent): void => {
    if (e.status < 200 || e.status >= 400) return;
    // The two headers as the passthrough picked them up: `req.headers` is never built on this path.
    const key = parseBearer(e.authorization);
    if (key?.startsWith(keyPrefix)) usage.passthrough(memoKeyHash(key), e.prefix, clientFamily(e.userAgent));
  };
}
