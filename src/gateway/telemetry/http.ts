import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import { pinoHttp } from 'pino-http';
import type { ClientAddress } from '../../lib/client-address';
import { redactQuery } from '../../lib/redact-query';
import { answeredError } from '../../lib/error-handler';
import { atLogTime } from '../../lib/logger';
import type { Logger } from '../../lib/logger';
import type { PassthroughEvent } from '../passthrough';
import type { GatewayMetrics } from './metrics';

export { redactQuery };

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
  [/^\/v0\.2\/streams\/[^/]+\/info$/, '/v0.2/streams/:id/info'],
  [/^\/v0\.2\/streams\/[^/]+\/spectate$/, '/v0.2/streams/:id/spectate'],
  [/^\/v0\.2\/ws\/streams\/[^/]+$/, '/v0.2/ws/streams/:id'],
  [/^\/v0\.2\/models$/, '/v0.2/models'],
  [/^\/v0\.2\/chat\/completions\/clip$/, '/v0.2/chat/completions/clip'],
  [/^\/v0\.2\/openapi\.json$/, '/v0.2/openapi.json'],
  [/^\/v0\.2\/healthz$/, '/v0.2/healthz'],
  [/^\/v0\.2(\/.*)?$/, '/v0.2/*'],
  [/^\/(healthz|readyz|metrics|admin\/deprecation|docs\/migration)?$/, ''],
];

function matchRoute(path: string): string {
  for (const [re, label] of ROUTES) if (re.test(path)) return label || path;
  return 'other';
}

/**
 * The routes without parameters, each its own label: most requests are to one of these few paths,
 * answered from this fixed table (a plain map lookup, nothing to move or evict).
 */
const FIXED = new Map(
  ROUTES.map(([, label]) => label)
    .filter((label) => label && !/[:*]/.test(label) && matchRoute(label) === label)
    .map((label) => [label, label]),
);

/** Labels of the other paths seen last: paths with ids are endless. */
const labels = new LRUCache<string, string>({ max: 1024 });

