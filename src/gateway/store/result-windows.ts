/**
 * The store role behind reinfer (`POST /v0.2/chat/completions/clip`): where on its stream's clock
 * the frames behind one delivered legacy result lie, findable by the result id from any replica.
 * Written by the stream's owner after the result's commit, read by whichever replica serves the
 * reinfer; each entry expires on its own (`ttlMs`: `legacy.resultWindowSeconds`, by default about
 * the upstream's frame retention).
 */

/** The frames behind one result, on the stream clock (ms since the stream's first frame). */
export interface ResultWindow {
  streamId: string;
  /** The stream's account: only it may re-run the result. */
  accountId: string;
  /** `clip`: the segment [startMs, endMs] sampled at `maxFps`; `frame`: the frame on screen at `endMs`. */
  mode: 'clip' | 'frame';
  startMs: number;
  endMs: number;
  /** The clip's sampling cap (its `target_fps`); 0 for a frame. */
  maxFps: number;
}

export interface ResultWindows {
  /** Keeps `window` under `resultId` for `ttlMs` (a later put for the same id replaces it). */
  putResultWindow(resultId: string, window: ResultWindow, ttlMs: number): Promise<void>;
  /** The window of `resultId`, or undefined when unknown or expired. */
  getResultWindow(resultId: string): Promise<ResultWindow | undefined>;
}

/** A stored window read back (Redis text): the shape checked, anything else is no window. */
export function parseResultWindow(text: string | null | undefined): ResultWindow | undefined {
  if (!text) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const w = v as Record<string, unknown>;
  const num = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
  if (typeof w.streamId !== 'string' || typeof w.accountId !== 'string' || (w.mode !== 'clip' && w.mode !== 'frame')) return undefined;
  if (!num(w.startMs) || !num(w.endMs) || !num(w.maxFps)) return undefined;
  return { streamId: w.streamId, accountId: w.accountId, mode: w.mode, startMs: w.startMs, endMs: w.endMs, maxFps: w.maxFps };
}
