import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import { brandOf } from '../brand';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import { realClock } from '../lib/timers';
import type { Clock } from '../lib/timers';
import { UpstreamClient } from '../upstream/client';
import type { RetryOverride } from '../upstream/retry';
import { callerChecks } from './callers';
import { fleetMember, streamsLink } from './fleet/member';
import type { FleetMember } from './fleet/member';
import { UpstreamReach } from './fleet/upstream-reach';
import { httpApp } from './http-app';
import { WorkerRelay, gatewaySources } from './ingest';
import { LegacyStreams, ResultsSockets, socketAuthorizer } from './legacy';
import type { LegacyObserver, MediaRelay, SunsetPolicy } from './legacy';
import { Lifecycle } from './lifecycle';
import type { LifecycleView } from './lifecycle';
import type { Passthrough } from './passthrough';
import { gatewayShutdown } from './shutdown';
import type { GatewayShutdown } from './shutdown';
import { memoryStore } from './store/memory';
import type { Store } from './store/store';
import { deprecationHeaderLines } from './telemetry/deprecation';
import { gatewayTelemetry } from './telemetry/gateway-telemetry';
import type { GatewayMetrics } from './telemetry/metrics';
import { socketTelemetry } from './telemetry/observer';
import type { DeprecationRollup } from './telemetry/rollup';
import type { DeprecationUsage } from './telemetry/usage';
import type { UpstreamHealth } from './telemetry/upstream-health';

export interface GatewayOptions {
  upstreamUrl: string;
  store?: Store;
  /** The media relay of customer rooms and relay-mode webrtc (tests); default: the supervised media worker. */
  media?: MediaRelay;
  /** The media worker's script and node options (tests run a bundle; default: media-worker.js beside its module). */
  mediaWorker?: { script?: string; execArgv?: string[] };
  /** Extra observer of legacy streams, called besides the gateway's own telemetry. */
  observer?: LegacyObserver;
  /** Shrinks upstream retry waits (tests). */
  retry?: RetryOverride;
  /**
   * Time and timers of the gateway: streams, fleet, default store, caches, auth budget, breaker,
   * probe, telemetry, sunset, media-worker supervision (tests; default the real clock).
   */
  clock?: Clock;
}

export interface Gateway extends GatewayShutdown {
  /** The server's request listener: /v1beta and /billing straight to the proxy, the rest to `app`. */
  handler: http.RequestListener;
  /** Everything, the passthrough included (what supertest drives). */
  app: Express;
  streams: LegacyStreams;
  sockets: ResultsSockets;
  store: Store;
  upstream: UpstreamClient;
  passthrough: Passthrough;
  metrics: GatewayMetrics;
  usage: DeprecationUsage;
  rollup: DeprecationRollup;
  sunset: SunsetPolicy;
  upstreamHealth: UpstreamHealth;
  /** This replica's part in a fleet: a member when `store.secret` is configured, else `solo`. */
  fleet: FleetMember;
  /** Settles once the replica joined its fleet (at once when solo). */
  joined: Promise<void>;
  /** `/metrics` alone, when `telemetry.metricsPort` moves it off the public port (the server listens). */
  metricsApp?: Express;
  /** HTTP requests whose response has not closed yet. */
  readonly inFlight: number;
  /** Where this replica is on its way out (./lifecycle.ts); the `GatewayShutdown` steps move it. */
  lifecycle: LifecycleView;
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
}

