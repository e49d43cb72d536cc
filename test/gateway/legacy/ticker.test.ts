import { Ticker } from '../../../src/gateway/legacy/ticker';
import type { TickInfo } from '../../../src/gateway/legacy/ticker';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Ticker', () => {
  test('ticks are anchored in time: slow ticks do not push later ones back', async () => {
    const ticks: TickInfo[] = [];
    const t = new Ticker({
      periodMs: 50,
      maxInFlight: 5,
      onTick: async (tick) => {
        ticks.push(tick);
        await sleep(30); // each run costs most of a period
      },
    });
    const start = Date.now();
    t.start(start);
    await sleep(520);
    t.stop();
    // Every tick is due on the grid start + n × 50, in order: run cost never shifts the grid.
    // (On a loaded machine a tick may be dropped, never shifted.)
    expect(ticks.length).toBeGreaterThanOrEqual(7);
    expect(ticks.length).toBeLessThanOrEqual(11);
    ticks.forEach((tick) => expect((tick.dueAtMs - start) % 50).toBe(0));
    ticks.forEach((tick, i) => i > 0 && expect(tick.dueAtMs).toBeGreaterThan(ticks[i - 1]!.dueAtMs));
    expect(ticks[ticks.length - 1]!.dueAtMs - start).toBeGreaterThanOrEqual(400);
  });

  test('a tick finding maxInFlight runs is skipped and reported, not queued', async () => {
    let runs = 0;
    let skipped = 0;
    const t = new Ticker({
      periodMs: 20,
      maxInFlight: 1,
      onTick: async () => {
        runs++;
        await sleep(75); // spans three more ticks
      },
      onSkip: () => skipped++,
    });
    t.start();
    await sleep(250);
    t.stop();
    await sleep(100);
    expect(runs).toBeGreaterThanOrEqual(3);
    expect(runs).toBeLessThanOrEqual(4);
    expect(skipped).toBeGreaterThanOrEqual(7);
    expect(t.running).toBe(0);
  });

  test('stop() cancels the next tick; errors go to onError', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const t = new Ticker({
      periodMs: 10,
      maxInFlight: 1,
      onTick: async () => {
        runs++;
        throw new Error('boom');
      },
      onError: (e) => errors.push(e),
    });
    t.start();
    await sleep(35);
    t.stop();
    const seen = runs;
    await sleep(50);
    expect(runs).toBe(seen);
    expect(errors.length).toBe(seen);
  });
});
