/** The emulated models' answer times: log-normal around the median with the configured p99, a part per frame, seeded. */
import { ModelLatency } from '../../src/emulator/models/latency';
import { loadConfig } from '../../src/config';

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

test('the draws have the configured median and p99 (20,000 of them, a fixed seed)', () => {
  const l = new ModelLatency(7);
  const spec = { medianMs: 700, p99Ms: 2800, perFrameMs: 0 };
  const draws = Array.from({ length: 20_000 }, () => l.draw(spec, 1)).sort((a, b) => a - b);
  expect(quantile(draws, 0.5)).toBeGreaterThan(665);
  expect(quantile(draws, 0.5)).toBeLessThan(735);
  expect(quantile(draws, 0.99)).toBeGreaterThan(2550);
  expect(quantile(draws, 0.99)).toBeLessThan(3050);
  expect(draws[0]).toBeGreaterThan(0);
});

test('the same seed gives the same sequence; another seed another one', () => {
  const spec = { medianMs: 700, p99Ms: 2800, perFrameMs: 0 };
  const run = (seed: number) => {
    const l = new ModelLatency(seed);
    return Array.from({ length: 50 }, () => l.draw(spec, 0));
  };
  expect(run(1)).toEqual(run(1));
  expect(run(1)).not.toEqual(run(2));
});

test('each frame adds its part; no spec, or a zero median, draws no log-normal part', () => {
  const l = new ModelLatency(1);
  expect(l.draw(undefined, 10)).toBe(0);
  expect(l.draw({ medianMs: 0, p99Ms: 0, perFrameMs: 25 }, 4)).toBe(100);
  expect(l.draw({ medianMs: 500, p99Ms: 500, perFrameMs: 10 }, 3)).toBe(530);
});

test('config: off by default; the environment sets it; a p99 below the median fails at boot naming the key', () => {
  expect(loadConfig({ env: {} }).emulator.modelLatency).toEqual({ medianMs: 0, p99Ms: 0, perFrameMs: 0 });
  const cfg = loadConfig({
    env: {
      EMULATOR_MODEL_LATENCY_MEDIAN_MS: '700',
      EMULATOR_MODEL_LATENCY_P99_MS: '2800',
      EMULATOR_MODEL_LATENCY_PER_FRAME_MS: '20',
      EMULATOR_MODEL_LATENCY_SEED: '9',
    },
  });
  expect(cfg.emulator.modelLatency).toEqual({ medianMs: 700, p99Ms: 2800, perFrameMs: 20 });
  expect(cfg.emulator.modelLatencySeed).toBe(9);
  expect(() => loadConfig({ env: {}, overrides: { emulator: { modelLatency: { medianMs: 900, p99Ms: 100 } } } })).toThrow(
    /emulator\.modelLatency\.p99Ms: p99Ms must be at least medianMs/,
  );
});
