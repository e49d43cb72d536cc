/**
 * Stream references of chat completions: `<scheme>://streams/{stream_id}?<query>`
 * (spec/interface.md "Stream references in chat completions", "Resolution rules").
 *
 * Parsing is pure and reports every problem as a validation detail (422, validation shape).
 * Resolution runs against a stream's FrameBuffer at request time and throws stream-shaped 422s
 * (`frame_not_yet_produced`, `frame_evicted`); docs/errors.md lists which error takes which shape.
 * Each lookup is a binary search or an index jump, so a reference costs O(log n) per picked frame.
 */
import type { ValidationDetail } from '../lib/errors';
import { streamError, validationError } from '../lib/errors';
import type { FrameBuffer, SnapDirection } from './frames/buffer';
import type { StoredFrame } from './frames/types';

export type PartKind = 'image' | 'video';

/** An anchor on one of the three axes (index, stream clock, offset from now). */
export interface Anchor {
  axis: 'frame_index' | 'timestamp_ms' | 'offset_ms';
  value: number;
}

export interface ImageReference {
  kind: 'image';
  streamId: string;
  anchor: Anchor;
  toleranceMs: number;
  direction: SnapDirection;
}

export interface VideoReference {
  kind: 'video';
  streamId: string;
  start: Anchor;
  /** Absent: the live edge (now). */
  end?: Anchor;
  maxFps: number;
}

export type StreamReference = ImageReference | VideoReference;

export const DEFAULT_TOLERANCE_MS = 100;
export const DEFAULT_MAX_FPS = 1.0;

/** A stream id: a UUID (also the path-parameter check of the stream routes). */
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INT_RE = /^[+-]?\d+$/;
const FLOAT_RE = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const AXES = ['frame_index', 'timestamp_ms', 'offset_ms'] as const;
const IMAGE_PARAMS = new Set<string>([...AXES, 'tolerance_ms', 'direction']);
const VIDEO_PARAMS = new Set<string>([...AXES.map((a) => `start_${a}`), ...AXES.map((a) => `end_${a}`), 'max_fps']);
const DIRECTIONS: readonly SnapDirection[] = ['nearest', 'forward', 'backward'];

export type ParseResult<T> = { ok: true; value: T } | { ok: false; problems: ValidationDetail[] };

/**
 * Parses a reference for an `image_url` (kind `image`) or `video_url` (kind `video`) part.
 * `loc` is where the url sits in the request body; every problem found is reported, not only the first.
 */
