/**
 * A Clock (src/lib/timers.ts) whose time moves only when a test says so: `advance(ms)` fires every
 * timer due by then, in due order (ties in arming order), each seeing `now()` at its due time.
 */
import type { Clock, TimerHandle } from '../../src/lib/timers';

interface Pending {
  id: number;
  at: number;
  fn: () => void;
}

export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly timers = new Map<number, Pending>();

  constructor(startMs = 1_700_000_000_000) {
    this.t = startMs;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle & { id: number } {
    const id = ++this.seq;
    this.timers.set(id, { id, at: this.t + Math.max(0, Number.isFinite(ms) ? ms : 0), fn });
    return { id };
  }

  clearTimeout(timer: TimerHandle | undefined): void {
    if (timer && 'id' in timer) this.timers.delete((timer as { id: number }).id);
  }

  /** Timers armed and not yet fired or cleared. */
  get pending(): number {
    return this.timers.size;
  }

  /** When the next timer is due (undefined: none armed). */
  get nextDueMs(): number | undefined {
    return this.next(Infinity)?.at;
  }

  /** Moves time forward by `ms`, firing what falls due (timers armed meanwhile included). */
  advance(ms: number): void {
    const end = this.t + ms;
    for (let p = this.next(end); p; p = this.next(end)) {
      this.timers.delete(p.id);
      this.t = p.at;
      p.fn();
    }
    this.t = end;
  }

  private next(until: number): Pending | undefined {
    let best: Pending | undefined;
    for (const p of this.timers.values()) if (p.at <= until && (!best || p.at < best.at || (p.at === best.at && p.id < best.id))) best = p;
    return best;
  }
}

/** Lets promise chains started by fired timers run (no time passes). */
export const settle = () => new Promise<void>((r) => setImmediate(r));
