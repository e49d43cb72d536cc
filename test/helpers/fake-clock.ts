/**
 * A Clock (src/lib/timers.ts) whose time moves only when a test says so: `advance(ms)` fires every
 * timer due by then, in due order (ties in arming order), each seeing `now()` at its due time;
 * `set(ms)` moves to a given time (backward too).
 */
import type { Clock, TimerHandle } from '../../src/lib/timers';
import { sleep } from './time';

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

  /**
   * Sets the time to `ms`: forward as `advance` (what falls due fires); backward (a wall clock
   * stepped back) only the reading moves, and armed timers keep their due times.
   */
  set(ms: number): void {
    if (ms >= this.t) this.advance(ms - this.t);
    else this.t = ms;
  }

  private next(until: number): Pending | undefined {
    let best: Pending | undefined;
    for (const p of this.timers.values()) if (p.at <= until && (!best || p.at < best.at || (p.at === best.at && p.id < best.id))) best = p;
    return best;
  }
}

/** Lets promise chains started by fired timers run (no time passes). */
export const settle = () => new Promise<void>((r) => setImmediate(r));

/**
 * Moves `clock` on `stepMs` at a time, letting real I/O (sockets, an upstream's answers) run between
 * steps, until `done` holds; throws after `maxSteps` instead of hanging.
 */
export async function driveUntil(clock: FakeClock, done: () => boolean, { stepMs = 50, maxSteps = 800 } = {}): Promise<void> {
  for (let i = 0; i < maxSteps && !done(); i++) {
    clock.advance(stepMs);
    for (let j = 0; j < 10 && !done(); j++) await settle();
    if (!done()) await sleep(4);
  }
  if (!done()) throw new Error(`not done after ${maxSteps} steps of ${stepMs} ms`);
}