export function parseReference(url: string, kind: PartKind, scheme: string, loc: string[]): ParseResult<StreamReference> {
  const problems: ValidationDetail[] = [];
  const fail = (msg: string, type: string) => problems.push({ loc, msg, type });

  const prefix = `${scheme}://`;
  if (url.slice(0, prefix.length).toLowerCase() !== prefix.toLowerCase()) {
    fail(`must be a stream reference of the form ${prefix}streams/{stream_id}?<query>`, 'url_scheme');
    return { ok: false, problems };
  }
  if (url.includes('#')) fail('a stream reference has no fragment', 'url_parsing');
  const rest = url.slice(prefix.length);
  const q = rest.indexOf('?');
  const path = q < 0 ? rest : rest.slice(0, q);
  const query = q < 0 ? '' : rest.slice(q + 1).replace(/#.*$/, '');
  const m = /^([^/]*)\/([^/]*)$/.exec(path);
  if (!m || m[1]!.toLowerCase() !== 'streams') {
    fail(`must be ${prefix}streams/{stream_id}; got host/path ${JSON.stringify(path)}`, 'url_parsing');
    return { ok: false, problems };
  }
  const streamId = m[2]!;
  if (!UUID_RE.test(streamId)) fail(`stream_id ${JSON.stringify(streamId)} is not a UUID`, 'uuid_parsing');

  const params = parseQuery(query, fail);
  const allowed = kind === 'image' ? IMAGE_PARAMS : VIDEO_PARAMS;
  for (const key of params.keys()) {
    if (!allowed.has(key)) {
      const hint = kind === 'image' && VIDEO_PARAMS.has(key) ? ' (a video reference belongs in a video_url part)' : '';
      fail(`unknown parameter ${JSON.stringify(key)} for an ${kind === 'image' ? 'image_url' : 'video_url'} reference${hint}`, 'extra_forbidden');
    }
  }

  const int = (key: string, min?: number): number | undefined => {
    const raw = params.get(key);
    if (raw === undefined) return undefined;
    const n = INT_RE.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(n)) {
      fail(`${key} must be an integer, got ${JSON.stringify(raw)}`, 'int_parsing');
      return undefined;
    }
    if (min !== undefined && n < min) {
      fail(`${key} must be ${min === 1 ? 'greater than 0' : `at least ${min}`}, got ${n}`, min === 1 ? 'greater_than' : 'greater_than_equal');
      return undefined;
    }
    return n === 0 ? 0 : n; // no -0
  };
  /** One anchor of a kind (`''`, `start_`, `end_`): exactly one axis, or none. */
  const anchor = (prefixOf: string, required: boolean): Anchor | undefined => {
    const present = AXES.filter((a) => params.has(prefixOf + a));
    if (present.length > 1) {
      fail(`give only one of ${present.map((a) => prefixOf + a).join(', ')}`, 'multiple_anchors');
      return undefined;
    }
    if (present.length === 0) {
      if (required) fail(`one of ${AXES.map((a) => prefixOf + a).join(', ')} is required`, 'missing');
      return undefined;
    }
    const axis = present[0]!;
    const value = int(prefixOf + axis, axis === 'timestamp_ms' ? 0 : undefined);
    return value === undefined ? undefined : { axis, value };
  };

  if (kind === 'image') {
    const a = anchor('', true);
    // The contract: tolerance_ms and direction are ignored when frame_index is set, so not validated.
    const byIndex = params.has('frame_index');
    const toleranceMs = (byIndex ? undefined : int('tolerance_ms', 1)) ?? DEFAULT_TOLERANCE_MS;
    const dirRaw = byIndex ? undefined : params.get('direction');
    let direction: SnapDirection = 'nearest';
    if (dirRaw !== undefined) {
      if ((DIRECTIONS as readonly string[]).includes(dirRaw)) direction = dirRaw as SnapDirection;
      else fail(`direction must be one of ${DIRECTIONS.join(', ')}, got ${JSON.stringify(dirRaw)}`, 'enum');
    }
    if (problems.length || !a) return { ok: false, problems };
    return { ok: true, value: { kind: 'image', streamId: streamId.toLowerCase(), anchor: a, toleranceMs, direction } };
  }

  const start = anchor('start_', true);
  const end = anchor('end_', false);
  let maxFps = DEFAULT_MAX_FPS;
  const fpsRaw = params.get('max_fps');
  if (fpsRaw !== undefined) {
    const f = FLOAT_RE.test(fpsRaw) ? Number(fpsRaw) : NaN;
    if (!Number.isFinite(f)) fail(`max_fps must be a number, got ${JSON.stringify(fpsRaw)}`, 'float_parsing');
    else if (f <= 0) fail(`max_fps must be greater than 0, got ${f}`, 'greater_than');
    else maxFps = f;
  }
  if (problems.length || !start) return { ok: false, problems };
  return { ok: true, value: { kind: 'video', streamId: streamId.toLowerCase(), start, ...(end ? { end } : {}), maxFps } };
}

