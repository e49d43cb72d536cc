/**
 * Timers that cannot overflow: Node turns a delay above 2^31-1 ms (or NaN/Infinity) into 1 ms with a
 * TimeoutOverflowWarning, which made a huge `delay_seconds` tick once per millisecond.
 */
import { MAX_TIMER_MS, setLongInterval, setLongTimeout } from '../../src/lib/timers';
import { FakeClock } from '../helpers/fake-clock';
import { Ticker } from '../../src/gateway/legacy/streams/ticker';
import { sleep } from '../helpers/time';

describe('setLongTimeout / setLongInterval (fake clock)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('a delay above 2^31-1 ms fires once, exactly when due, not early', () => {
    const fn = jest.fn();
    const ms = MAX_TIMER_MS + 5000;
    setLongTimeout(fn, ms);
    jest.advanceTimersByTime(ms - 1);
    expect(fn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(10 * MAX_TIMER_MS);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('1e308 ms and Infinity never fire; clear stops a chained timer', () => {
    const fn = jest.fn();
    setLongTimeout(fn, 1e308);
    setLongTimeout(fn, Infinity);
    const cleared = setLongTimeout(fn, MAX_TIMER_MS * 2);
    jest.advanceTimersByTime(MAX_TIMER_MS + 1);
    cleared.clear();
    jest.advanceTimersByTime(5 * MAX_TIMER_MS);
    expect(fn).not.toHaveBeenCalled();
  });

  test('NaN and negative delays run on the next turn, once', () => {
    const fn = jest.fn();
    setLongTimeout(fn, NaN);
    setLongTimeout(fn, -5);
    jest.advanceTimersByTime(0);
    expect(fn).toHaveBeenCalledTimes(2);
  });

  test('an interval above 2^31-1 ms runs once per period until cleared', () => {
    const fn = jest.fn();
    const period = MAX_TIMER_MS + 1;
    const t = setLongInterval(fn, period);
    jest.advanceTimersByTime(period * 3);
    expect(fn).toHaveBeenCalledTimes(3);
    t.clear();
    jest.advanceTimersByTime(period * 3);
    expect(fn).toHaveBeenCalledTimes(3);
  });

  test('a Ticker with a 1e308 ms period ticks once at start, then never again', async () => {
    const clock = new FakeClock(0);
    const ticks: number[] = [];
    const t = new Ticker({ periodMs: 1e308, maxInFlight: 1, clock, onTick: async (tick) => void ticks.push(tick.n) });
    t.start(0);
    for (let i = 0; i < 5; i++) {
      clock.advance(MAX_TIMER_MS);
      await Promise.resolve();
    }
    t.stop();
    expect(ticks).toEqual([0]);
  });
});

describe('no TimeoutOverflowWarning (real timers)', () => {
  test('huge delays arm without a warning and do not fire before a 20 ms timer armed after them', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    const fired = jest.fn();
    const timers = [setLongTimeout(fired, 1e308), setLongTimeout(fired, MAX_TIMER_MS + 1), setLongInterval(fired, 2 ** 40)];
    // An overflowed timer would be a 1 ms one: it would fire before this 20 ms one.
    await sleep(20);
    timers.forEach((t) => t.clear());
    process.off('warning', onWarning);
    expect(fired).not.toHaveBeenCalled();
    expect(warnings.filter((w) => w.name === 'TimeoutOverflowWarning')).toEqual([]);
  });
});
