import type { Logger } from '../../lib/logger';
import { detached } from '../../lib/spans';
import { realClock } from '../../lib/timers';
import type { Clock, TimerHandle } from '../../lib/timers';

/** How long a settled request waits for its telemetry at most, and how many wait at most. */
export const SETTLED_BATCH_MS = 50;
export const SETTLED_BATCH_MAX = 256;

/**
 * Settled requests whose telemetry (metrics, access line, migration counters) runs in batches:
 * `windowMs` after the first one waits, at once when `max` wait, and on `flush()` (before a scrape
 * or a counter flush reads what they feed). Run back to back the same work costs less than run
 * between two proxied requests, whose own code has pushed it out of the caches (the figures:
 * docs/decisions/0004-libraries-before-forks.md). A batch runs in arrival order, outside any span;
 * a handler that throws is logged and the rest of the batch still runs.
 */
export class SettledBatch<E> {
  private pending: E[] = [];
  private timer: TimerHandle | undefined;
  private closed = false;
  private readonly clock: Clock;
  private readonly windowMs: number;
  private readonly max: number;

  constructor(
    private readonly handle: (e: E) => void,
    private readonly logger: Logger,
    opts: { windowMs?: number; max?: number; clock?: Clock } = {},
  ) {
    this.clock = opts.clock ?? realClock;
    this.windowMs = opts.windowMs ?? SETTLED_BATCH_MS;
    this.max = opts.max ?? SETTLED_BATCH_MAX;
  }

  /** Events waiting for the next batch. */
  get size(): number {
    return this.pending.length;
  }

  push(e: E): void {
    this.pending.push(e);
    if (this.closed || this.pending.length >= this.max) this.flush();
    else if (this.timer === undefined) {
      this.timer = this.clock.setTimeout(this.flush, this.windowMs);
      this.timer.unref?.();
    }
  }

  /** Runs every waiting event's telemetry now. */
  readonly flush = (): void => {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    if (!batch.length) return;
    this.pending = [];
    // Outside any span: the timer or the caller that runs the batch is some other request's.
    detached(() => {
      for (const e of batch) {
        try {
          this.handle(e);
        } catch (err) {
          this.logger.error({ err }, 'request telemetry failed');
        }
      }
    });
  };

  /** Runs what waits, then every later event at once (shutdown: no timer left to outlive the process). */
  close(): void {
    this.closed = true;
    this.flush();
  }
}