/** `a=1&b=2` → map; a repeated key (contract rule 4) or an undecodable one is a problem. */
function parseQuery(query: string, fail: (msg: string, type: string) => void): Map<string, string> {
  const out = new Map<string, string>();
  const repeated = new Set<string>();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(eq < 0 ? pair : pair.slice(0, eq));
      value = decodeURIComponent(eq < 0 ? '' : pair.slice(eq + 1));
    } catch {
      fail(`query component ${JSON.stringify(pair)} is not valid percent-encoding`, 'url_parsing');
      continue;
    }
    if (out.has(key)) {
      if (!repeated.has(key)) fail(`query parameter ${JSON.stringify(key)} is repeated`, 'duplicate_parameter');
      repeated.add(key);
      continue;
    }
    out.set(key, value);
  }
  return out;
}

/** Throws the stream-shaped 422s shared by both part kinds; returns the oldest retained frame. */
function requireFrames(buf: FrameBuffer, streamId: string, now: number): { oldest: StoredFrame; last: StoredFrame } {
  buf.evict(now);
  if (buf.lastFrameIndex === null) {
    throw streamError(422, 'frame_not_yet_produced', `Stream ${streamId} has not produced a frame yet`);
  }
  const oldest = buf.oldestFrame;
  const last = buf.lastFrame;
  if (!oldest || !last) {
    throw streamError(422, 'frame_evicted', `Every frame of stream ${streamId} has been evicted (no frame arrived within the retention window)`);
  }
  return { oldest, last };
}

const notYet = (what: string) => streamError(422, 'frame_not_yet_produced', `${what} has not been produced yet`);

/** A lifetime index from a (possibly negative, live-edge-relative) frame_index. */
function absoluteIndex(value: number, lastIndex: number): number {
  return value < 0 ? lastIndex + 1 + value : value;
}

/** The retained frame at `index`, or the nearest one in `dir` when that index was lost (failed encode). */
function frameAtIndex(buf: FrameBuffer, index: number, dir: 'forward' | 'backward'): StoredFrame | undefined {
  const exact = buf.byIndex(index);
  if (exact) return exact;
  const last = buf.lastFrame?.index ?? index;
  const oldest = buf.oldestFrame?.index ?? index;
  return dir === 'forward' ? buf.rangeByIndex(index, last)[0] : buf.rangeByIndex(oldest, index).at(-1);
}

/**
 * Resolves an image reference to one frame.
 * - frame_index: negative counts back from the live edge; older than the buffer clamps up to the oldest
 *   retained frame; newer than the last frame → 422 `frame_not_yet_produced`.
 * - timestamp_ms / offset_ms: the frame within tolerance_ms (snapping per direction). None within
 *   tolerance → `frame_evicted` when the time lies before the oldest retained frame, otherwise
 *   `frame_not_yet_produced` (the future, or a gap in which no frame was produced).
 */
export function resolveImage(ref: ImageReference, buf: FrameBuffer, now: number): StoredFrame {
  const { oldest, last } = requireFrames(buf, ref.streamId, now);
  const { axis, value } = ref.anchor;
  if (axis === 'frame_index') {
    const index = absoluteIndex(value, last.index);
    if (index > last.index) throw notYet(`Frame ${index} (last frame is ${last.index})`);
    if (index <= oldest.index) return oldest;
    return frameAtIndex(buf, index, 'forward') ?? last;
  }
  const t = axis === 'timestamp_ms' ? value : buf.streamTimeMs(now) + value;
  const f = buf.atStreamTime(t, ref.toleranceMs, ref.direction);
  if (f) return f;
  const where = `within ${ref.toleranceMs} ms ${ref.direction === 'nearest' ? 'of' : ref.direction + ' from'} stream time ${t} ms`;
  if (t < oldest.streamTimeMs) {
    throw streamError(422, 'frame_evicted', `No retained frame ${where}: the oldest retained frame is at ${oldest.streamTimeMs} ms`);
  }
  throw notYet(`A frame ${where} (last frame at ${last.streamTimeMs} ms)`);
}

