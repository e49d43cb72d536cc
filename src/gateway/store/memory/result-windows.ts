import { idKey } from '../../../lib/id-key';
import type { Clock } from '../../../lib/timers';
import type { ResultWindow, ResultWindows } from '../result-windows';

/**
 * Reinfer's result windows: one per delivered result for `resultWindowSeconds`, so a stream holds
 * hundreds at once and each is kept small: what a stream's windows share (stream, account, mode,
 * fps) is one counted `WindowShape`; an entry keeps its numbers, its expiry as an offset from
 * `epochMs` (a small integer V8 stores inline), its key the result id's `idKey`. Entries go in time
 * order with one configured TTL, so a sweep from the oldest stops at the first live one; `get`
 * checks expiry itself.
 */
export class MemoryResultWindows implements ResultWindows {
  private readonly windows = new Map<string, StoredWindow>();
  private readonly shapes = new Map<string, WindowShape>();
  private readonly epochMs: number;
  private nextSweepMs = 0;

  constructor(private readonly clock: Pick<Clock, 'now'>) {
    this.epochMs = clock.now();
  }

  async putResultWindow(resultId: string, window: ResultWindow, ttlMs: number): Promise<void> {
    const now = this.clock.now();
    if (now >= this.nextSweepMs) {
      this.nextSweepMs = now + 1000;
      for (const [id, w] of this.windows) {
        if (w.expiresAt + this.epochMs > now) break;
        this.drop(id, w);
      }
    }
    const key = idKey(resultId);
    const known = this.windows.get(key);
    if (known) this.drop(key, known);
    const shapeKey = `${window.streamId}\0${window.accountId}\0${window.mode}\0${window.maxFps}`;
    let shape = this.shapes.get(shapeKey);
    if (!shape) {
      shape = { key: shapeKey, streamId: window.streamId, accountId: window.accountId, mode: window.mode, maxFps: window.maxFps, refs: 0 };
      this.shapes.set(shapeKey, shape);
    }
    shape.refs++;
    this.windows.set(key, { shape, startMs: window.startMs, endMs: window.endMs, expiresAt: now + ttlMs - this.epochMs });
  }

  async getResultWindow(resultId: string): Promise<ResultWindow | undefined> {
    const key = idKey(resultId);
    const w = this.windows.get(key);
    if (!w) return undefined;
    if (w.expiresAt + this.epochMs <= this.clock.now()) {
      this.drop(key, w);
      return undefined;
    }
    // A copy, as Redis answers one: a caller never holds the store's own objects.
    const { streamId, accountId, mode, maxFps } = w.shape;
    return { streamId, accountId, mode, startMs: w.startMs, endMs: w.endMs, maxFps };
  }

  clear(): void {
    this.windows.clear();
    this.shapes.clear();
  }

  private drop(key: string, w: StoredWindow): void {
    this.windows.delete(key);
    if (--w.shape.refs === 0) this.shapes.delete(w.shape.key);
  }
}

/** What the result windows of one stream share, with the number of stored windows that use it. */
interface WindowShape {
  readonly key: string;
  readonly streamId: string;
  readonly accountId: string;
  readonly mode: ResultWindow['mode'];
  readonly maxFps: number;
  refs: number;
}

/** One stored result window: its shape, where it lies on the stream clock, when it expires (ms after `epochMs`). */
interface StoredWindow {
  readonly shape: WindowShape;
  readonly startMs: number;
  readonly endMs: number;
  readonly expiresAt: number;
}
