import type { RelayConfig } from '../../config';
import type { ClipSpec, FrameSpec } from '../legacy';

/**
 * Frames per second a relay forwards for a session: what its inferences can use, not the camera's
 * rate (every relayed frame costs a VP8 encode here and a decode upstream).
 * - clip: `target_fps` (the clip reference asks for `max_fps = target_fps`), capped by `maxFps`;
 * - frame: `framesPerInterval` per `interval_seconds`, so the newest frame a tick reads is at most
 *   half an interval old, within `[minFps, maxFps]`.
 */
export type RateSpec = { mode: 'clip'; clip: Pick<ClipSpec, 'targetFps'> } | { mode: 'frame'; frame: FrameSpec };

export function relayFps(spec: RateSpec, cfg: Pick<RelayConfig, 'maxFps' | 'minFps' | 'framesPerInterval'>): number {
  if (spec.mode === 'clip') return Math.min(spec.clip.targetFps, cfg.maxFps);
  const wanted = (cfg.framesPerInterval * 1000) / spec.frame.intervalMs;
  return Math.min(cfg.maxFps, Math.max(cfg.minFps, wanted));
}

/** Slack for timer and clock rounding when comparing a spacing with the period. */
const SPACING_SLACK_MS = 0.5;
/** A target within this factor of the source's rate counts as "every frame". */
const FULL_RATE_FACTOR = 1.05;

/**
 * Picks which incoming frames to forward, the way the upstream clip sampler picks frames for
 * `max_fps`: greedily, each forwarded frame at least one period after the previous one. So the
 * relay forwards at most `fps` frames a second, and the frames a clip at that rate would use (an
 * anchored schedule would forward as many, but with spacings under the period, which the upstream
 * sampler then skips). A source slower than `fps` passes whole. When the target is the source's own
 * rate (30 fps asked of a 30 fps camera), a period-exact rule would drop every frame that arrives a
 * little early; then spacings down to half a source frame interval pass (only bursts are cut).
 */
export class FrameSampler {
  private readonly periodMs: number;
  private last = Number.NEGATIVE_INFINITY;
  private prevArrival: number | undefined;
  /** Smoothed interval between source frames (ms). */
  private sourceIntervalMs: number | undefined;

  constructor(readonly fps: number) {
    this.periodMs = 1000 / fps;
  }

  /** True when the frame arriving at `nowMs` should be forwarded. */
  admit(nowMs: number): boolean {
    if (this.prevArrival !== undefined) {
      const d = nowMs - this.prevArrival;
      if (d > 0 && d < 2000) this.sourceIntervalMs = this.sourceIntervalMs === undefined ? d : this.sourceIntervalMs * 0.9 + d * 0.1;
    }
    this.prevArrival = nowMs;
    const src = this.sourceIntervalMs;
    const tolerance = src !== undefined && this.periodMs <= src * FULL_RATE_FACTOR ? src / 2 : SPACING_SLACK_MS;
    if (nowMs - this.last < this.periodMs - tolerance) return false;
    this.last = nowMs;
    return true;
  }
}
