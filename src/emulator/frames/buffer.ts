import { encodeFrame } from './codec';
import type { RawFrame, StoredFrame } from './types';

export interface FrameBufferOptions {
  retentionMs: number;
  /** Cap on stored JPEG bytes; the oldest frames go first past it. */
  maxBytes: number;
  storeWidth: number;
  jpegQuality: number;
  /** Window of `recentFps`. */
  fpsWindowMs: number;
  now?: () => number;
}

export type SnapDirection = 'nearest' | 'forward' | 'backward';

/**
 * The frames of one stream, on the contract's three axes: wall clock, stream clock (ms since the
 * first frame, never resets) and lifetime index (never resets, even after eviction).
 *
 * Frames are kept as downscaled JPEG in arrival order. The index is assigned synchronously when a
 * frame arrives (so a publisher can paint it into the pixels), the encode runs off the event loop
 * in sharp, and frames become visible strictly in index order. Lookups by index are O(1), by time
 * O(log n).
 */
export class FrameBuffer {
  private readonly frames: StoredFrame[] = [];
  /** Position in `frames` of the oldest retained frame (evicted slots are compacted lazily). */
  private head = 0;
  private bytes = 0;
  private evicted = 0;
  private nextIdx = 0;
  private firstAtMs: number | null = null;
  private lastStreamMs = 0;
  /** The newest frame ever stored; outlives its eviction (`last_frame_*` fields). */
  private newest: { index: number; capturedAtMs: number } | null = null;
  private pending: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly now: () => number;

  constructor(private readonly opts: FrameBufferOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** The index the next arriving frame will get. */
  get nextIndex(): number {
    return this.nextIdx;
  }

  /**
   * Takes a frame: assigns its lifetime index now, encodes it, then appends it.
   * Resolves with the stored frame, or undefined when the buffer was cleared meanwhile.
   */
  ingest(raw: RawFrame, capturedAtMs: number = this.now()): Promise<StoredFrame | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    const index = this.nextIdx++;
    const encoded = encodeFrame(raw, { storeWidth: this.opts.storeWidth, quality: this.opts.jpegQuality });
    // Chain appends so frames become visible in index order even if encodes finish out of order.
    const appended = this.pending.then(async () => {
      let jpeg: Buffer;
      try {
        jpeg = await encoded;
      } catch {
        return undefined; // an undecodable frame is dropped; its index stays unused, as a lost frame would
      }
      if (this.closed) return undefined;
      return this.append(index, capturedAtMs, raw.width, raw.height, jpeg);
    });
    this.pending = appended;
    return appended;
  }

  /** Resolves once every frame handed to `ingest` so far is visible. */
  async drain(): Promise<void> {
    await this.pending;
  }

  private append(index: number, capturedAtMs: number, width: number, height: number, jpeg: Buffer): StoredFrame {
    if (this.firstAtMs === null) this.firstAtMs = capturedAtMs;
    // The stream clock never runs backwards, even if a publisher's clock does.
    const streamTimeMs = Math.max(this.lastStreamMs, capturedAtMs - this.firstAtMs);
    this.lastStreamMs = streamTimeMs;
    const frame: StoredFrame = { index, capturedAtMs, streamTimeMs, width, height, jpeg };
    this.frames.push(frame);
    this.newest = { index, capturedAtMs };
    this.bytes += jpeg.length;
    this.evict(capturedAtMs);
    return frame;
  }

