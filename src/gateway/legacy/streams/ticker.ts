import { realClock, setLongTimeout, type Clock, type LongTimer } from '../../../lib/timers';

export interface TickInfo {
  /** Tick number since start (0-based); ticks skipped for lateness are not renumbered. */
  n: number;
  /** When the tick was due (wall-clock ms). */
  dueAtMs: number;
  /** How late it fired (ms). */
  latenessMs: number;
}

export type SkipReason = 'in_flight_limit' | 'late';

export interface TickerOptions {
  periodMs: number;
  /** Runs on every tick that is not skipped. */
  onTick(tick: TickInfo): Promise<void>;
  /** Ticks allowed to run at once; a tick finding this many running is skipped. */
  maxInFlight: number;
  /**
   * Ticks that do not run: `in_flight_limit`, a due tick finding `maxInFlight` runs going (`tick`
   * is it); `late`, `count` ticks due while the timer could not fire (a paused or saturated
   * process), dropped and never replayed (`tick` is the one that does fire).
   */
  onSkip?(tick: TickInfo, reason: SkipReason, count: number): void;
  onError?(err: unknown): void;
  /** Time and timers (default: the real clock). */
  clock?: Clock;
}

/**
 * A fixed-rate ticker anchored in time: tick n is due at start + n × period, whatever the previous
 * ticks cost, so cadence never drifts. A tick that finds `maxInFlight` runs still going is skipped
 * (and reported), never queued: a slow upstream must not build a backlog.
 */
export class Ticker {
  private timer: LongTimer | undefined;
  private startAtMs = 0;
  private n = 0;
  private inFlight = 0;
  private stopped = true;
  private readonly clock: Clock;

  constructor(private readonly opts: TickerOptions) {
    this.clock = opts.clock ?? realClock;
  }

  private now(): number {
    return this.clock.now();
  }

  /**
   * Starts with tick `firstN` due at `gridStartMs` + `firstN` × period (defaults: now, tick 0). A
   * replica taking over a stream resumes its grid and numbering where the previous owner left off.
   */
  start(gridStartMs: number = this.now(), firstN = 0): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.startAtMs = gridStartMs;
    this.n = firstN;
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.clear();
    this.timer = undefined;
  }

  private arm(): void {
    if (this.stopped) return;
    const due = this.startAtMs + this.n * this.opts.periodMs;
    // A long period must not overflow into a 1 ms timer (that fired a tick per millisecond).
    this.timer = setLongTimeout(() => this.fire(due), due - this.now(), { ref: true, clock: this.clock });
  }

  private fire(dueAtMs: number): void {
    if (this.stopped) return;
    const now = this.now();
    const tick: TickInfo = { n: this.n, dueAtMs, latenessMs: Math.max(0, now - dueAtMs) };
    // Ticks missed entirely (process paused longer than a period) are dropped, not replayed.
    const behind = Math.max(0, Math.floor((now - dueAtMs) / this.opts.periodMs));
    this.n += 1 + behind;
    this.arm();
    if (behind > 0) this.opts.onSkip?.(tick, 'late', behind);
    if (this.inFlight >= this.opts.maxInFlight) {
      this.opts.onSkip?.(tick, 'in_flight_limit', 1);
      return;
    }
    this.inFlight++;
    this.opts
      .onTick(tick)
      .catch((err: unknown) => this.opts.onError?.(err))
      .finally(() => {
        this.inFlight--;
      });
  }
}
