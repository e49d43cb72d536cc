/**
 * The provider's per-user inference rate limit (its error page, "Rate limit headers"): a number of
 * chat completions per second, counted in windows of one wall-clock second. Successful and 429
 * answers carry `x-ratelimit-limit`, `x-ratelimit-remaining` and `x-ratelimit-reset` (the Unix
 * second at which the window resets); a 429 also `retry-after: 1`. Off (0) by default: the
 * contract says the current interface emits no 429.
 */
import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ServiceError } from '../lib/errors';
import { parseBearer } from '../lib/bearer';
import type { EmulatorContext } from './context';
import { accountOf } from './http';

export interface RateWindow {
  limit: number;
  remaining: number;
  /** Unix seconds when the current window ends. */
  reset: number;
}

/** Fixed one-second windows per key, on an injectable clock. Memory: one entry per key that called. */
export class RateLimiter {
  private readonly windows = new Map<string, { second: number; count: number }>();

  constructor(
    readonly limit: number,
    private readonly now: () => number,
  ) {}

  /** Counts one request of `key`; `allowed` is false once the window's limit is spent. */
  take(key: string): RateWindow & { allowed: boolean } {
    const second = Math.floor(this.now() / 1000);
    let w = this.windows.get(key);
    if (!w || w.second !== second) this.windows.set(key, (w = { second, count: 0 }));
    const allowed = w.count < this.limit;
    if (allowed) w.count += 1;
    return { allowed, limit: this.limit, remaining: this.limit - w.count, reset: second + 1 };
  }
}

export function rateLimitHeaders(w: RateWindow): Record<string, string> {
  return { 'x-ratelimit-limit': String(w.limit), 'x-ratelimit-remaining': String(w.remaining), 'x-ratelimit-reset': String(w.reset) };
}

/** The 429 of a spent window (also what an armed 429 fault answers). */
export function rateLimited(w: RateWindow, retryAfterSeconds = 1): ServiceError {
  return new ServiceError(429, 'rate_limit_exceeded', `Rate limit exceeded: at most ${w.limit} requests per second`, {
    shape: 'stream',
    type: 'rate_limit_error',
    headers: { ...rateLimitHeaders(w), 'retry-after': String(retryAfterSeconds) },
  });
}

/**
 * Middleware after authentication: counts the request against its user's (or key's) window, sets
 * the headers on whatever the answer is, and answers 429 once the window is spent.
 * A pass-through when `emulator.rateLimit.completionsPerSecond` is 0.
 */
export function rateLimit(ctx: EmulatorContext) {
  const cfg = ctx.cfg.emulator.rateLimit;
  const limiter = new RateLimiter(cfg.completionsPerSecond, () => ctx.now());
  const keyOf = (req: Request, res: Response): string =>
    cfg.per === 'key'
      ? `k:${createHash('sha256')
          .update(parseBearer(req.headers.authorization) ?? '')
          .digest('base64')}`
      : `a:${accountOf(res).id}`;
  return (req: Request, res: Response, next: NextFunction): void => {
    if (limiter.limit <= 0) return next();
    const w = limiter.take(keyOf(req, res));
    if (!w.allowed) throw rateLimited(w);
    for (const [k, v] of Object.entries(rateLimitHeaders(w))) res.setHeader(k, v);
    next();
  };
}
