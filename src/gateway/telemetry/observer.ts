import type { LegacyObserver } from '../legacy/session-ports';
import type { ResultsSocketHooks } from '../legacy/results-socket';
import type { GatewayMetrics } from './metrics';
import type { DeprecationUsage } from './usage';

/** Endpoint name of the results socket in counters and the report. */
export const RESULTS_SOCKET_ENDPOINT = 'WS /v0.2/ws/streams/:id';

/** The legacy adapter's events → Prometheus metrics and per-key deprecation counters. */
export function telemetryObserver(metrics: GatewayMetrics, usage: DeprecationUsage): LegacyObserver {
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
    tickSkipped() {
      metrics.ticksSkipped.inc();
    },
    tickLateness(ms) {
      metrics.tickLateness.observe(Math.max(0, ms) / 1000);
    },
    upstreamError(status) {
      metrics.upstreamErrors.inc({ source: 'legacy', status: String(status) });
    },
  };
}

/** Results-socket events → metrics, and a per-key connection count (the key comes from the session). */
export function socketTelemetry(metrics: GatewayMetrics, usage: DeprecationUsage): ResultsSocketHooks {
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
  };
}
