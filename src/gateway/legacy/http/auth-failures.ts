/**
 * Cheap refusals for bad keys, so unknown keys cannot each cost an upstream call and one client
 * cannot probe keys at will: a negative cache of refused keys (by hash, bounded, short TTL) and a
 * per-client-address budget of failed authentications (HTTP and results socket), which never
 * refuses a key verified recently (a positive cache of accepted key hashes). All forget on their
 * own; none holds a raw key.
 */
import type { LRUCache } from 'lru-cache';
import { ServiceError } from '../../../lib/errors';
import { memoKeyHash } from '../../../lib/keys';
import { expiring } from '../../../lib/expiring-cache';
import { realClock } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';

const WINDOW_MS = 60_000;
/** Client addresses tracked at once; past it the least recent are forgotten (a flood of addresses cannot grow memory). */
const MAX_IPS = 50_000;
/** Accepted key hashes remembered, and for how long after their latest acceptance. */
const ACCEPTED_KEYS = 10_000;
const ACCEPTED_TTL_MS = 5 * 60_000;

export interface FailedAuthLimiterOptions {
  /** Failed authentications one client address may have per minute; 0: no limit. */
  perMinute: number;
  /** Time of the windows and of the accepted keys (default the real clock). */
  clock?: Pick<Clock, 'now'>;
  /** An address just used up its budget (once per window): the gateway logs it. */
  onOverBudget?(ip: string): void;
}

/**
 * Failed authentications per client address (`server.trustProxy` decides what that is) in a fixed
 * one-minute window. Over the budget, requests from that address are refused before any key check
 * until the window ends, except those whose key was accepted in the last 5 minutes: the budget
 * stops probing for keys, and must not lock out a customer who shares the address (a balancer's,
 * a NAT's) with the prober. It only waives the refusal: the key is still checked as always, and a
 * key refused again (revoked) loses the waiver.
 */
export class FailedAuthLimiter {
  private readonly perMinute: number;
  private readonly clock: Pick<Clock, 'now'>;
  private readonly windows: LRUCache<string, { count: number; startMs: number }>;
  private readonly accepted: LRUCache<string, true>;

  constructor(private readonly opts: FailedAuthLimiterOptions) {
    this.perMinute = opts.perMinute;
    this.clock = opts.clock ?? realClock;
    this.windows = expiring(MAX_IPS, WINDOW_MS, opts.clock);
    this.accepted = expiring(ACCEPTED_KEYS, ACCEPTED_TTL_MS, opts.clock);
  }

  /** Ms until `ip` may try `apiKey` (or no key); 0 when it may now: within budget, or the key was accepted recently. */
  blockedForMs(ip: string, apiKey?: string): number {
    if (this.perMinute <= 0) return 0;
    const w = this.window(ip);
    if (!w || w.count < this.perMinute) return 0;
    if (apiKey !== undefined && this.accepted.has(memoKeyHash(apiKey))) return 0;
    return Math.max(1, w.startMs + WINDOW_MS - this.clock.now());
  }

  /** `apiKey` was verified (the upstream knows it): the budget lets it through for the next 5 minutes. */
  accept(apiKey: string): void {
    if (this.perMinute > 0) this.accepted.set(memoKeyHash(apiKey), true);
  }

  /** A failed authentication from `ip`; `apiKey`, when the upstream refused it, loses its waiver. */
  fail(ip: string, apiKey?: string): void {
    if (this.perMinute <= 0) return;
    if (apiKey !== undefined) this.accepted.delete(memoKeyHash(apiKey));
    const w = this.window(ip);
    if (w) w.count++;
    else this.windows.set(ip, { count: 1, startMs: this.clock.now() });
    if ((w?.count ?? 1) === this.perMinute) this.opts.onOverBudget?.(ip);
  }

  /** The address's window while it lasts (the cache keeps an entry up to its last millisecond). */
  private window(ip: string): { count: number; startMs: number } | undefined {
    const w = this.windows.get(ip);
    return w && w.startMs + WINDOW_MS > this.clock.now() ? w : undefined;
  }

  /** Key hashes remembered as accepted (tests). */
  get acceptedCount(): number {
    return this.accepted.size;
  }

  /**
   * The HTTP refusal: 503 with `retry-after`, not 429 (legacy clients read 429 as their 5-stream
   * limit) and not 401 (fatal, and the key may be fine: the budget is per client address).
   */
  refusal(blockedMs: number): ServiceError {
    return new ServiceError(503, 'auth_rate_limited', 'Too many failed authentications from this address; retry later', {
      shape: 'legacy',
      details: null,
      headers: { 'retry-after': String(Math.ceil(blockedMs / 1000)) },
    });
  }
}
