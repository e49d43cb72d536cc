import type http from 'node:http';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Express } from 'express';
import { brandOf } from '../brand';
import type { Config } from '../config';
import { clientAddresses, compileTrust } from '../lib/client-address';
import type { Logger } from '../lib/logger';
import { realClock } from '../lib/timers';
import type { Clock } from '../lib/timers';
import { UpstreamClient } from '../upstream/client';
import type { RetryOverride } from '../upstream/retry';
import { adminRouter } from './admin';
import { fleetMember, sessionsLink } from './fleet/member';
import type { FleetMember } from './fleet/member';
import { browserCors, detailErrorHandler, foldSlashes, legacyErrorHandler, requestId } from './http';
import { IngestRelay } from './ingest';
import { Lifecycle } from './lifecycle';
import type { LifecycleView } from './lifecycle';
import { FailedAuthLimiter, fanOut, LEGACY_CLOSES, legacyEndReasons, legacyRouter, LegacySessions, ResultsSockets, socketAuthorizer, SunsetPolicy, UpstreamCatalog } from './legacy';
import type { LegacyObserver, MediaRelay } from './legacy';
import { createPassthrough } from './passthrough';
import type { Passthrough } from './passthrough';
import { mountDocs, mountHealth, mountMetrics } from './operator';
import { MemoryStore } from './store/memory';
import { measuredStore } from './store/measured';
import { StoreHealth } from './store/outage';
import type { Store } from './store/store';
import { announceDeprecation, deprecationHeaderLines, deprecationHeaders } from './telemetry/deprecation';
import { accessLog, passthroughTelemetry, requestMetrics } from './telemetry/http';
import { GatewayMetrics } from './telemetry/metrics';
import { countedAdmission, passthroughMigration, requestTelemetry, socketTelemetry, telemetryObserver } from './telemetry/observer';
import { DeprecationRollup } from './telemetry/rollup';
import { DeprecationUsage, utcDay } from './telemetry/usage';
import { UpstreamHealth } from './telemetry/upstream-health';

export interface GatewayOptions {
  upstreamUrl: string;
  store?: Store;
  media?: MediaRelay;
  /** Extra observer of legacy sessions, called besides the gateway's own telemetry. */
  observer?: LegacyObserver;
  /** Shrinks upstream retry waits (tests). */
  retry?: RetryOverride;
  /** Time and timers of the gateway: sessions, fleet, default store, caches, auth budget, breaker, probe, telemetry, sunset (tests; default the real clock). */
  clock?: Clock;
}

export interface Gateway {
  /** The server's request listener: /v1beta and /billing straight to the proxy, the rest to `app`. */
  handler: http.RequestListener;
  /** Everything, the passthrough included (what supertest drives). */
  app: Express;
  sessions: LegacySessions;
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
  /** Where this replica is on its way out (./lifecycle.ts); the steps below move it. */
  lifecycle: LifecycleView;
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** `unready`: /readyz answers 503 while everything else keeps serving (the wait before the drain or the close). */
  markUnready(): void;
  /**
   * The drain (a fleet replica's SIGTERM), `holding`: no new legacy streams here, streams whose
   * media does not live here go to replicas not draining, and this replica stays a fleet member so
   * its results sockets and media relays keep working until they end. False (nothing held) without a
   * fleet or as its last replica alive: nobody could take the streams, so they end as on any shutdown.
   */
  holdConnections(): Promise<boolean>;
  /** What a holding replica still holds: open results sockets and running media relays. */
  held(): { sockets: number; relays: number };
  /**
   * `leaving`: legacy creates and new results sockets are refused; in a fleet with replicas alive that
   * are not draining, live legacy streams are handed over to them (webrtc ones end); otherwise they
   * end (sockets close with 1001 `server_shutdown`, upstream streams deleted).
   */
  handOverOrEnd(why?: string): Promise<void>;
  /** `closed`: ends what is left (sockets close), flushes telemetry, releases everything. */
  close(): Promise<void>;
}


