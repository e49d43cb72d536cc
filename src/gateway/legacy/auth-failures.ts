/**
 * Cheap refusals for bad keys, so unknown keys cannot each cost an upstream call and one client
 * cannot probe keys at will: a negative cache of refused keys (by hash, bounded, short TTL) and a
 * per-IP budget of failed authentications (HTTP and results socket). Both forget on their own.
 */
import { ServiceError } from '../../lib/errors';

/** A Map with a size bound (oldest entries dropped first) whose entries expire. */
class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V; untilMs: number }>();

  constructor(
    private readonly maxSize: number,
    private readonly now: () => number,
  ) {}

  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.untilMs <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value;
  }

  set(key: string, value: V, ttlMs: number): void {
    this.entries.delete(key);
    this.entries.set(key, { value, untilMs: this.now() + ttlMs });
    while (this.entries.size > this.maxSize) this.entries.delete(this.entries.keys().next().value!);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Key hashes the upstream refused (401/403), remembered for `ttlMs`. */
export class NegativeKeyCache {
  private readonly refused: ExpiringMap<true>;

  constructor(
    private readonly ttlMs: number,
    maxSize: number,
    now: () => number = Date.now,
  ) {
    this.refused = new ExpiringMap(maxSize, now);
  }

  has(keyHash: string): boolean {
    return this.ttlMs > 0 && this.refused.get(keyHash) === true;
  }

  add(keyHash: string): void {
    if (this.ttlMs > 0) this.refused.set(keyHash, true, this.ttlMs);
  }

  get size(): number {
    return this.refused.size;
  }
}

const WINDOW_MS = 60_000;
/** Client IPs tracked at once; past it the oldest are forgotten (a flood of IPs cannot grow memory). */
const MAX_IPS = 50_000;

/**
 * Failed authentications per client IP in a fixed one-minute window. Over the budget, requests
 * from that IP are refused before any key check until the window ends.
 */
export class FailedAuthLimiter {
  private readonly windows: ExpiringMap<{ count: number; startMs: number }>;

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.windows = new ExpiringMap(MAX_IPS, now);
  }

  /** Ms until `ip` may try again; 0 when it may now. */
  blockedForMs(ip: string): number {
    if (this.perMinute <= 0) return 0;
    const w = this.windows.get(ip);
    if (!w || w.count < this.perMinute) return 0;
    return Math.max(1, w.startMs + WINDOW_MS - this.now());
  }

  fail(ip: string): void {
    if (this.perMinute <= 0) return;
    const w = this.windows.get(ip);
    if (w) w.count++;
    else this.windows.set(ip, { count: 1, startMs: this.now() }, WINDOW_MS);
  }

  /**
   * The HTTP refusal: 503 with `retry-after`, not 429 (legacy clients read 429 as their 5-stream
   * limit) and not 401 (fatal, and the key may be fine: the budget is per IP).
   */
  refusal(blockedMs: number): ServiceError {
    return new ServiceError(503, 'auth_rate_limited', 'Too many failed authentications from this address; retry later', {
      shape: 'legacy',
      details: null,
      headers: { 'retry-after': String(Math.ceil(blockedMs / 1000)) },
    });
  }
}
