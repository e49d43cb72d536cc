import type { IncomingMessage, ServerResponse } from 'node:http';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../../lib/logger';
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
  [/^\/v0\.2(\/.*)?$/, '/v0.2/*'],
  [/^\/(healthz|readyz|metrics|admin\/deprecation|docs\/migration)$/, ''],
];

/** Route template of a URL (query ignored, slashes folded, trailing slash dropped). */
export function routeLabel(url: string): string {
  const q = url.search(/[?#]/);
  const path = (q < 0 ? url : url.slice(0, q)).replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1');
  for (const [re, label] of ROUTES) if (re.test(path)) return label || path;
  return 'other';
}

/** Connect-style step that works on plain Node requests too (the passthrough runs ahead of Express). */
export type EdgeStep = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

/**
 * Counts every HTTP request by route template and status when its response closes; a client that
 * left before the response ended is counted as 499. Also tracks requests in flight (shutdown).
 */
export function requestMetrics(metrics: GatewayMetrics | undefined, inFlight: { count: number }): EdgeStep {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    inFlight.count += 1;
    res.once('close', () => {
      inFlight.count -= 1;
      if (!metrics) return;
      const route = routeLabel(url);
      const status = res.writableFinished ? String(res.statusCode) : '499';
      metrics.httpRequests.inc({ method, route, status });
      metrics.httpDuration.observe({ method, route }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

const QUIET = /^\/(healthz|readyz|metrics)(\?|$)/;

const levelOf = (status: number, err?: unknown) => (err || status === 500 ? 'error' : status >= 500 ? 'warn' : 'info');
const messageOf = (method: string | undefined, url: string | undefined, res: ServerResponse, ms: number) =>
  `${method} ${url} ${res.writableFinished ? res.statusCode : 'aborted'} ${ms}ms`;

/**
 * One access-log line per request (pino-http) carrying the request id; `req.log` is a child logger
 * with the same `reqId`. Only method, URL and status are logged: never headers, so never keys.
 */
export function accessLog(logger: Logger, enabled: boolean): EdgeStep {
  const mw = pinoHttp({
    logger,
    genReqId: (_req: IncomingMessage, res: ServerResponse) => String(res.getHeader('x-request-id') ?? ''),
    quietReqLogger: true,
    autoLogging: enabled ? { ignore: (req: IncomingMessage) => QUIET.test(req.url ?? '') } : false,
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) => levelOf(res.statusCode, err),
    customSuccessMessage: (req: IncomingMessage, res: ServerResponse, ms: number) => messageOf(req.method, req.url, res, ms),
    customErrorMessage: (req: IncomingMessage, res: ServerResponse) => `${req.method} ${req.url} ${res.statusCode}`,
    serializers: {
      req: (req: { method?: string; url?: string; remoteAddress?: string }) => ({ method: req.method, url: req.url, remoteAddress: req.remoteAddress }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
  });
  return mw as EdgeStep;
}

/**
 * The same access line as `accessLog`, for the passthrough's lean path: no child loggers, one
 * log call when the response closes (requests/s there are worth the few microseconds).
 */
export function passthroughAccessLog(logger: Logger, enabled: boolean): EdgeStep {
  return (req, res, next) => {
    if (enabled) {
      const started = Date.now();
      res.once('close', () => {
        const ms = Date.now() - started;
        logger[levelOf(res.statusCode)](
          {
            reqId: res.getHeader('x-request-id'),
            req: { method: req.method, url: req.url, remoteAddress: req.socket.remoteAddress },
            res: { statusCode: res.statusCode },
            responseTime: ms,
          },
          messageOf(req.method, req.url, res, ms),
        );
      });
    }
    next();
  };
}
