import fs from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Express } from 'express';
import { brandOf } from '../brand';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import { UpstreamClient } from '../upstream/client';
import type { RetryOverride } from '../upstream/retry';
import { adminRouter } from './admin';
import { cors, detailErrorHandler, foldSlashes, legacyErrorHandler, requestId } from './http';
import { IngestRelay } from './ingest';
import { UpstreamCatalog } from './legacy/catalog';
import { ResultsSockets } from './legacy/results-socket';
import type { SocketAuth } from './legacy/results-socket';
import { legacyRouter } from './legacy/routes';
import { LegacySessions } from './legacy/sessions';
import type { LegacyObserver, MediaRelay } from './legacy/sessions';
import { createPassthrough } from './passthrough';
import type { Passthrough } from './passthrough';
import { MemoryStore } from './store/memory';
import type { Store } from './store/store';
import { announceDeprecation, deprecationHeaderLines, deprecationHeaders } from './telemetry/deprecation';
import { accessLog, passthroughTelemetry, requestMetrics } from './telemetry/http';
import { GatewayMetrics } from './telemetry/metrics';
import { socketTelemetry, telemetryObserver } from './telemetry/observer';
import { DeprecationRollup } from './telemetry/rollup';
import { DeprecationUsage, utcDay } from './telemetry/usage';

export interface GatewayOptions {
  upstreamUrl: string;
  store?: Store;
  media?: MediaRelay;
  /** Extra observer of legacy sessions, called besides the gateway's own telemetry. */
  observer?: LegacyObserver;
  /** Shrinks upstream retry waits (tests). */
  retry?: RetryOverride;
  /** Clock of the deprecation counters (tests). */
  now?: () => number;
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
  /** HTTP requests whose response has not closed yet. */
  readonly inFlight: number;
  readonly draining: boolean;
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /**
   * Starts the shutdown: /readyz answers 503, legacy creates are refused (503) and live legacy
   * streams end (sockets close with 1001 `server_shutdown`, upstream streams deleted). Sessions
   * cannot be handed over: their scheduler holds the client's key in this process only.
   */
  drain(): Promise<void>;
  /** Ends live streams (sockets close with 1001), flushes telemetry, releases everything. */
  close(): Promise<void>;
}

/** The migration guide the default deprecation `Link` points at (same path from src/ and dist/). */
const MIGRATION_GUIDE = path.resolve(__dirname, '..', '..', 'docs', 'migration.md');

function bothObservers(a: LegacyObserver, b: LegacyObserver | undefined): LegacyObserver {
  if (!b) return a;
  return {
    streamCreated: (k, s) => (a.streamCreated?.(k, s), b.streamCreated?.(k, s)),
    streamEnded: (k, r) => (a.streamEnded?.(k, r), b.streamEnded?.(k, r)),
    inference: (e) => (a.inference?.(e), b.inference?.(e)),
    tickSkipped: (id) => (a.tickSkipped?.(id), b.tickSkipped?.(id)),
    tickLateness: (ms) => (a.tickLateness?.(ms), b.tickLateness?.(ms)),
    upstreamError: (s) => (a.upstreamError?.(s), b.upstreamError?.(s)),
  };
}

