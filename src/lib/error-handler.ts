import type { NextFunction, Request, Response } from 'express';
import { fromFrameworkError } from './errors';
import type { ServiceError } from './errors';
import type { Logger } from './logger';

export interface ErrorHandlerOptions {
  logger: Logger;
  /** Body of a known error (default: the error's own shape). */
  render?(err: ServiceError, res: Response): unknown;
  /** Body of an unexpected error's 500 (default `{detail}`). */
  internal?(res: Response): unknown;
  /** Rewrites a known error before rendering (e.g. into an interface's own code). */
  map?(err: ServiceError, res: Response): ServiceError;
}

/**
 * The error a response answered with, for its access line: the code and the error's own log
 * fields (`ServiceErrorOptions.log`, e.g. the model a `model_unavailable` names); undefined when
 * the response was not an error rendered here.
 */
export function answeredError(res: { locals?: Record<string, unknown> }): Record<string, unknown> | undefined {
  return res.locals?.answeredError as Record<string, unknown> | undefined;
}

/**
 * The one express error handler: known errors (ServiceErrors and framework errors such as a body
 * that is not JSON) in the contract's shape with their headers; anything else logged and a 500.
 * A response already under way is cut, never half-rewritten.
 */
export function errorHandler(opts: ErrorHandlerOptions) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    let known = fromFrameworkError(err);
    if (known) {
      if (opts.map) known = opts.map(known, res);
      res.locals.answeredError = { code: known.code, ...known.options.log };
      for (const [k, v] of Object.entries(known.options.headers ?? {})) res.setHeader(k, v);
      res.status(known.status).json(opts.render ? opts.render(known, res) : known.toBody());
      return;
    }
    const log = (req as { log?: Logger }).log ?? opts.logger;
    log.error({ err, path: req.path, reqId: res.locals.requestId as unknown }, 'unhandled error');
    res.locals.answeredError = { code: 'internal_error' };
    res.status(500).json(opts.internal ? opts.internal(res) : { detail: 'Internal server error' });
  };
}
