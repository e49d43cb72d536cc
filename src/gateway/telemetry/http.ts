import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
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

/**
 * Counts every HTTP request by route template and status when its response closes; a client that
 * left before the response ended is counted as 499. Also tracks requests in flight (shutdown).
 */
export function requestMetrics(metrics: GatewayMetrics | undefined, inFlight: { count: number }): RequestHandler {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    const url = req.url;
    inFlight.count += 1;
    res.once('close', () => {
      inFlight.count -= 1;
      if (!metrics) return;
      const route = routeLabel(url);
      const status = res.writableFinished ? String(res.statusCode) : '499';
      metrics.httpRequests.inc({ method: req.method, route, status });
      metrics.httpDuration.observe({ method: req.method, route }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

const QUIET = /^\/(healthz|readyz|metrics)(\?|$)/;

/**
 * One access-log line per request (pino-http) carrying the request id; `req.log` is a child logger
 * with the same `reqId`. Only method, URL and status are logged: never headers, so never keys.
 */
export function accessLog(logger: Logger, enabled: boolean): RequestHandler {
  const mw = pinoHttp({
    logger,
    genReqId: (_req: IncomingMessage, res: ServerResponse) => String(res.getHeader('x-request-id') ?? ''),
    quietReqLogger: true,
    autoLogging: enabled ? { ignore: (req: IncomingMessage) => QUIET.test(req.url ?? '') } : false,
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
      err || res.statusCode === 500 ? 'error' : res.statusCode >= 500 ? 'warn' : 'info',
    customSuccessMessage: (req: IncomingMessage, res: ServerResponse, ms: number) =>
      `${req.method} ${req.url} ${res.writableFinished ? res.statusCode : 'aborted'} ${ms}ms`,
    customErrorMessage: (req: IncomingMessage, res: ServerResponse) => `${req.method} ${req.url} ${res.statusCode}`,
    serializers: {
      req: (req: { method?: string; url?: string; remoteAddress?: string }) => ({ method: req.method, url: req.url, remoteAddress: req.remoteAddress }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
  });
  return mw as unknown as RequestHandler;
}
