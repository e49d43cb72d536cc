/**
 * Pixel-path benchmark: per-frame cost of rendering the test pattern, storing it (JPEG via
 * sharp), decoding the JPEG and reading the pattern back, at 320x240 and 640x480 (stored 320
 * wide, as the frame buffer does by default). Prints figures; asserts nothing.
 */
import { performance } from 'node:perf_hooks';
import { quantile } from '../test/helpers/util';
import { decodeJpeg, encodeFrame, i420ToRgb } from '../src/emulator/frames/codec';
import { PatternRenderer, decodePattern } from '../src/emulator/frames/pattern';

export interface PatternBenchRow {
  size: string;
  step: string;
  p50Ms: number;
  p99Ms: number;
  opsPerSec: number;
}

export interface PatternBenchOptions {
  /** Timed iterations per step (default 200, after 20 warm-up runs). */
  iterations?: number;
  storeWidth?: number;
  quality?: number;
  log?: (line: string) => void;
}

async function measure(iterations: number, fn: (i: number) => unknown): Promise<{ p50: number; p99: number; mean: number }> {
  for (let i = 0; i < 20; i++) await fn(i);
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t = performance.now();
    await fn(i);
    times.push(performance.now() - t);
  }
  return { p50: quantile(times, 0.5), p99: quantile(times, 0.99), mean: times.reduce((s, t) => s + t, 0) / times.length };
}

export async function benchPattern(opts: PatternBenchOptions = {}): Promise<PatternBenchRow[]> {
  const iterations = opts.iterations ?? 200;
  const storeWidth = opts.storeWidth ?? 320;
  const quality = opts.quality ?? 75;
  const log = opts.log ?? ((line: string) => console.log(line));
  const rows: PatternBenchRow[] = [];

  for (const [width, height] of [
    [320, 240],
    [640, 480],
  ] as const) {
    const size = `${width}x${height}`;
    const renderer = new PatternRenderer(width, height);
    const rgb = renderer.renderRgb(123456);
    const yuv = renderer.renderI420(123456);
    const raw = { width, height, format: 'rgb' as const, data: rgb };
    const jpeg = await encodeFrame(raw, { storeWidth, quality });
    const pixels = await decodeJpeg(jpeg);
    if (decodePattern(pixels) !== 123456) throw new Error(`pattern did not survive at ${size}`);

    const steps: [string, (i: number) => unknown][] = [
      ['render rgb', (i) => renderer.renderRgb(i)],
      ['render i420', (i) => renderer.renderI420(i)],
      ['i420 -> rgb', () => i420ToRgb(width, height, yuv)],
      [`encode (store ${storeWidth}w q${quality})`, () => encodeFrame(raw, { storeWidth, quality })],
      ['decode jpeg', () => decodeJpeg(jpeg)],
      ['decode pattern', () => decodePattern(pixels)],
      [
        'render+encode+decode+pattern',
        async (i) => {
          const stored = await encodeFrame({ width, height, format: 'rgb', data: renderer.renderRgb(i) }, { storeWidth, quality });
          return decodePattern(await decodeJpeg(stored));
        },
      ],
    ];
    for (const [step, fn] of steps) {
      const m = await measure(iterations, fn);
      const row = { size, step, p50Ms: m.p50, p99Ms: m.p99, opsPerSec: 1000 / m.mean };
      rows.push(row);
      log(
        `${size.padEnd(8)} ${step.padEnd(30)} p50 ${row.p50Ms.toFixed(3).padStart(8)} ms  p99 ${row.p99Ms
          .toFixed(3)
          .padStart(8)} ms  ${Math.round(row.opsPerSec).toString().padStart(7)} ops/s`,
      );
    }
    log(`${size.padEnd(8)} stored jpeg ${jpeg.length} bytes`);
  }
  return rows;
}