/**
 * Resolves a video reference to its sampled frames (at least one).
 * The window is clamped into the retained buffer: a start (or end) before it moves up to the oldest
 * retained frame, `start_offset_ms=0` is the start of the buffer, an omitted end is now, an end time
 * past now is now. A start in the future or an explicit frame index past the last frame → 422
 * `frame_not_yet_produced`; an end before the start → 422 validation error (at `loc`).
 * Sampling is anchored at the window's newest frame (the live edge when the end is omitted) and steps
 * back by 1/max_fps to the window start, taking the nearest frame at each step: max_fps caps frames
 * per second and the newest frame is always in. A window holding no frame yields the frame on screen
 * at its end (the last one before it).
 */
export function resolveVideo(ref: VideoReference, buf: FrameBuffer, now: number, loc: string[] = ['url']): StoredFrame[] {
  const { oldest, last } = requireFrames(buf, ref.streamId, now);
  const streamNow = buf.streamTimeMs(now);

  // Start: a frame (index anchors) or a stream time (time anchors), clamped up to the buffer.
  let startFrame: StoredFrame | undefined;
  let startT: number;
  const s = ref.start;
  if (s.axis === 'frame_index') {
    const index = absoluteIndex(s.value, last.index);
    if (index > last.index) throw notYet(`Start frame ${index} (last frame is ${last.index})`);
    startFrame = index <= oldest.index ? oldest : (frameAtIndex(buf, index, 'forward') ?? last);
    startT = startFrame.streamTimeMs;
  } else {
    const t = s.axis === 'timestamp_ms' ? s.value : s.value === 0 ? oldest.streamTimeMs : streamNow + s.value;
    if (t > streamNow) throw notYet(`Start stream time ${t} ms (now is ${streamNow} ms)`);
    startT = Math.max(t, oldest.streamTimeMs);
    startFrame = buf.atStreamTime(startT, Infinity, 'forward');
  }

  // End: the last frame at or before it, clamped into [oldest, live edge].
  let endFrame: StoredFrame;
  let endT: number;
  const e = ref.end;
  if (!e) {
    endFrame = last;
    endT = streamNow;
  } else if (e.axis === 'frame_index') {
    const index = absoluteIndex(e.value, last.index);
    if (index > last.index) throw notYet(`End frame ${index} (last frame is ${last.index})`);
    endFrame = index <= oldest.index ? oldest : (frameAtIndex(buf, index, 'backward') ?? oldest);
    endT = endFrame.streamTimeMs;
  } else {
    const t = e.axis === 'timestamp_ms' ? e.value : streamNow + e.value;
    endT = Math.min(Math.max(t, oldest.streamTimeMs), streamNow);
    endFrame = buf.atStreamTime(endT, Infinity, 'backward') ?? oldest;
  }

  const inverted = startFrame && s.axis === 'frame_index' && e?.axis === 'frame_index' ? startFrame.index > endFrame.index : startT > endT;
  if (inverted) {
    throw validationError('The video window ends before it starts', [
      { loc, msg: `the end anchor (stream time ${endT} ms) precedes the start anchor (stream time ${startT} ms)`, type: 'value_error' },
    ]);
  }
  if (!startFrame || startFrame.index > endFrame.index) return [endFrame];

  // Anchored at the newest frame of the window and stepping back by 1/max_fps, so the live edge is
  // always sampled and a window of d seconds holds at most floor(d × max_fps) + 1 frames. Each step
  // takes the frame nearest its time (clamped into the window); a source slower than max_fps repeats
  // a frame, which is taken once.
  const stepMs = 1000 / ref.maxFps;
  const picks: StoredFrame[] = [endFrame];
  for (let k = 1; ; k++) {
    const t = endFrame.streamTimeMs - k * stepMs;
    if (t < startT) break;
    let f = buf.atStreamTime(t, Infinity, 'nearest') ?? startFrame;
    if (f.index < startFrame.index) f = startFrame;
    if (f.index > endFrame.index) f = endFrame;
    if (f.index < picks[picks.length - 1]!.index) picks.push(f);
  }
  return picks.reverse();
}