/** Builds the gateway (no listen): /v0.2 adapter, /v1beta + /billing passthrough, telemetry, health. */
export function createGateway(cfg: Config, logger: Logger, opts: GatewayOptions): Gateway {
  const brand = brandOf(cfg);
  const store = opts.store ?? new MemoryStore();
  const upstream = new UpstreamClient({
    baseUrl: opts.upstreamUrl,
    brand,
    logger,
    retry: opts.retry,
    timeouts: { headersMs: cfg.requestTimeoutMs, bodyMs: cfg.requestTimeoutMs },
  });
  const catalog = new UpstreamCatalog(upstream, { modelsCacheMs: cfg.legacy.modelsCacheMs, accountCacheMs: 60_000 });
  const usage = new DeprecationUsage(store, logger.child({ component: 'telemetry' }), opts.now);
  const deprecation = { date: cfg.deprecation.date, sunset: cfg.deprecation.sunset, link: cfg.deprecation.link };
  const headers = deprecationHeaders(cfg.deprecation);
  const rollup = new DeprecationRollup({
    usage,
    logger: logger.child({ component: 'deprecation' }),
    deprecation,
    cron: cfg.telemetry.rollupCron,
    timezone: cfg.telemetry.rollupTimezone,
    now: opts.now,
  });

  // The gauges read sessions and sockets, which are built after the metrics they report to.
  const parts: { sessions?: LegacySessions; sockets?: ResultsSockets } = {};
  const metrics = new GatewayMetrics({
    activeStreams: () => parts.sessions?.activeCount ?? 0,
    socketConnections: () => parts.sockets?.connections ?? 0,
    deprecatedKeys: () => usage.keyCount(),
  });
  // The default media relay (webrtc and customer-room sources); an injected one is closed by its owner.
  const ingest = opts.media ? undefined : new IngestRelay({ cfg: cfg.legacy, logger: logger.child({ component: 'ingest' }) });
  const sessions = new LegacySessions({
    cfg: cfg.legacy,
    brand,
    logger,
    store,
    upstream,
    catalog,
    media: opts.media ?? ingest,
    observer: bothObservers(telemetryObserver(metrics, usage), opts.observer),
  });

  const authorize = async (apiKey: string, streamId: string): Promise<SocketAuth> => {
    if (!apiKey.startsWith(brand.keyPrefix)) return { ok: false, reason: 'authentication failed' };
    let accountId: string;
    try {
      accountId = await catalog.accountOf(apiKey);
    } catch {
      return { ok: false, reason: 'authentication failed' };
    }
    const record = await store.getSession(streamId);
    if (!record) return { ok: false, reason: 'stream_not_found' };
    if (record.accountId !== accountId) return { ok: false, reason: 'forbidden' };
    return { ok: true, record };
  };
  const sockets = new ResultsSockets({
    cfg: cfg.legacy,
    logger,
    store,
    authorize,
    upgradeHeaders: () => deprecationHeaderLines(headers),
    hooks: socketTelemetry(metrics, usage),
  });

  // Access line, HTTP and passthrough metrics: the passthrough skips Express and its edge steps.
  const proxied = passthroughTelemetry(logger, { log: cfg.telemetry.requestLog, metrics, httpMetrics: cfg.telemetry.metrics });
  const passthrough = createPassthrough({ upstreamUrl: opts.upstreamUrl, logger, timeoutMs: cfg.requestTimeoutMs, onSettled: proxied.settled });

  const inFlight = { count: 0 };
  let draining = false;
  const logRequest = accessLog(logger, cfg.telemetry.requestLog);
  const countRequest = requestMetrics(cfg.telemetry.metrics ? metrics : undefined, inFlight);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // First, before any body parser and Express's own steps: the proxy streams bodies through untouched.
  app.use(passthrough.handle);
  app.use(requestId, logRequest, countRequest);
  app.use(foldSlashes);
  app.use('/v0.2', announceDeprecation(headers));
  app.use(cors);
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  app.get('/readyz', async (_req, res) => {
    const [up, storeOk] = await Promise.all([
      catalog.modelList().then(() => true, () => false),
      store.ready().catch(() => false),
    ]);
    res.status(up && storeOk && !draining ? 200 : 503).json({ upstream: up, store: storeOk, draining });
  });
  if (cfg.telemetry.metrics) {
    app.get('/metrics', async (_req, res) => {
      res.type(metrics.contentType()).send(await metrics.text());
    });
  }
  if (cfg.admin.token) app.use('/admin', adminRouter({ token: cfg.admin.token, usage, deprecation }));
  app.get('/docs/migration', async (_req, res) => {
    const text = await fs.readFile(MIGRATION_GUIDE, 'utf8').catch(() => undefined);
    if (text === undefined) res.status(404).json({ detail: 'The migration guide is not installed on this gateway' });
    else res.type('text/markdown; charset=utf-8').send(text);
  });
  app.use(
    '/v0.2',
    express.json({ limit: '1mb', type: ['application/json', 'application/*+json'] }),
    legacyRouter({
      cfg: cfg.legacy,
      brand,
      store,
      sessions,
      catalog,
      onRequest(kh, endpoint, accountId) {
        metrics.legacyRequests.inc({ endpoint });
        if (kh) usage.request(kh, endpoint, accountId);
      },
    }),
    legacyErrorHandler(logger),
  );
  app.use((req, res) => {
    res.status(404).json({ detail: `No route for ${req.method} ${req.path}` });
  });
  app.use(detailErrorHandler(logger));

  /**
   * The passthrough skips Express (its per-request setup costs as much as the proxying): request
   * id, access line and metrics are the passthrough's own (`onSettled`).
   */
  const handler: http.RequestListener = (req, res) => passthrough.handle(req, res, () => app(req, res));

  parts.sessions = sessions;
  parts.sockets = sockets;
  rollup.start();
  let closed: Promise<void> | undefined;

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
    get inFlight() {
      return inFlight.count + passthrough.inFlight;
    },
    get draining() {
      return draining;
    },
    handleUpgrade: (req, socket, head) => sockets.handleUpgrade(req, socket, head),
    async drain() {
      draining = true;
      await sessions.closeAll();
    },
    close() {
      closed ??= (async () => {
        draining = true;
        await sessions.closeAll();
        await ingest?.close();
        await sockets.close();
        await rollup.stop();
        await usage.flush();
        // The day so far, so a restart never loses the last summary.
        await rollup.run(utcDay(opts.now?.() ?? Date.now()));
        await upstream.close();
        passthrough.close();
        proxied.flush();
        if (!opts.store) await store.close();
      })();
      return closed;
    },
  };
}