/** Route template of a URL (query ignored, slashes folded, trailing slash dropped). */
export function routeLabel(url: string): string {
  const q = url.search(/[?#]/);
  const raw = q < 0 ? url : url.slice(0, q);
  let label = FIXED.get(raw) ?? labels.get(raw);
  if (label === undefined) {
    label = matchRoute(raw.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1'));
    labels.set(raw, label);
  }
  return label;
}

/** Connect-style step that works on plain Node requests too (the passthrough runs ahead of Express). */
export type EdgeStep = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

/** `status` 499: the client went away before the response ended. */
function recordRequest(metrics: GatewayMetrics, method: string, url: string, status: number, seconds: number): void {
  const route = routeLabel(url);
  metrics.httpRequests.inc({ method, route, status: String(status) });
  metrics.httpDuration.observe({ method, route }, seconds);
}

/**
 * Counts every HTTP request by route template and status when its response closes; a client that
 * left before the response ended is counted as 499. Also tracks requests in flight (shutdown).
 */
export function requestMetrics(metrics: GatewayMetrics | undefined, inFlight: { count: number }): EdgeStep {
  return (req, res, next) => {
    const started = performance.now();
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    inFlight.count += 1;
    res.once('close', () => {
      inFlight.count -= 1;
      if (metrics) recordRequest(metrics, method, url, res.writableFinished ? res.statusCode : 499, (performance.now() - started) / 1000);
    });
    next();
  };
}

const QUIET = /^\/(healthz|readyz|metrics)(\?|$)/;

const levelOf = (status: number, err?: unknown) => (err || status === 500 ? 'error' : status >= 500 ? 'warn' : 'info');
const messageOf = (method: string | undefined, url: string, finished: boolean, status: number, ms: number) =>
  `${method} ${url} ${finished ? status : 'aborted'} ${ms}ms`;

/**
 * The URL an access line names, query values redacted: the full path as the client sent it, the
 * mount included (`/v0.2/streams`, `/admin/deprecation`), not Express's `req.url`, which a mounted
 * router has cut to its own part by the time the response ends.
 */
const loggedUrl = (req: IncomingMessage & { originalUrl?: string }) => redactQuery(req.originalUrl ?? req.url ?? '/');

/**
 * What both access lines log of a request: method, URL (`loggedUrl`) and the client address
 * (`remoteAddress`: the client behind trusted proxies, `server.trustProxy`). Never headers, so
 * never keys.
 */
function requestFields(clientAddress: ClientAddress) {
  return (req: IncomingMessage) => ({ method: req.method, url: loggedUrl(req), remoteAddress: clientAddress(req) });
}

const responseFields = (res: ServerResponse) => ({ statusCode: res.statusCode });

type ResponseLocals = { locals?: Record<string, unknown> & { traceId?: string } };

/**
 * An Express access line's own fields: the request's trace id (`requestId` step, or the legacy
 * routes' upstream calls) and the error the response answered with (`error`: its code and the
 * fields it names, `answeredError`). pino-http adds an `err` with a stack of its own to every 5xx
 * line: dropped, the response was no crash (an unexpected error is logged with its stack where it
 * is caught); an error the response itself carries (`res.err`) stays.
 */
function accessFields(res: ServerResponse, val: Record<string, unknown>): Record<string, unknown> {
  const { err, ...rest } = val;
  const locals = (res as ResponseLocals).locals;
  const error = answeredError(res as ResponseLocals);
  return {
    ...rest,
    ...((res as { err?: unknown }).err !== undefined ? { err } : {}),
    ...(locals?.traceId ? { traceId: locals.traceId } : {}),
    ...(error ? { error } : {}),
  };
}

/** pino-http passes an error line's response time as a fourth argument (its types leave it out). */
type ErrorMessage = (req: IncomingMessage, res: ServerResponse, err: Error) => string;

/**
 * One access-log line per Express request (pino-http), `METHOD /full/path status 12ms`, carrying the
 * request id and, when the request has them, its trace id and the error it answered with
 * (`accessFields`); `req.log` is a child logger with the same `reqId`.
 */
export function accessLog(logger: Logger, enabled: boolean, clientAddress: ClientAddress): EdgeStep {
  const reqFields = requestFields(clientAddress);
  const mw = pinoHttp({
    logger,
    genReqId: (_req: IncomingMessage, res: ServerResponse) => String(res.getHeader('x-request-id') ?? ''),
    quietReqLogger: true,
    autoLogging: enabled ? { ignore: (req: IncomingMessage) => QUIET.test(req.url ?? '') } : false,
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) => levelOf(res.statusCode, err),
    customSuccessMessage: (req: IncomingMessage, res: ServerResponse, ms: number) =>
      messageOf(req.method, loggedUrl(req), res.writableFinished, res.statusCode, ms),
    customErrorMessage: ((req: IncomingMessage, res: ServerResponse, _err: Error, ms: number) =>
      messageOf(req.method, loggedUrl(req), res.writableFinished, res.statusCode, ms)) as ErrorMessage,
    customSuccessObject: (_req: IncomingMessage, res: ServerResponse, val: Record<string, unknown>) => accessFields(res, val),
    customErrorObject: (_req: IncomingMessage, res: ServerResponse, _err: Error, val: Record<string, unknown>) => accessFields(res, val),
    serializers: {
      req: (req: { raw: IncomingMessage }) => reqFields(req.raw),
      res: (res: { raw: ServerResponse }) => responseFields(res.raw),
    },
  });
  return mw as EdgeStep;
}

/**
 * The passthrough's settled hook: the HTTP request metrics, the passthrough's own metrics, and the
 * access line, with the same fields as `accessLog`'s (built by the same field functions its
 * serializers call, here called once per line: the redacted URL serves the field and the message).
 */
export function passthroughTelemetry(
  logger: Logger,
  opts: { log: boolean; metrics: GatewayMetrics; httpMetrics: boolean; clientAddress: ClientAddress },
): (e: PassthroughEvent) => void {
  const { metrics } = opts;
  // The line's fields are fixed (reqId, traceId, spanId, req: method, URL with its query values redacted
  // and client address, res: status, responseTime): none is one of the redacted paths
  // (REDACT_PATHS) and none holds a header, so the redaction pass, which clones every field of
  // every line, would never change it and is left out.
  const access = logger.child({}, { redact: [] });
  const reqFields = requestFields(opts.clientAddress);
  return (e) => {
    const { req, res } = e;
    const method = req.method ?? 'GET';
    const finished = res.writableFinished;
    if (opts.httpMetrics) recordRequest(metrics, method, req.url ?? '/', finished ? res.statusCode : 499, e.durationMs / 1000);
    metrics.passthroughRequests.inc({ prefix: e.prefix, outcome: e.outcome });
    if (e.upstreamHeadersMs !== undefined) metrics.passthroughUpstreamHeaders.observe({ prefix: e.prefix }, e.upstreamHeadersMs / 1000);
    if (e.outcome === 'upstream_unreachable' || e.outcome === 'upstream_timeout' || e.outcome === 'upstream_reset') {
      metrics.upstreamErrors.inc({ source: 'passthrough', status: String(e.outcome === 'upstream_timeout' ? 504 : 0) });
    }
    const level = levelOf(res.statusCode);
    if (!opts.log || !access.isLevelEnabled(level)) return;
    const ms = Math.round(e.durationMs);
    const fields = reqFields(req);
    atLogTime(e.settledAtMs, () =>
      access[level](
        { reqId: e.requestId, traceId: e.traceId, spanId: e.spanId, req: fields, res: responseFields(res), responseTime: ms },
        messageOf(method, fields.url, finished, res.statusCode, ms),
      ),
    );
  };
}