/** Builds the gateway (no listen): /v0.2 adapter, /v1beta + /billing passthrough, telemetry, health. */
export function createGateway(cfg: Config, logger: Logger, opts: GatewayOptions): Gateway {
  const brand = brandOf(cfg);
  const { clock } = opts;
  const upstream = new UpstreamClient({
    baseUrl: opts.upstreamUrl,
    brand,
    logger,
    retry: opts.retry,
    timeouts: { headersMs: cfg.requestTimeoutMs, bodyMs: cfg.requestTimeoutMs },
    breaker: { ...cfg.upstreamBreaker, clock },
  });
  // Ticks tell whether this replica reaches the upstream; the probe tells when it does again.
  const reach = new UpstreamReach({ failuresInARow: 5, recoverAfterMs: 2 * cfg.telemetry.upstreamProbeMs, clock: clock ?? realClock });
  const telemetry = gatewayTelemetry(cfg, logger, {
    brand,
    store: opts.store ?? memoryStore({ clock }),
    upstream,
    observers: [opts.observer, reach],
    clock,
  });
  const { metrics, store, usage } = telemetry;
  const callers = callerChecks(cfg, logger, upstream, clock);
  const { catalog } = callers;
  // The default media relay (customer-room sources; webrtc in relay mode), in a supervised child
  // process: no native media library in this one. An injected relay is closed by its owner.
  const ingest = opts.media
    ? undefined
    : new WorkerRelay({
        cfg: cfg.legacy,
        logger,
        logLevel: cfg.logLevel,
        clock,
        ...opts.mediaWorker,
        onRestart: (reason) => telemetry.metrics.mediaWorkerRestarts.inc({ reason }),
      });
  const sources = gatewaySources({
    cfg: cfg.legacy,
    logger: logger.child({ component: 'ingest' }),
    clock: clock ?? realClock,
    relay: opts.media ?? (ingest as WorkerRelay),
  });
  const fleetLink = streamsLink(cfg.store, store);
  const lifecycle = new Lifecycle();
  const streams = new LegacyStreams({
    cfg: cfg.legacy,
    brand,
    logger,
    store,
    upstream,
    catalog,
    sources,
    observer: telemetry.observer,
    clock,
    storeHealth: telemetry.storeHealth,
    fleet: fleetLink,
    lifecycle,
  });
  const fleet = fleetMember(cfg.store, {
    store,
    streams: streams.moves,
    lifecycle,
    logger: logger.child({ component: 'fleet' }),
    clock,
    onMembership: (alive) => telemetry.observer.fleetReplicas?.(alive),
    upstreamImpaired: () => reach.impaired(telemetry.upstreamHealth.up),
  });
  const sockets = new ResultsSockets({
    cfg: cfg.legacy,
    logger,
    store,
    authorize: socketAuthorizer({ brand, store, catalog, authLimiter: callers.authLimiter, admitSocket: telemetry.admission.admitSocket }),
    clientAddress: callers.clientAddress,
    upgradeHeaders: () => deprecationHeaderLines(telemetry.headers),
    hooks: socketTelemetry(metrics, usage),
  });
  metrics.observe({
    activeStreams: () => streams.activeCount,
    socketConnections: () => sockets.connections,
    ...(ingest
      ? {
          mediaWorker: () => {
            const h = ingest.health();
            return { ...h, up: h.state === 'up' };
          },
        }
      : {}),
    ...(fleet.solo ? {} : { upstreamImpaired: () => Number(reach.impaired(telemetry.upstreamHealth.up)) }),
  });

  const web = httpApp(cfg, logger, {
    upstreamUrl: opts.upstreamUrl,
    brand,
    store,
    upstream,
    streams,
    callers,
    telemetry,
    lifecycle,
    fleet,
    mediaWorker: ingest ? () => ingest.health().state : undefined,
    clock,
  });
  const shutdown = gatewayShutdown(lifecycle, {
    streams,
    fleet,
    sockets,
    sources,
    ingest,
    telemetry,
    upstream,
    passthrough: web.passthrough,
    passthroughSettled: web.passthroughSettled,
    ownStore: opts.store ? undefined : store,
    clock,
  });

  telemetry.rollup.start();
  telemetry.upstreamHealth.start();
  const joined = fleet.start();
  // Awaited by startGateway; a gateway built alone must not crash on an unhandled rejection.
  joined.catch((err: unknown) => logger.error({ err }, 'could not join the fleet'));

  return {
    ...shutdown,
    handler: web.handler,
    app: web.app,
    metricsApp: web.metricsApp,
    passthrough: web.passthrough,
    streams,
    sockets,
    store,
    upstream,
    metrics,
    usage,
    rollup: telemetry.rollup,
    sunset: telemetry.sunset,
    upstreamHealth: telemetry.upstreamHealth,
    fleet,
    joined,
    lifecycle,
    get inFlight() {
      return web.inFlight();
    },
    handleUpgrade: (req, socket, head) => sockets.handleUpgrade(req, socket, head),
  };
}
