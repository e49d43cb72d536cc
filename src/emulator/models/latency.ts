/**
 * How long an emulated model takes to answer, like a hosted vision model: log-normal around a
 * median with a long tail (`p99Ms`), plus `perFrameMs` for every frame the request carries. Drawn
 * from a seeded generator, so a test or bench run sees the same sequence of latencies each time.
 * Off (0 ms) unless configured (`emulator.modelLatency`, or a model's own `latency`).
 */

import { seededRandom } from '../../lib/prng';

export interface LatencySpec {
  /** Median of the log-normal part (0: none). */
  medianMs: number;
  /** Its 99th percentile (at least the median). */
  p99Ms: number;
  /** Added per frame of the request (the provider's latency grows with the visual tokens). */
  perFrameMs: number;
}

/** z of the normal distribution's 99th percentile. */
const Z99 = 2.3263478740408408;

export class ModelLatency {
  private readonly random: () => number;

  constructor(seed: number) {
    this.random = seededRandom(seed);
  }

  /** One draw for a request of `frames` frames (ms, rounded). */
  draw(spec: LatencySpec | undefined, frames: number): number {
    if (!spec) return 0;
    const perFrame = spec.perFrameMs * Math.max(0, frames);
    if (spec.medianMs <= 0) return Math.round(perFrame);
    const sigma = spec.p99Ms > spec.medianMs ? Math.log(spec.p99Ms / spec.medianMs) / Z99 : 0;
    // Box–Muller: a standard normal from two uniforms (1 − u keeps the log away from 0).
    const z = Math.sqrt(-2 * Math.log(1 - this.random())) * Math.cos(2 * Math.PI * this.random());
    return Math.round(spec.medianMs * Math.exp(sigma * z) + perFrame);
  }
}
