/**
 * Store outages as this replica sees them, so that no stream ends as `lease_expired` because Redis
 * was away: a client's keepalive refused with 503 `store_unavailable` must not cost it its stream.
 * Fed by `measuredStore` (./measured.ts: every store call's outcome) or by explicit `failed`/`succeeded`.
 */
import { realClock } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import type { StoreObserver } from './store';

export interface Outage {
  fromMs: number;
  toMs: number;
}

/** Outages remembered: enough for a flapping connection, bounded whatever happens. */
const KEPT = 16;

export class StoreHealth implements StoreObserver {
  private readonly clock: Pick<Clock, 'now'>;
  private down: number | null = null;
  /** Ended outages, oldest first. */
  private readonly past: Outage[] = [];

  constructor(opts: { clock?: Pick<Clock, 'now'> } = {}) {
    this.clock = opts.clock ?? realClock;
  }

  /** When the current outage began (the first failure since the last success); null while up. */
  get downSinceMs(): number | null {
    return this.down;
  }

  /** The latest outage that ended, if any. */
  get lastOutage(): Outage | undefined {
    return this.past[this.past.length - 1];
  }

  /** The observer hook: each store call's outcome. */
  call(_op: string, _seconds: number, failed: boolean): void {
    if (failed) this.failed();
    else this.succeeded();
  }

  failed(nowMs = this.clock.now()): void {
    this.down ??= nowMs;
  }

  succeeded(nowMs = this.clock.now()): void {
    if (this.down === null) return;
    this.past.push({ fromMs: this.down, toMs: nowMs });
    if (this.past.length > KEPT) this.past.shift();
    this.down = null;
  }

  /**
   * When a lease expiring at `expiresAtMs` may end: not while the store is down (null: the record
   * cannot be read, so the check retries later); a lease
   * still valid when an outage began gets until that outage's recovery + `leaseTtlMs` (a keepalive
   * refused during the outage gets a full lease to come again); otherwise its own expiry.
   */
  leaseDeadline(expiresAtMs: number, leaseTtlMs: number): number | null {
    if (this.down !== null) return null;
    let deadline = expiresAtMs;
    for (const o of this.past) if (expiresAtMs >= o.fromMs) deadline = Math.max(deadline, o.toMs + leaseTtlMs);
    return deadline;
  }

  /** True when the lease check may end a stream whose lease expires at `expiresAtMs` (see leaseDeadline). */
  leaseMayEnd(expiresAtMs: number, nowMs: number, leaseTtlMs: number): boolean {
    const deadline = this.leaseDeadline(expiresAtMs, leaseTtlMs);
    return deadline !== null && nowMs >= deadline;
  }
}
