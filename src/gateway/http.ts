import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { errorHandler } from '../lib/error-handler';
import { legacyErrorRequestId, legacyJsonInvalid } from './legacy/validate';
import type { Logger } from '../lib/logger';

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

/** A request id on every request and response (`x-request-id`, kept when the client sent one). */
export function requestId(req: Request, res: Response, next: NextFunction): void {
  res.locals.requestId = String(res.getHeader('x-request-id') ?? '') || assignRequestId(req, res);
  next();
}

/**
 * CORS for browser SDKs calling with `credentials: "include"`: echo the origin (never `*`), allow
 * credentials, answer preflights.
 */
export function cors(req: Request, res: Response, next: NextFunction): void {
  const origin = req.headers.origin;
  if (origin) {
    res.setHeader('access-control-allow-origin', origin);
    res.setHeader('access-control-allow-credentials', 'true');
    res.append('vary', 'Origin');
    res.setHeader('access-control-expose-headers', 'x-request-id, deprecation, sunset, link');
  }
  if (req.method === 'OPTIONS' && origin) {
    res.setHeader('access-control-allow-methods', 'GET, POST, PATCH, DELETE, OPTIONS');
    res.setHeader(
      'access-control-allow-headers',
      (req.headers['access-control-request-headers'] as string | undefined) ?? 'authorization, content-type',
    );
    res.setHeader('access-control-max-age', '600');
    res.status(204).end();
    return;
  }
  next();
}

export { bearerKey } from '../lib/bearer';

/** Renders errors outside /v0.2 (admin, health, 404s) in the current interface's `{detail}` shapes. */
export const detailErrorHandler = (logger: Logger) => errorHandler({ logger });

/** Renders errors under /v0.2 in the legacy shape `{error, message, request_id, details}`. */
export function legacyErrorHandler(logger: Logger) {
  const reqIdOf = (res: Response) => (res.locals.requestId as string | undefined) ?? null;
  return errorHandler({
    logger,
    map: (err, res) => (err.code === 'invalid_json' ? legacyJsonInvalid(err.message, reqIdOf(res)) : err),
    render: (err, res) => err.toLegacyBody(legacyErrorRequestId(err, (res.locals.legacyRequestId as string | undefined) ?? reqIdOf(res))),
    internal: (res) => ({ error: 'internal_error', message: 'Internal server error', request_id: reqIdOf(res), details: null }),
  });
}