/** Builds the gateway (no listen): /v0.2 adapter, /v1beta + /billing passthrough, telemetry, health. */
export function createGateway(cfg: Config, logger: Logger, opts: GatewayOptions): Gateway {
  const brand = brandOf(cfg);
  // Every store call timed and its failures counted (gateway_store_*); `metrics` is built below and
  // no store call happens before it is.
  // Outages as this replica sees them: the lease check never ends a stream because the store was away.
  const storeHealth = new StoreHealth({ clock: opts.clock });
  const store = measuredStore(opts.store ?? new MemoryStore({ clock: opts.clock }), {
    call: (op, seconds, failed) => {
      metrics.store.call(op, seconds, failed);
      storeHealth.call(op, seconds, failed);
    },
  });
  const upstream = new UpstreamClient({
    baseUrl: opts.upstreamUrl,
    brand,
    logger,
    retry: opts.retry,
    timeouts: { headersMs: cfg.requestTimeoutMs, bodyMs: cfg.requestTimeoutMs },
    breaker: { ...cfg.upstreamBreaker, clock: opts.clock },
  });
  const failures = cfg.legacy.upstreamFailures;
  const catalog = new UpstreamCatalog(upstream, {
    modelsCacheMs: cfg.legacy.modelsCacheMs,
    accountCacheMs: 60_000,
    negativeKeyCacheMs: failures.negativeKeyCacheMs,
    negativeKeyCacheSize: failures.negativeKeyCacheSize,
    logger,
    clock: opts.clock,
  });
  // The one client address of a request (`server.trustProxy`, compiled once): the failed-auth
  // budget and access lines use it, and Express is told the same trust so `req.ip` would agree.
  const trust = compileTrust(cfg.server.trustProxy ?? false);
  const clientAddress = clientAddresses(trust);
  const authLimiter = new FailedAuthLimiter({
    perMinute: failures.authFailuresPerMinute,
    clock: opts.clock,
    onOverBudget: (ip) =>
      logger.warn(
        { clientAddress: ip, perMinute: failures.authFailuresPerMinute },
        `failed-authentication budget used up by ${ip}: its unknown keys are refused for the rest of the minute${trust ? '' : ' (server.trustProxy is off: behind a load balancer this is the balancer\'s address)'}`,
      ),
  });
  const usage = new DeprecationUsage(store, logger.child({ component: 'telemetry' }), opts.clock);
  const deprecation = { date: cfg.deprecation.date, sunset: cfg.deprecation.sunset, link: cfg.deprecation.link };
  const headers = deprecationHeaders(cfg.deprecation);
  const rollup = new DeprecationRollup({
    usage,
    store,
    logger: logger.child({ component: 'deprecation' }),
    deprecation,
    cron: cfg.telemetry.rollupCron,
    timezone: cfg.telemetry.rollupTimezone,
    clock: opts.clock,
  });

  const sunset = new SunsetPolicy(cfg.deprecation, opts.clock);

  // The gauges read sessions and sockets, which are built after the metrics they report to.
  const parts: { sessions?: LegacySessions; sockets?: ResultsSockets } = {};
  const upstreamHealth = new UpstreamHealth(() => upstream.listModels(), {
    intervalMs: cfg.telemetry.upstreamProbeMs,
    clock: opts.clock,
    onChange: (up) => (up ? logger.info('upstream probe: reachable') : logger.warn('upstream probe: unreachable (readiness unaffected)')),
  });
  const metrics = new GatewayMetrics({
    endReasons: Object.values(legacyEndReasons(brand)),
    upstreamUp: () => (upstreamHealth.up === undefined ? undefined : Number(upstreamHealth.up)),
    activeStreams: () => parts.sessions?.activeCount ?? 0,
    socketConnections: () => parts.sockets?.connections ?? 0,
    deprecatedKeys: () => usage.keyCount(),
    migrationStatuses: () => usage.statusCounts(),
    sunsetMs: Date.parse(cfg.deprecation.sunset),
  });
  // The default media relay (webrtc and customer-room sources); an injected one is closed by its owner.
  const ingest = opts.media ? undefined : new IngestRelay({ cfg: cfg.legacy, logger: logger.child({ component: 'ingest' }) });
  const observer = fanOut([telemetryObserver(metrics, usage), opts.observer]);
  const sessions = new LegacySessions({
    cfg: cfg.legacy,
    brand,
    logger,
    store,
    upstream,
    catalog,
    media: opts.media ?? ingest,
    observer,
    clock: opts.clock,
    storeHealth,
    fleet: sessionsLink(cfg.store, store),
  });
  const fleet = fleetMember(cfg.store, {
    store,
    sessions: sessions.fleet,
    logger: logger.child({ component: 'fleet' }),
    clock: opts.clock,
    onMembership: (alive) => observer.fleetReplicas?.(alive),
  });

  const admission = countedAdmission(sunset, metrics, usage);
  const sockets = new ResultsSockets({
    cfg: cfg.legacy,
    logger,
    store,
    authorize: socketAuthorizer({ brand, store, catalog, authLimiter, admitSocket: admission.admitSocket }),
    clientAddress,
    upgradeHeaders: () => deprecationHeaderLines(headers),
    hooks: socketTelemetry(metrics, usage),
  });

  // Access line, HTTP and passthrough metrics: the passthrough skips Express and its edge steps.
  const proxied = passthroughTelemetry(logger, { log: cfg.telemetry.requestLog, metrics, httpMetrics: cfg.telemetry.metrics, clientAddress });
  const migration = passthroughMigration(usage, brand.keyPrefix);
  const passthrough = createPassthrough({
    upstreamUrl: opts.upstreamUrl,
    logger,
    timeoutMs: cfg.requestTimeoutMs,
    onSettled(e) {
      proxied(e);
      migration(e);
    },
  });

  const inFlight = { count: 0 };
  const lifecycle = new Lifecycle();
  const logRequest = accessLog(logger, cfg.telemetry.requestLog, clientAddress);
  const countRequest = requestMetrics(cfg.telemetry.metrics ? metrics : undefined, inFlight);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', trust ?? false);
  // First, before any body parser and Express's own steps: the proxy streams bodies through untouched.
  app.use(passthrough.handle);
  app.use(requestId, logRequest, countRequest);
  app.use(foldSlashes);
  app.use('/v0.2', announceDeprecation(headers));
  const corsStep = browserCors(cfg.cors);
  app.use('/v0.2', corsStep);
  app.use('/healthz', corsStep);
  mountHealth(app, { store, upstreamHealth, leaving: () => !lifecycle.ready });
  const metricsApp = mountMetrics(app, cfg.telemetry, metrics, logger);
  if (cfg.admin.token) app.use('/admin', adminRouter({ token: cfg.admin.token, usage, deprecation }));
  mountDocs(app, brand, cfg.deprecation);
  app.use(
    '/v0.2',
    express.json({ limit: '1mb', type: ['application/json', 'application/*+json'] }),
    legacyRouter({
      cfg: cfg.legacy,
      brand,
      store,
      sessions,
      catalog,
      authLimiter,
      clientAddress,
      onRequest: requestTelemetry(metrics, usage),
      admitCreate: admission.admitCreate,
      upstream,
    }),
    legacyErrorHandler(logger),
  );
  app.use((req, res) => {
    res.status(404).json({ detail: `No route for ${req.method} ${req.path}` });
  });
  app.use(detailErrorHandler(logger));

  /**
   * Proxied requests skip Express: request id, access line and metrics are the passthrough's own
   * (`onSettled`).
   */
  const handler: http.RequestListener = (req, res) => {
    // Holding or leaving: every connection closes after its response, so the client's next call goes elsewhere.
    if (!lifecycle.keepAlive) res.shouldKeepAlive = false;
    if (!passthrough.proxy(req, res)) void app(req, res);
  };

  parts.sessions = sessions;
  parts.sockets = sockets;
  rollup.start();
  upstreamHealth.start();
  const joined = fleet.start();
  // Awaited by startGateway; a gateway built alone must not crash on an unhandled rejection.
  joined.catch((err: unknown) => logger.error({ err }, 'could not join the fleet'));
  let closed: Promise<void> | undefined;
  /** The hand-over moved this replica's streams to others: their sockets close so that clients reconnect. */
  let handedOver = false;
  /** Streams this replica ended on its way out (`server_shutdown`): their sockets say so, not 1012. */
  const endedAtShutdown = new Set<string>();
  const endAll = async () => {
    for (const id of await sessions.closeAll()) endedAtShutdown.add(id);
  };
  const media = opts.media ?? ingest;

  return {
    handler,
    app,
    sessions,
    sockets,
    store,
    upstream,
    passthrough,
    metrics,
    usage,
    rollup,
    sunset,
    upstreamHealth,
    fleet,
    joined,
    metricsApp,
    get inFlight() {
      return inFlight.count + passthrough.inFlight;
    },
    lifecycle,
    handleUpgrade: (req, socket, head) => sockets.handleUpgrade(req, socket, head),
    markUnready() {
      lifecycle.advance('unready');
    },
    async holdConnections() {
      lifecycle.advance('unready');
      sessions.stopCreating();
      const holding = await fleet.beginDrain();
      if (holding) lifecycle.advance('holding');
      return holding;
    },
    held: () => ({ sockets: sockets.connections, relays: media?.activeCount ?? 0 }),
    async handOverOrEnd(why?: string) {
      lifecycle.advance('leaving');
      // Handed-over streams leave this replica; what is left (webrtc, or no other replica) ends.
      handedOver = await fleet.handOver(why);
      await endAll();
    },
    close() {
      closed ??= (async () => {
        lifecycle.advance('closed');
        upstreamHealth.stop();
        await fleet.stop();
        await endAll();
        await ingest?.close();
        await sockets.close(handedOver ? LEGACY_CLOSES.replicaLeaving : undefined, endedAtShutdown);
        await rollup.stop();
        await sunset.close();
        await usage.close();
        // The day so far, so a restart never loses the last summary.
        await rollup.run(utcDay((opts.clock ?? realClock).now()), { partial: true });
        await upstream.close();
        passthrough.close();
        if (!opts.store) await store.close();
      })();
      return closed;
    },
  };
}
