import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { pinoHttp } from 'pino-http';
import type { ClientAddress } from '../../lib/client-address';
import type { Logger } from '../../lib/logger';
import type { PassthroughEvent } from '../passthrough';
import type { HistogramChild } from './bucket-histogram';
import type { GatewayMetrics } from './metrics';

/** Known route templates: metric labels stay bounded whatever paths clients send. */
const ROUTES: [RegExp, string][] = [
  [/^\/v1beta\/streams$/, '/v1beta/streams'],
  [/^\/v1beta\/streams\/[^/]+$/, '/v1beta/streams/:id'],
  [/^\/v1beta\/streams\/[^/]+\/keepalive$/, '/v1beta/streams/:id/keepalive'],
  [/^\/v1beta\/chat\/completions$/, '/v1beta/chat/completions'],
  [/^\/v1beta\/models$/, '/v1beta/models'],
  [/^\/v1beta(\/.*)?$/, '/v1beta/*'],
  [/^\/billing\/accounts\/me\/balance$/, '/billing/accounts/me/balance'],
  [/^\/billing\/pricing$/, '/billing/pricing'],
  [/^\/billing\/pricing\/.+$/, '/billing/pricing/:model'],
  [/^\/billing(\/.*)?$/, '/billing/*'],
  [/^\/v0\.2\/streams$/, '/v0.2/streams'],
  [/^\/v0\.2\/streams\/feedback$/, '/v0.2/streams/feedback'],
  [/^\/v0\.2\/streams\/[^/]+$/, '/v0.2/streams/:id'],
  [/^\/v0\.2\/streams\/[^/]+\/keepalive$/, '/v0.2/streams/:id/keepalive'],
  [/^\/v0\.2\/streams\/[^/]+\/config\/prompt$/, '/v0.2/streams/:id/config/prompt'],
  [/^\/v0\.2\/streams\/[^/]+\/feedback$/, '/v0.2/streams/:id/feedback'],
  [/^\/v0\.2\/models$/, '/v0.2/models'],
  [/^\/v0\.2\/chat\/completions\/clip$/, '/v0.2/chat/completions/clip'],
  [/^\/v0\.2\/healthz$/, '/v0.2/healthz'],
  [/^\/v0\.2(\/.*)?$/, '/v0.2/*'],
  [/^\/(healthz|readyz|metrics|admin\/deprecation|docs\/migration)$/, ''],
];

