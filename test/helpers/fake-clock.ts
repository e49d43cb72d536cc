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
 * Counts the calls of `target`'s methods (an upstream client's) whose promises have not settled yet,
 * by wrapping its prototype's methods on the instance. A test moving fake time waits until none is
 * running before the next step (`driveUntil`'s `idle`): a real answer takes no fake time, however
 * slow a loaded machine makes it; otherwise fake time races ahead of it and fires tick deadlines,
 * skips ticks and lapses leases that a correct gateway would never reach.
 */
export function callsInFlight(target: object): () => number {
  let running = 0;
  for (
    let proto = Object.getPrototypeOf(target) as object | null;
    proto && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const method = Object.getOwnPropertyDescriptor(proto, name)?.value as unknown;
      if (name === 'constructor' || typeof method !== 'function' || Object.prototype.hasOwnProperty.call(target, name)) continue;
      Object.defineProperty(target, name, {
        configurable: true,
        writable: true,
        value(this: unknown, ...args: unknown[]) {
          const out = (method as (...a: unknown[]) => unknown).apply(this, args);
          if (out instanceof Promise) {
            running++;
            const done = () => void running--;
            out.then(done, done);
          }
          return out;
        },
      });
    }
  }
  return () => running;
}

/** Waits in real time (no fake time passes) until `idle` holds, at most `boundMs` (then the step goes ahead). */
export async function quiesce(idle: () => boolean, boundMs = 10_000): Promise<void> {
  for (const until = Date.now() + boundMs; !idle() && Date.now() < until;) await sleep(2);
}

/**
 * Moves `clock` on `stepMs` at a time, letting real I/O (sockets, an upstream's answers) run between
 * steps, until `done` holds; throws after `maxSteps` instead of hanging. `idle`: before each step,
 * wait until it holds (no upstream call running, `callsInFlight`).
 */
export async function driveUntil(
  clock: FakeClock,
  done: () => boolean,
  { stepMs = 50, maxSteps = 800, idle }: { stepMs?: number; maxSteps?: number; idle?: () => boolean } = {},
): Promise<void> {
  for (let i = 0; i < maxSteps && !done(); i++) {
    if (idle) await quiesce(idle);
    clock.advance(stepMs);
    for (let j = 0; j < 10 && !done(); j++) await settle();
    if (!done()) await sleep(4);
  }
  if (!done()) throw new Error(`not done after ${maxSteps} steps of ${stepMs} ms`);
}
