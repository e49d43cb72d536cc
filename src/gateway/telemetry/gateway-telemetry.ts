/**
 * The gateway's telemetry, built first because everything else reports to it: the metrics, the
 * store with every call timed (and its outages seen), the deprecation counters and their daily
 * rollup, the upstream probe, the sunset admission counted, and the observer of legacy streams.
 */
import type { Brand } from '../../brand';
import type { Config } from '../../config';
import type { Logger } from '../../lib/logger';
import type { Clock } from '../../lib/timers';
import { failureCause } from '../../upstream/client';
import type { UpstreamClient } from '../../upstream/client';
import { legacyEndReasons, SunsetPolicy } from '../legacy';
import type { LegacyObserver } from '../legacy';
import { measuredStore } from '../store/measured';
import { StoreHealth } from '../store/outage';
import type { Store } from '../store/store';
import { deprecationHeaders } from './deprecation';
import { GatewayMetrics } from './metrics';
import { countedAdmission, fanOut, telemetryObserver } from './observer';
import { DeprecationRollup } from './rollup';
import { DeprecationUsage } from './usage';
import { UpstreamHealth } from './upstream-health';

export interface TelemetryDeps {
  brand: Brand;
  /** The store as given: it comes back measured. */
  store: Store;
  upstream: UpstreamClient;
  /** Further observers of legacy streams, each called after the gateway's own, in order. */
  observers?: ReadonlyArray<LegacyObserver | undefined>;
  clock?: Clock;
}

export type GatewayTelemetry = ReturnType<typeof gatewayTelemetry>;

export function gatewayTelemetry(cfg: Config, logger: Logger, deps: TelemetryDeps) {
  const { brand, upstream, clock } = deps;
  const metrics = new GatewayMetrics({ endReasons: Object.values(legacyEndReasons(brand)), sunsetMs: Date.parse(cfg.deprecation.sunset) });
  // Outages as this replica sees them: the lease check never ends a stream because the store was away.
  const storeHealth = new StoreHealth({ clock });
  // Every store call timed and its failures counted (gateway_store_*).
  const store = measuredStore(deps.store, {
    call: (op, seconds, failed) => {
      metrics.store.call(op, seconds, failed);
      storeHealth.call(op, seconds, failed);
    },
  });
  const usage = new DeprecationUsage(store, logger.child({ component: 'telemetry' }), clock);
  const deprecation = { date: cfg.deprecation.date, sunset: cfg.deprecation.sunset, link: cfg.deprecation.link };
  const rollup = new DeprecationRollup({
    usage,
    store,
    logger: logger.child({ component: 'deprecation' }),
    deprecation,
    cron: cfg.telemetry.rollupCron,
    timezone: cfg.telemetry.rollupTimezone,
    clock,
  });
  const upstreamHealth = new UpstreamHealth(() => upstream.listModels(), {
    intervalMs: cfg.telemetry.upstreamProbeMs,
    clock,
    onChange: (up, err) => {
      const url = upstream.baseUrl;
      if (up) return logger.info({ upstream: url }, `upstream probe: ${url} reachable`);
      const cause = failureCause(err);
      logger.warn({ upstream: url, cause }, `upstream probe: ${url} unreachable: ${cause} (readiness unaffected)`);
    },
  });
  metrics.observe({
    upstreamUp: () => (upstreamHealth.up === undefined ? undefined : Number(upstreamHealth.up)),
    deprecatedKeys: () => usage.keyCount(),
    migrationStatuses: () => usage.statusCounts(),
  });
  const sunset = new SunsetPolicy(cfg.deprecation, clock);
  return {
    metrics,
    store,
    storeHealth,
    usage,
    rollup,
    upstreamHealth,
    sunset,
    /** The `Deprecation` / `Sunset` / `Link` headers of /v0.2 responses and results-socket upgrades. */
    headers: deprecationHeaders(cfg.deprecation),
    /** The `deprecation` settings the admin report shows. */
    deprecation,
    /** Sunset and brownout refusals, each one counted. */
    admission: countedAdmission(sunset, metrics, usage),
    observer: fanOut([telemetryObserver(metrics, usage), ...(deps.observers ?? [])]),
  };
}
