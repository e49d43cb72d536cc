import type { NextFunction, Request, Response } from 'express';
import { errorHandler as sharedErrorHandler } from '../lib/error-handler';
import { ServiceError } from '../lib/errors';
import type { Account } from './accounts';
import type { EmulatorContext } from './context';
import { UUID_RE } from './references';

/** Authenticates the bearer key; the account is then `accountOf(res)`. */
export function requireAccount(ctx: EmulatorContext) {
  return (req: Request, res: Response, next: NextFunction): void => {
    res.locals.account = ctx.accounts.authenticate(req.headers.authorization);
    next();
  };
}

export function accountOf(res: Response): Account {
  return res.locals.account as Account;
}

/**
 * The optional region header: echoed on the response, 409 `region_error` when it names another
 * region, 422 when it names no known region. The key is checked first: a request without a valid
 * key gets its 401 whatever its region header says (contract: 401 for a missing key).
 */
export function regionCheck(ctx: EmulatorContext) {
  const known = ['us-west1', 'us-central1'];
  return (req: Request, res: Response, next: NextFunction): void => {
    const requested = req.headers[ctx.brand.regionHeader];
    res.setHeader(ctx.brand.regionHeaderDisplay, ctx.cfg.emulator.region);
    if (requested === undefined) return next();
    res.locals.account = ctx.accounts.authenticate(req.headers.authorization);
    const value = Array.isArray(requested) ? requested[0]! : requested;
    if (!known.includes(value)) {
      throw new ServiceError(422, 'validation_error', `Unknown region ${JSON.stringify(value)}`, {
        shape: 'validation',
        details: [{ loc: ['header', ctx.brand.regionHeaderDisplay], msg: `must be one of ${known.join(', ')}`, type: 'enum' }],
      });
    }
    if (value !== ctx.cfg.emulator.region) {
      throw new ServiceError(409, 'region_error', 'Request reached the wrong region', {
        shape: 'region',
        extra: { expected_region: ctx.cfg.emulator.region, requested_region: value },
      });
    }
    next();
  };
}

/** Path parameter that must be a UUID: a malformed id is a 422 validation error, never a 500. */
export function uuidParam(value: string | undefined, name = 'stream_id'): string {
  if (!value || !UUID_RE.test(value)) {
    throw new ServiceError(422, 'validation_error', `${name} must be a UUID`, {
      shape: 'validation',
      details: [{ loc: ['path', name], msg: 'Input should be a valid UUID', type: 'uuid_parsing' }],
    });
  }
  return value.toLowerCase();
}

/** Renders every error in the contract's shape; unknown errors are logged and become a plain 500. */
export const errorHandler = (ctx: EmulatorContext) => sharedErrorHandler({ logger: ctx.logger });