  /** Drops frames older than the retention window or over the memory cap. */
  evict(nowMs: number = this.now()): void {
    const cutoff = nowMs - this.opts.retentionMs;
    while (this.head < this.frames.length) {
      const f = this.frames[this.head]!;
      if (f.capturedAtMs >= cutoff && this.bytes <= this.opts.maxBytes) break;
      this.bytes -= f.jpeg.length;
      this.evicted++;
      this.head++;
    }
    // Compact once the dead prefix dominates, so memory is returned without O(n) work per frame.
    if (this.head > 1024 && this.head * 2 > this.frames.length) {
      this.frames.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Stops taking frames and drops every stored one (stream deleted). Counters stay for the snapshot. */
  clear(): void {
    this.closed = true;
    this.evicted += this.frames.length - this.head;
    this.frames.length = 0;
    this.head = 0;
    this.bytes = 0;
  }

  /** Stops taking frames but keeps what is stored (stream expired: reads snapshot these values). */
  seal(): void {
    this.closed = true;
  }

  get retainedCount(): number {
    return this.frames.length - this.head;
  }
  get evictedCount(): number {
    return this.evicted;
  }
  get storedBytes(): number {
    return this.bytes;
  }
  get firstFrameAtMs(): number | null {
    return this.firstAtMs;
  }
  get lastFrame(): StoredFrame | undefined {
    return this.frames.length > this.head ? this.frames[this.frames.length - 1] : undefined;
  }
  get oldestFrame(): StoredFrame | undefined {
    return this.frames[this.head];
  }
  /** Index of the most recent frame ever stored (survives eviction). */
  get lastFrameIndex(): number | null {
    return this.newest?.index ?? null;
  }
  get lastFrameAtMs(): number | null {
    return this.newest?.capturedAtMs ?? null;
  }

  /** Stream-clock position now: 0 before the first frame, then ms since the first frame. */
  streamTimeMs(nowMs: number = this.now()): number {
    return this.firstAtMs === null ? 0 : Math.max(this.lastStreamMs, nowMs - this.firstAtMs);
  }

  /** Frames per second over the last `fpsWindowMs`. */
  recentFps(nowMs: number = this.now()): number {
    const from = nowMs - this.opts.fpsWindowMs;
    const i = this.lowerBound((f) => f.capturedAtMs >= from);
    const n = this.frames.length - i;
    return Math.round((n * 1000 * 100) / this.opts.fpsWindowMs) / 100;
  }

  /** The retained frame with this exact lifetime index. O(1). */
  byIndex(index: number): StoredFrame | undefined {
    const oldest = this.oldestFrame;
    if (!oldest) return undefined;
    const f = this.frames[this.head + (index - oldest.index)];
    return f && f.index === index ? f : this.scanIndex(index);
  }

  /** Indices have gaps only when an encode failed; then fall back to a binary search. */
  private scanIndex(index: number): StoredFrame | undefined {
    const i = this.lowerBound((f) => f.index >= index);
    const f = this.frames[i];
    return f && f.index === index ? f : undefined;
  }

  /**
   * The frame nearest a stream-clock time within `toleranceMs`, preferring `direction` when no frame
   * is exactly there. O(log n).
   */
  atStreamTime(ms: number, toleranceMs: number, direction: SnapDirection): StoredFrame | undefined {
    const i = this.lowerBound((f) => f.streamTimeMs >= ms);
    const after = this.frames[i];
    const before = i - 1 >= this.head ? this.frames[i - 1] : undefined;
    if (after && after.streamTimeMs === ms) return after;
    const okAfter = after && after.streamTimeMs - ms <= toleranceMs ? after : undefined;
    const okBefore = before && ms - before.streamTimeMs <= toleranceMs ? before : undefined;
    if (direction === 'forward') return okAfter;
    if (direction === 'backward') return okBefore;
    if (okAfter && okBefore) return okAfter.streamTimeMs - ms < ms - okBefore.streamTimeMs ? okAfter : okBefore;
    return okAfter ?? okBefore;
  }

  /** The newest retained frame strictly before stream time `ms` (an exclusive window end). O(log n). */
  lastBefore(ms: number): StoredFrame | undefined {
    const i = this.lowerBound((f) => f.streamTimeMs >= ms);
    return i - 1 >= this.head ? this.frames[i - 1] : undefined;
  }

  /** Retained frames whose stream time lies in [fromMs, toMs], in order. */
  rangeByStreamTime(fromMs: number, toMs: number): StoredFrame[] {
    const a = this.lowerBound((f) => f.streamTimeMs >= fromMs);
    const b = this.lowerBound((f) => f.streamTimeMs > toMs);
    return this.frames.slice(a, b);
  }

  /** Retained frames with index in [first, last], in order. */
  rangeByIndex(first: number, last: number): StoredFrame[] {
    const a = this.lowerBound((f) => f.index >= first);
    const b = this.lowerBound((f) => f.index > last);
    return this.frames.slice(a, b);
  }

  /** First position in [head, length) where `pred` holds (pred must be monotone). */
  private lowerBound(pred: (f: StoredFrame) => boolean): number {
    let lo = this.head;
    let hi = this.frames.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pred(this.frames[mid]!)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}
