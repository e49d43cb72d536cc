import { FrameSampler, relayFps } from '../../../src/gateway/ingest/rate';

const cfg = { maxFps: 30, minFps: 1, framesPerInterval: 2 };

describe('relayFps', () => {
  test.each([
    [{ mode: 'clip' as const, clip: { targetFps: 2 } }, cfg, 2],
    [{ mode: 'clip' as const, clip: { targetFps: 30 } }, { ...cfg, maxFps: 15 }, 15],
    [{ mode: 'frame' as const, frame: { intervalMs: 500 } }, cfg, 4],
    [{ mode: 'frame' as const, frame: { intervalMs: 10_000 } }, cfg, 1], // floor: the newest frame stays ≤ 1 s old
    [{ mode: 'frame' as const, frame: { intervalMs: 20 } }, cfg, 30], // cap
    [{ mode: 'frame' as const, frame: { intervalMs: 2000 } }, { ...cfg, framesPerInterval: 4 }, 2],
  ])('%j with %j → %d fps', (spec, c, fps) => {
    expect(relayFps(spec, c)).toBe(fps);
  });
});

/** Frames admitted out of arrivals at `sourceFps` (with ±jitter ms) during `seconds`. */
function run(targetFps: number, sourceFps: number, seconds: number, jitterMs = 0): number[] {
  const sampler = new FrameSampler(targetFps);
  const admitted: number[] = [];
  let seed = 7;
  const rand = () => ((seed = (seed * 48271) % 2147483647) / 2147483647) * 2 - 1;
  for (let i = 0; i < sourceFps * seconds; i++) {
    const t = (i * 1000) / sourceFps + rand() * jitterMs;
    if (sampler.admit(t)) admitted.push(t);
  }
  return admitted;
}

describe('FrameSampler', () => {
  test('forwards at most the target rate, every spacing at least one period (what a max_fps sampler keeps)', () => {
    const admitted = run(2, 30, 10, 4);
    expect(admitted.length).toBeGreaterThanOrEqual(18);
    expect(admitted.length).toBeLessThanOrEqual(20);
    for (let i = 1; i < admitted.length; i++) expect(admitted[i]! - admitted[i - 1]!).toBeGreaterThanOrEqual(499.5);
  });

  test('a source slower than the target passes whole', () => {
    expect(run(30, 20, 5)).toHaveLength(100);
    expect(run(5, 5, 5)).toHaveLength(25);
  });

  test('a target equal to the source rate forwards (nearly) every frame despite jitter, never more than the source', () => {
    const admitted = run(30, 30, 10, 3);
    expect(admitted.length).toBeGreaterThanOrEqual(290);
    expect(admitted.length).toBeLessThanOrEqual(300);
  });

  test('a target somewhat under the source rate stays under the target', () => {
    const admitted = run(25, 30, 10, 3);
    expect(admitted.length).toBeLessThanOrEqual(250);
    for (let i = 1; i < admitted.length; i++) expect(admitted[i]! - admitted[i - 1]!).toBeGreaterThanOrEqual(39.5);
  });

  test('the first frame always passes; a burst does not', () => {
    const s = new FrameSampler(1);
    expect(s.admit(1000)).toBe(true);
    expect(s.admit(1001)).toBe(false);
    expect(s.admit(1999.6)).toBe(true);
    expect(s.admit(2000)).toBe(false);
  });
});