/** Route template of a URL (query ignored, slashes folded, trailing slash dropped). */
export function routeLabel(url: string): string {
  const q = url.search(/[?#]/);
  const raw = q < 0 ? url : url.slice(0, q);
  let label = labels.get(raw);
  if (label === undefined) {
    label = matchRoute(raw.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1'));
    // Bounded: paths with ids are endless, so the memo is emptied when full instead of growing.
    if (labels.size >= LABEL_MEMO) labels.clear();
    labels.set(raw, label);
  }
  return label;
}

/** The same few paths come on every request: each is matched against ROUTES once. */
const LABEL_MEMO = 1024;
const labels = new Map<string, string>();

function matchRoute(path: string): string {
  for (const [re, label] of ROUTES) if (re.test(path)) return label || path;
  return 'other';
}

/**
 * A URL as it may be logged: parameter names kept, every value replaced (a `?token=` probe, a key
 * in a query, a signed URL never reach a log); a parameter without `=` is all value.
 */
export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const h = url.indexOf('#', q);
  const query = url.slice(q + 1, h < 0 ? undefined : h);
  if (!query) return url.slice(0, q + 1);
  let out = '';
  for (const part of query.split('&')) {
    const eq = part.indexOf('=');
    out += `${out ? '&' : ''}${eq < 0 ? REDACTED : `${part.slice(0, eq)}=${REDACTED}`}`;
  }
  return `${url.slice(0, q)}?${out}`;
}

const REDACTED = '[redacted]';

/** Connect-style step that works on plain Node requests too (the passthrough runs ahead of Express). */
export type EdgeStep = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

/** A counter's label child with its increments kept as a plain number until the counter is read. */
interface PendingCount {
  readonly child: { inc(n: number): void };
  n: number;
}

/**
 * Counter increments kept as plain numbers and added to prom-client when the counter is read
 * (`GatewayMetrics.onCollect`): a request costs map lookups and an addition, not prom-client's
 * label validation and hashing.
 */
class DeferredCounts {
  private readonly all: PendingCount[] = [];
  constructor(metrics: GatewayMetrics) {
    metrics.onCollect(() => {
      for (const p of this.all) {
        if (p.n) p.child.inc(p.n);
        p.n = 0;
      }
    });
  }

  /** A new pending count for one label child (keep it: each later request adds to `n`). */
  track(child: { inc(n: number): void }): PendingCount {
    const p = { child, n: 0 };
    this.all.push(p);
    return p;
  }
}

/** The request metrics of one (method, route): counts by status, the duration child. */
interface RouteCounters {
  readonly byStatus: Map<number, PendingCount>;
  readonly duration: HistogramChild;
}

/**
 * The HTTP request metrics: counts deferred, label children looked up by method, route (memoized
 * label) and numeric status in nested maps, so a request builds no key string.
 */
class HttpCounters {
  private readonly counts: DeferredCounts;
  private readonly routes = new Map<string, Map<string, RouteCounters>>();
  constructor(private readonly metrics: GatewayMetrics) {
    this.counts = new DeferredCounts(metrics);
  }

  /** `status` 499: the client went away before the response ended. */
  record(method: string, route: string, status: number, seconds: number): void {
    let byRoute = this.routes.get(method);
    if (!byRoute) this.routes.set(method, (byRoute = new Map()));
    let r = byRoute.get(route);
    if (!r) byRoute.set(route, (r = { byStatus: new Map(), duration: this.metrics.httpDuration.labels(method, route) }));
    let c = r.byStatus.get(status);
    if (!c) r.byStatus.set(status, (c = this.counts.track(this.metrics.httpRequests.labels(method, route, String(status)))));
    c.n += 1;
    r.duration.observe(seconds);
  }
}

/**
 * Counts every HTTP request by route template and status when its response closes; a client that
 * left before the response ended is counted as 499. Also tracks requests in flight (shutdown).
 */
export function requestMetrics(metrics: GatewayMetrics | undefined, inFlight: { count: number }): EdgeStep {
  const counters = metrics && new HttpCounters(metrics);
  return (req, res, next) => {
    const started = performance.now();
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    inFlight.count += 1;
    res.once('close', () => {
      inFlight.count -= 1;
      counters?.record(method, routeLabel(url), res.writableFinished ? res.statusCode : 499, (performance.now() - started) / 1000);
    });
    next();
  };
}

const QUIET = /^\/(healthz|readyz|metrics)(\?|$)/;

const levelOf = (status: number, err?: unknown) => (err || status === 500 ? 'error' : status >= 500 ? 'warn' : 'info');
const messageOf = (method: string | undefined, url: string, finished: boolean, status: number, ms: number) =>
  `${method} ${url} ${finished ? status : 'aborted'} ${ms}ms`;

/**
 * One access-log line per request (pino-http) carrying the request id; `req.log` is a child logger
 * with the same `reqId`. Only method, URL (query values redacted), the client address
 * (`remoteAddress`: the client behind trusted proxies, `server.trustProxy`) and status are logged:
 * never headers, so never keys.
 */
export function accessLog(logger: Logger, enabled: boolean, clientAddress: ClientAddress): EdgeStep {
  const mw = pinoHttp({
    logger,
    genReqId: (_req: IncomingMessage, res: ServerResponse) => String(res.getHeader('x-request-id') ?? ''),
    quietReqLogger: true,
    autoLogging: enabled ? { ignore: (req: IncomingMessage) => QUIET.test(req.url ?? '') } : false,
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) => levelOf(res.statusCode, err),
    customSuccessMessage: (req: IncomingMessage, res: ServerResponse, ms: number) =>
      messageOf(req.method, redactQuery(req.url ?? '/'), res.writableFinished, res.statusCode, ms),
    customErrorMessage: (req: IncomingMessage, res: ServerResponse) => `${req.method} ${redactQuery(req.url ?? '/')} ${res.statusCode}`,
    serializers: {
      req: (req: { method?: string; url?: string; raw: IncomingMessage }) => ({ method: req.method, url: redactQuery(req.url ?? '/'), remoteAddress: clientAddress(req.raw) }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
  });
  return mw as EdgeStep;
}

/** Bytes of access lines gathered before a write, and the longest a line waits for one. */
const BATCH_BYTES = 16_384;
const BATCH_MS = 50;

/**
 * Access lines written in batches: one write per 16 KiB or per 50 ms instead of one per request
 * (pino's default destination hands every write to the thread pool, which on a small machine
 * costs about as much CPU as proxying the request). The timer keeps the process alive until it
 * fires; `flush()` writes what is pending at once (gateway close).
 */
function batchedWrites(dest: pino.DestinationStream): pino.DestinationStream & { flush(): void } {
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const out = pending;
    pending = '';
    if (out) dest.write(out);
  };
  return {
    write(line: string) {
      pending += line;
      if (pending.length >= BATCH_BYTES) flush();
      else timer ??= setTimeout(flush, BATCH_MS);
    },
    flush,
  };
}

export interface PassthroughTelemetry {
  /** The passthrough's `onSettled`. */
  settled(e: PassthroughEvent): void;
  /** Writes the access lines still batched (gateway close). */
  flush(): void;
}

/** pino's numeric levels, for the hand-built access line. */
const LEVEL_VALUES = { info: 30, warn: 40, error: 50 } as const;

/** Characters JSON.stringify escapes in a string (a valid surrogate pair also takes the slow path). */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON escapes
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** A string's JSON form without its quotes: the string itself in the usual case, tested, not copied. */
export function jsonInner(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s).slice(1, -1) : s;
}

/**
 * The passthrough's access line, written by hand: the JSON line pino would write for it (level,
 * epoch time, the gateway logger's bindings, reqId, req, res, responseTime, msg), escaped as
 * JSON.stringify would. pino's generic path (child bindings, serializers, per-call object walk)
 * cost more than proxying a small request; no redaction path can occur on these fields (method,
 * redacted URL, status, address).
 */
function accessLine(level: number, bindings: string, e: PassthroughEvent, method: string, url: string, remote: string, finished: boolean, ms: number): string {
  const status = e.res.statusCode;
  const m = jsonInner(method);
  const u = jsonInner(url);
  return (
    `{"level":${level},"time":${Date.now()}${bindings},"reqId":"${jsonInner(e.requestId)}",` +
    `"req":{"method":"${m}","url":"${u}","remoteAddress":"${jsonInner(remote)}"},` +
    // messageOf over the escaped parts is escaped too (its other parts are numbers and a word).
    `"res":{"statusCode":${status}},"responseTime":${ms},"msg":"${messageOf(m, u, finished, status, ms)}"}\n`
  );
}

/**
 * The passthrough's telemetry at settle time, all from the one per-request record: the access line
 * (same fields as `accessLog`'s, built by `accessLine` onto the gateway logger's destination with
 * batched writes; the logger's level is read per request), the HTTP request metrics and the
 * passthrough's own metrics.
 */
export function passthroughTelemetry(
  logger: Logger,
  opts: { log: boolean; metrics: GatewayMetrics; httpMetrics: boolean; clientAddress: ClientAddress },
): PassthroughTelemetry {
  const dest = (logger as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym]!;
  const batch = batchedWrites(dest);
  // The logger's bindings as JSON members, serialized once: `,"service":"gateway","name":"gateway"`.
  const bound = JSON.stringify(logger.bindings()).slice(1, -1);
  const bindings = bound ? `,${bound}` : '';
  const http = opts.httpMetrics ? new HttpCounters(opts.metrics) : undefined;
  const { metrics } = opts;
  const deferred = new DeferredCounts(metrics);
  const outcomes = new Map<PassthroughEvent['prefix'], Map<PassthroughEvent['outcome'], PendingCount>>();
  const headers = new Map<string, HistogramChild>();
  const settled = (e: PassthroughEvent) => {
    const { req, res } = e;
    const url = redactQuery(req.url ?? '/');
    const method = req.method ?? 'GET';
    const finished = res.writableFinished;
    http?.record(method, routeLabel(url), finished ? res.statusCode : 499, e.durationMs / 1000);

    let byOutcome = outcomes.get(e.prefix);
    if (!byOutcome) outcomes.set(e.prefix, (byOutcome = new Map()));
    let o = byOutcome.get(e.outcome);
    if (!o) byOutcome.set(e.outcome, (o = deferred.track(metrics.passthroughRequests.labels(e.prefix, e.outcome))));
    o.n += 1;
    if (e.upstreamHeadersMs !== undefined) {
      let h = headers.get(e.prefix);
      if (!h) headers.set(e.prefix, (h = metrics.passthroughUpstreamHeaders.labels(e.prefix)));
      h.observe(e.upstreamHeadersMs / 1000);
    }
    if (e.outcome === 'upstream_unreachable' || e.outcome === 'upstream_timeout' || e.outcome === 'upstream_reset') {
      metrics.upstreamErrors.inc({ source: 'passthrough', status: String(e.outcome === 'upstream_timeout' ? 504 : 0) });
    }

    const level = LEVEL_VALUES[levelOf(res.statusCode)];
    if (!opts.log || level < logger.levelVal) return;
    batch.write(accessLine(level, bindings, e, method, url, opts.clientAddress(req), finished, Math.round(e.durationMs)));
  };
  return { settled, flush: batch.flush };
}
