/**
 * Whether a stream's media still arrives, as only the upstream sees it: a webrtc stream published
 * over WHIP sends its media straight into the upstream's room, so the gateway learns that the client
 * went away (page closed, peer connection closed, network gone) from the upstream stream's frames.
 * Reads the stream every `checkMs`; the stream is lost when its `last_frame_index` has not moved for
 * `lostAfterMs` (measured on this process's clock, so the upstream's clock never matters), or when
 * no first frame came within `firstFrameWithinMs` of the watch's start. A short stall does not end
 * it; neither does a read that fails (the upstream cannot tell: the next read decides).
 */
import type { Clock, TimerHandle } from '../../lib/timers';

export interface FrameWatchOptions {
  /** The upstream stream's frame fields (an ended or missing stream ends the watch: the session's own timers act on it). */
  read(): Promise<{ state: string; last_frame_index: number | null }>;
  clock: Clock;
  checkMs: number;
  lostAfterMs: number;
  firstFrameWithinMs: number;
  onLost(why: string): void;
  /** Told of every failed read (logged by the owner). */
  onReadError?(err: unknown): void;
}

export class FrameWatch {
  private readonly startedAt: number;
  private lastIndex: number | null = null;
  private progressAt: number;
  private timer: TimerHandle | undefined;
  private stopped = false;

  constructor(private readonly opts: FrameWatchOptions) {
    this.startedAt = opts.clock.now();
    this.progressAt = this.startedAt;
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    this.opts.clock.clearTimeout(this.timer);
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = this.opts.clock.setTimeout(() => void this.check(), this.opts.checkMs);
    this.timer.unref?.();
  }

  private async check(): Promise<void> {
    let s;
    try {
      s = await this.opts.read();
    } catch (err) {
      if (this.stopped) return;
      this.opts.onReadError?.(err);
      return this.arm();
    }
    if (this.stopped) return;
    if (s.state !== 'active') return this.stop();
    const now = this.opts.clock.now();
    const index = s.last_frame_index;
    if (index !== null && index !== this.lastIndex) {
      this.lastIndex = index;
      this.progressAt = now;
    } else if (index === null && now - this.startedAt >= this.opts.firstFrameWithinMs) {
      return this.lose(`no frame reached the upstream within ${now - this.startedAt} ms`);
    } else if (index !== null && now - this.progressAt >= this.opts.lostAfterMs) {
      return this.lose(`no new frame upstream for ${now - this.progressAt} ms`);
    }
    this.arm();
  }

  private lose(why: string): void {
    this.stop();
    this.opts.onLost(why);
  }
}
