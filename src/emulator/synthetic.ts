import { performance } from 'node:perf_hooks';
import { validationError } from '../lib/errors';
import { PatternRenderer } from './frames/pattern';
import type { PatternStyle } from './frames/pattern';
import type { RawFrame } from './frames/types';

/** A second consumer of the frames, fed planar I420 only while it wants them (the room's viewers). */
export interface LiveVideoOutlet {
  readonly watched: boolean;
  push(frame: { width: number; height: number; data: Uint8Array }): void;
}

export interface SyntheticPublisherOptions {
  fps: number;
  width: number;
  height: number;
  /** The index to paint into the next frame: the stream's next lifetime index. */
  nextIndex: () => number;
  sink: (raw: RawFrame) => void;
  /** Pixel format handed to the sink (default `rgb`; `i420` is rendered natively, no conversion). */
  format?: 'rgb' | 'i420';
  style?: PatternStyle;
  /** Also gets each frame, as I420, while it is watched. */
  live?: LiveVideoOutlet;
  /** Called when nextIndex, rendering or the sink throws; the publisher keeps going. */
  onError?: (err: unknown) => void;
  /** Monotonic clock in ms (default performance.now); for tests. */
  now?: () => number;
}

const MAX_FPS = 240;

/**
 * Publishes test-pattern frames at a fixed rate, anchored to its start time: frame n is due at
 * start + n / fps, so timer jitter never accumulates into drift. When it falls behind (a busy
 * event loop) it skips the frames whose time has passed instead of sending a burst.
 */
export class SyntheticPublisher {
  private readonly renderer: PatternRenderer;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  /** Number (since start) of the next frame to send. */
  private next = 0;
  private sent = 0;
  private skipped = 0;
  private failures = 0;
  private active = false;

  constructor(private readonly opts: SyntheticPublisherOptions) {
    if (!(typeof opts.fps === 'number' && opts.fps > 0 && opts.fps <= MAX_FPS)) {
      throw validationError('Synthetic fps out of range', [
        { loc: ['fps'], msg: `must be > 0 and <= ${MAX_FPS}; got ${String(opts.fps)}`, type: 'value_error' },
      ]);
    }
    this.renderer = new PatternRenderer(opts.width, opts.height, opts.style);
    this.now = opts.now ?? (() => performance.now());
  }

  get running(): boolean {
    return this.active;
  }

  /** Frames handed to the sink since construction. */
  get framesSent(): number {
    return this.sent;
  }

  /** Frames dropped because their time had passed (the publisher was late). */
  get framesSkipped(): number {
    return this.skipped;
  }

  /** Frames lost to an error in nextIndex, rendering or the sink. */
  get errors(): number {
    return this.failures;
  }

  start(): void {
    if (this.active) return;
    this.active = true;
    this.startedAt = this.now();
    this.next = 0;
    this.schedule(0);
  }

  stop(): void {
    this.active = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private dueAt(n: number): number {
    return this.startedAt + (n * 1000) / this.opts.fps;
  }

  private schedule(delayMs: number): void {
    // Kept ref'd on purpose: a running publisher is live work, and stop() must be called (tests
    // catch a forgotten one as an open handle).
    this.timer = setTimeout(() => this.tick(), Math.max(0, delayMs));
  }

  private tick(): void {
    this.timer = undefined;
    if (!this.active) return;
    const elapsed = this.now() - this.startedAt;
    // The newest frame whose time has come (tiny epsilon: float error at exact boundaries).
    const due = Math.floor((elapsed * this.opts.fps) / 1000 + 1e-6);
    if (due >= this.next) {
      this.skipped += due - this.next;
      this.next = due;
      this.emit();
      this.next++;
    }
    if (this.active) this.schedule(this.dueAt(this.next) - this.now());
  }

  private emit(): void {
    try {
      const index = this.opts.nextIndex();
      const { width, height } = this.renderer;
      const frame: RawFrame =
        this.opts.format === 'i420'
          ? { width, height, format: 'i420', data: this.renderer.renderI420(index) }
          : { width, height, format: 'rgb', data: this.renderer.renderRgb(index) };
      this.opts.sink(frame);
      this.sent++;
      const live = this.opts.live;
      if (live?.watched) live.push({ width, height, data: frame.format === 'i420' ? frame.data : this.renderer.renderI420(index) });
    } catch (err) {
      this.failures++;
      try {
        this.opts.onError?.(err);
      } catch {
        // an error reporter that throws must not stop the publisher
      }
    }
  }
}
