/**
 * Timers that cannot overflow. Node stores a timer's delay in a signed 32-bit int: anything above
 * 2^31-1 ms (~24.8 days), and NaN or Infinity, becomes 1 ms with a TimeoutOverflowWarning, so a
 * huge delay fires at once, over and over. These helpers chain shorter timers instead.
 */

/** The largest delay `setTimeout` honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A pending timer of a Clock; `unref` where the clock's timers can hold the process. */
export interface TimerHandle {
  unref?(): unknown;
}

/**
 * Time as code that schedules reads it: wall-clock ms and one-shot timers. Injected so that
 * lease, keepalive and tick behaviour can be tested with fake time (test/helpers/fake-clock.ts).
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(timer: TimerHandle | undefined): void;
}

/** The process's own clock: Date.now and Node's timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};

export interface TimerOptions {
  /** Keep the process alive while pending (default: unref'd). */
  ref?: boolean;
  clock?: Clock;
}

export interface LongTimer {
  clear(): void;
}

/**
 * Runs `fn` once after `ms` (negative or NaN → 0; Infinity → never), in steps of at most
 * MAX_TIMER_MS. Unref'd unless `ref` is set: these timers never keep the process alive.
 */
export function setLongTimeout(fn: () => void, ms: number, opts: TimerOptions = {}): LongTimer {
  const clock = opts.clock ?? realClock;
  let remaining = Number.isNaN(ms) ? 0 : Math.max(0, ms);
  let timer: TimerHandle | undefined;
  const arm = () => {
    const step = Math.min(remaining, MAX_TIMER_MS);
    timer = clock.setTimeout(() => {
      remaining -= step;
      if (remaining > 0) arm();
      else fn();
    }, step);
    if (!opts.ref) timer.unref?.();
  };
  arm();
  return { clear: () => clock.clearTimeout(timer) };
}

/** Runs `fn` every `ms` (same bounds as setLongTimeout); the next run is armed before `fn` runs. */
export function setLongInterval(fn: () => void, ms: number, opts: TimerOptions = {}): LongTimer {
  let current: LongTimer;
  let cleared = false;
  const arm = () => {
    current = setLongTimeout(
      () => {
        if (cleared) return;
        arm();
        fn();
      },
      ms,
      opts,
    );
  };
  arm();
  return {
    clear: () => {
      cleared = true;
      current.clear();
    },
  };
}
