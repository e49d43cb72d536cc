import { Ticker } from '../../../src/gateway/legacy/streams/ticker';
import type { TickInfo } from '../../../src/gateway/legacy/streams/ticker';
import { FakeClock, settle } from '../../helpers/fake-clock';

/** A run that ends when the test says so. */
function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

describe('Ticker (fake time)', () => {
  test('ticks are anchored in time: slow ticks do not push later ones back', async () => {
    const clock = new FakeClock();
    const ticks: TickInfo[] = [];
    const runs: Array<() => void> = [];
    const t = new Ticker({
      periodMs: 50,
      maxInFlight: 5,
      clock,
      onTick: (tick) => {
        ticks.push(tick);
        const g = gate();
        runs.push(g.open);
        return g.p;
      },
    });
    const start = clock.now();
    t.start(start);
    for (let i = 0; i < 10; i++) {
      clock.advance(30); // a run costs most of a period…
      runs.shift()?.();
      await settle();
      clock.advance(20);
    }
    t.stop();
    // …yet every tick is due on the grid start + n × 50, none late, none missing.
    expect(ticks.map((k) => k.dueAtMs - start)).toEqual([0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500]);
    expect(ticks.every((k) => k.latenessMs === 0)).toBe(true);
  });

  test('a tick finding maxInFlight runs is skipped and reported, not queued', async () => {
    const clock = new FakeClock();
    const events: string[] = [];
    let finish: (() => void) | undefined;
    const t = new Ticker({
      periodMs: 20,
      maxInFlight: 1,
      clock,
      onTick: (tick) => {
        events.push(`run ${tick.n}`);
        const g = gate();
        finish = g.open;
        return g.p;
      },
      onSkip: (tick, reason) => events.push(`skip ${tick.n} ${reason}`),
    });
    const start = clock.now();
    t.start(start);
    clock.advance(60); // ticks 1-3 find run 0 still going
    finish!();
    await settle();
    clock.advance(20); // tick 4 runs
    expect(events).toEqual(['run 0', 'skip 1 in_flight_limit', 'skip 2 in_flight_limit', 'skip 3 in_flight_limit', 'run 4']);
    t.stop();
    finish!(); // run 4 ends after the stop: its place is given back all the same
    await settle();
    // Started again on the same grid, tick 5 finds no run going.
    t.start(start, 5);
    clock.advance(20);
    expect(events.slice(5)).toEqual(['run 5']);
    t.stop();
    finish!();
    await settle();
  });

  test('ticks due while the timer could not fire (a paused process) are dropped and counted late, never replayed', async () => {
    let now = 0;
    let pending: (() => void) | undefined;
    // A clock whose timer fires only when the test says, at whatever time it is then.
    const clock = { now: () => now, setTimeout: (fn: () => void) => ((pending = fn), {}), clearTimeout: () => undefined };
    const events: string[] = [];
    const t = new Ticker({
      periodMs: 100,
      maxInFlight: 3,
      clock,
      onTick: async (tick) => void events.push(`run ${tick.n} late ${tick.latenessMs}`),
      onSkip: (tick, reason, count) => events.push(`skip ${reason} ${count} at ${tick.n}`),
    });
    t.start(0);
    pending!(); // tick 0, on time
    now = 450; // paused through ticks 1-4
    pending!();
    now = 500;
    pending!();
    t.stop();
    expect(events).toEqual(['run 0 late 0', 'skip late 3 at 1', 'run 1 late 350', 'run 5 late 0']);
  });

  test('stop() cancels the next tick; errors go to onError', async () => {
    const clock = new FakeClock();
    const errors: unknown[] = [];
    let runs = 0;
    const t = new Ticker({
      periodMs: 10,
      maxInFlight: 1,
      clock,
      onTick: async () => {
        runs++;
        throw new Error('boom');
      },
      onError: (e) => errors.push(e),
    });
    t.start();
    clock.advance(0);
    await settle();
    clock.advance(10);
    await settle();
    t.stop();
    expect(clock.pending).toBe(0);
    clock.advance(100);
    await settle();
    expect(runs).toBe(2);
    expect(errors).toHaveLength(2);
  });
});

describe('Ticker resuming a grid (fleet takeover)', () => {
  test('start(grid, n) fires tick n at grid + n × period and numbers on from there', async () => {
    const clock = new FakeClock();
    const grid = clock.now() - 1250; // the previous owner started 1.25 periods of 1000 ms ago
    const ticks: TickInfo[] = [];
    const t = new Ticker({ periodMs: 1000, maxInFlight: 1, clock, onTick: async (tick) => void ticks.push(tick) });
    t.start(grid, 2);
    clock.advance(749);
    expect(ticks).toHaveLength(0);
    clock.advance(1);
    await settle();
    clock.advance(1000);
    t.stop();
    expect(ticks.map((k) => [k.n, k.dueAtMs - grid])).toEqual([
      [2, 2000],
      [3, 3000],
    ]);
  });
});
