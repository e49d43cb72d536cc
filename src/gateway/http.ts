import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import cors from 'cors';
import type { NextFunction, Request, Response } from 'express';
import type { CorsConfig } from '../config';
import { errorHandler } from '../lib/error-handler';
import type { ServiceError } from '../lib/errors';
import { UpstreamError } from '../upstream/errors';
import { legacyErrorRequestId, legacyJsonInvalid, toLegacyError } from './legacy';
import type { Logger } from '../lib/logger';
import { requestTraceId } from '../lib/spans';

/** Legacy clients build `base + path` without trimming, so `//v0.2//streams` occurs: fold slashes. */
export function foldSlashes(req: Request, _res: Response, next: NextFunction): void {
  if (req.url.includes('//')) {
    const q = req.url.indexOf('?');
    const path = q < 0 ? req.url : req.url.slice(0, q);
    req.url = path.replace(/\/{2,}/g, '/') + (q < 0 ? '' : req.url.slice(q));
  }
  next();
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** The request id to use: the client's own `x-request-id` when well-formed, else a new one. */
export function requestIdOf(given: unknown): string {
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Sets `x-request-id` on the response (the client's own when well-formed) and returns it. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = requestIdOf(req.headers['x-request-id']);
  res.setHeader('x-request-id', id);
  return id;
}

/**
 * A request id on every request and response (`x-request-id`, kept when the client sent one), and
 * the request's trace id for its log lines (`res.locals.traceId`): its server span's while tracing
 * is on, else the caller's `traceparent`'s, so logs correlate without tracing.
 */
export function requestId(req: Request, res: Response, next: NextFunction): void {
  res.locals.requestId = String(res.getHeader('x-request-id') ?? '') || assignRequestId(req, res);
  const traceId = requestTraceId(req.headers.traceparent);
  if (traceId) res.locals.traceId = traceId;
  next();
}

/**
 * CORS for browser SDKs, mounted only where browsers call (/v0.2, /healthz). An allowed origin gets
 * `*` (any origin, no credentials) or its own value echoed; credentials only when configured, and
 * never for the opaque `null` origin (sandboxed frames, file: pages). Preflights are answered here.
 * Every response varies by `Origin`, refused ones included (a cache must not hand one origin's
 * answer to another).
 */
export function browserCors(cfg: CorsConfig) {
  const any = cfg.origins.includes('*');
  const listed = new Set(cfg.origins);
  const allowed = (origin: string | undefined): origin is string =>
    origin !== undefined && (any || listed.has(origin)) && !(cfg.credentials && origin === 'null');
  const handle = cors({
    origin: (origin, answer) => answer(null, allowed(origin) && (any && !cfg.credentials ? '*' : origin)),
    credentials: cfg.credentials,
    methods: ['GET', 'POST', 'PATCH', 'DELETE', 'OPTIONS'],
    exposedHeaders: ['x-request-id', 'deprecation', 'sunset', 'link', 'retry-after', 'x-next-cursor'],
    maxAge: 600,
  });
  return (req: Request, res: Response, next: NextFunction): void => {
    res.vary('Origin');
    handle(req, res, next);
  };
}

export { bearerKey } from '../lib/bearer';

/** Renders errors outside /v0.2 (admin, health, 404s) in the current interface's `{detail}` shapes. */
export const detailErrorHandler = (logger: Logger) => errorHandler({ logger });

/** Renders errors under /v0.2 in the legacy shape `{error, message, request_id, details}`. */
export function legacyErrorHandler(logger: Logger) {
  const reqIdOf = (res: Response) => (res.locals.requestId as string | undefined) ?? null;
  return errorHandler({
    logger,
    map: (err, res) => {
      if (err.code === 'invalid_json') return legacyJsonInvalid(err.message, reqIdOf(res));
      // Safety net: an upstream failure no path mapped still never reaches a legacy client as-is.
      return err instanceof UpstreamError ? (toLegacyError(err, { what: 'answer', clientKey: false }, logger) as ServiceError) : err;
    },
    render: (err, res) => err.toLegacyBody(legacyErrorRequestId(err, (res.locals.legacyRequestId as string | undefined) ?? reqIdOf(res))),
    internal: (res) => ({ error: 'internal_error', message: 'Internal server error', request_id: reqIdOf(res), details: null }),
  });
}
