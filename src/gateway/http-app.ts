/**
 * The gateway's HTTP side: the passthrough (/v1beta, /billing), the Express app (operator
 * endpoints, admin, docs, /v0.2), and the request listener that sends each request to one of them.
 */
import type http from 'node:http';
import express from 'express';
import type { Express } from 'express';
import type { Brand } from '../brand';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import type { Clock } from '../lib/timers';
import type { UpstreamClient } from '../upstream/client';
import { adminRouter } from './admin';
import type { CallerChecks } from './callers';
import { browserCors, detailErrorHandler, foldSlashes, legacyErrorHandler, requestId } from './http';
import { legacyBody, legacyRouter } from './legacy';
import type { LegacyStreams } from './legacy';
import type { LifecycleView } from './lifecycle';
import type { FleetMember } from './fleet/member';
import { mountLanding } from './landing';
import { mountDocs, mountHealth, mountMetrics } from './operator';
import { createPassthrough } from './passthrough';
import type { Passthrough, PassthroughEvent } from './passthrough';
import type { Store } from './store/store';
import { announceDeprecation } from './telemetry/deprecation';
import type { GatewayTelemetry } from './telemetry/gateway-telemetry';
import { accessLog, passthroughTelemetry, requestMetrics } from './telemetry/http';
import { passthroughMigration, requestTelemetry } from './telemetry/observer';
import { SettledBatch } from './telemetry/settled-batch';

export interface HttpAppDeps {
  upstreamUrl: string;
  brand: Brand;
  store: Store;
  upstream: UpstreamClient;
  streams: LegacyStreams;
  callers: CallerChecks;
  telemetry: GatewayTelemetry;
  /** Readiness and keep-alive follow the replica's state. */
  lifecycle: LifecycleView;
  /** Readiness also follows the fleet: a replica cut from the upstream while others reach it is not ready. */
  fleet: Pick<FleetMember, 'yieldsToPeers' | 'solo'>;
  /** …and the media worker: one that died too often is not restarted, and the replica says so. */
  mediaWorker?(): string;
  /** What "now" is for the landing page's days to the sunset and open brownout (default the real clock). */
  clock?: Pick<Clock, 'now'>;
}

export interface HttpApp {
  /** The server's request listener: /v1beta and /billing straight to the proxy, the rest to `app`. */
  handler: http.RequestListener;
  /** Everything, the passthrough included (what supertest drives). */
  app: Express;
  /** `/metrics` alone, when `telemetry.metricsPort` moves it off the public port. */
  metricsApp?: Express;
  passthrough: Passthrough;
  /** Its requests' telemetry, run in batches (closed at shutdown). */
  passthroughSettled: SettledBatch<PassthroughEvent>;
  /** HTTP requests whose response has not closed yet. */
  inFlight(): number;
}

export function httpApp(cfg: Config, logger: Logger, deps: HttpAppDeps): HttpApp {
  const { brand, store, lifecycle } = deps;
  const { catalog, authLimiter, clientAddress } = deps.callers;
  const { metrics, usage, upstreamHealth, headers, admission } = deps.telemetry;
  // Access line, HTTP and passthrough metrics: the passthrough skips Express and its edge steps.
  const proxied = passthroughTelemetry(logger, {
    log: cfg.telemetry.requestLog,
    metrics,
    httpMetrics: cfg.telemetry.metrics,
    clientAddress,
  });
  const migration = passthroughMigration(usage, brand.keyPrefix);
  // Run in batches, off the path of the next request (SettledBatch); a scrape or a counter flush takes what waits first.
  const settled = new SettledBatch<PassthroughEvent>((e) => {
    try {
      proxied(e);
    } finally {
      migration(e);
    }
  }, logger);
  metrics.beforeScrape(settled.flush);
  usage.beforeFlush(settled.flush);
  const passthrough = createPassthrough({
    upstreamUrl: deps.upstreamUrl,
    logger,
    timeoutMs: cfg.requestTimeoutMs,
    onSettled: (e) => settled.push(e),
  });

  const inFlight = { count: 0 };
  const logRequest = accessLog(logger, cfg.telemetry.requestLog, clientAddress);
  const countRequest = requestMetrics(cfg.telemetry.metrics ? metrics : undefined, inFlight);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.callers.trust ?? false);
  // First, before any body parser and Express's own steps: the proxy streams bodies through untouched.
  app.use(passthrough.handle);
  app.use(requestId, logRequest, countRequest);
  app.use(foldSlashes);
  app.use('/v0.2', announceDeprecation(headers));
  const corsStep = browserCors(cfg.cors);
  app.use('/v0.2', corsStep);
  app.use('/healthz', corsStep);
  mountHealth(app, {
    store,
    upstreamHealth,
    lifecycle,
    yieldsToPeers: () => deps.fleet.yieldsToPeers,
    mediaWorker: deps.mediaWorker,
  });
  const metricsApp = mountMetrics(app, cfg.telemetry, metrics, logger);
  if (cfg.admin.token) app.use('/admin', adminRouter({ token: cfg.admin.token, usage, deprecation: deps.telemetry.deprecation }));
  mountDocs(app, { brand, deprecation: cfg.deprecation, publicUrl: cfg.publicUrl });
  // `/`: what this address is (no CORS, as /docs: no browser SDK calls it).
  mountLanding(app, {
    cfg,
    upstreamUrl: deps.upstreamUrl,
    streams: deps.streams,
    fleet: deps.fleet,
    sunset: deps.telemetry.sunset,
    clock: deps.clock,
  });
  app.use(
    '/v0.2',
    ...legacyBody(),
    legacyRouter({
      cfg: cfg.legacy,
      brand,
      store,
      streams: deps.streams,
      catalog,
      authLimiter,
      clientAddress,
      onRequest: requestTelemetry(metrics, usage),
      admitCreate: admission.admitCreate,
      upstream: deps.upstream,
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

  return { handler, app, metricsApp, passthrough, passthroughSettled: settled, inFlight: () => inFlight.count + passthrough.inFlight };
}
