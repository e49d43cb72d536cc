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
import type { ServiceError } from '../lib/errors';
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
      fail(
        `unknown parameter ${JSON.stringify(key)} for an ${kind === 'image' ? 'image_url' : 'video_url'} reference${hint}`,
        'extra_forbidden',
      );
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
      fail(
        `${key} must be ${min === 1 ? 'greater than 0' : `at least ${min}`}, got ${n}`,
        min === 1 ? 'greater_than' : 'greater_than_equal',
      );
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

/**
 * Which side to follow where the contract and the provider's reference disagree (config
 * `emulator.dialect`; src/emulator/README.md lists each difference).
 */
export type Dialect = 'contract' | 'provider';

export interface ResolveOptions {
  dialect?: Dialect;
}

/**
 * Statuses of the state-dependent reference errors. The contract answers 422 for a future or
 * evicted frame; the provider's error page answers 409 and 410, and has two codes of its own for
 * video windows (an empty window, an end at or before the start).
 */
const STATUSES = {
  contract: { notYet: 422, evicted: 422, segmentEmpty: 404, segmentInvalid: 422 },
  provider: { notYet: 409, evicted: 410, segmentEmpty: 404, segmentInvalid: 400 },
} as const;

class Resolver {
  readonly status: (typeof STATUSES)[Dialect];
  constructor(
    readonly dialect: Dialect,
    readonly streamId: string,
  ) {
    this.status = STATUSES[dialect];
  }

  notYet(what: string): ServiceError {
    return streamError(this.status.notYet, 'frame_not_yet_produced', `${what} has not been produced yet`);
  }

  evicted(message: string): ServiceError {
    return streamError(this.status.evicted, 'frame_evicted', message);
  }

  /** The stream's oldest and newest retained frames; the stream-shaped errors of a stream without them. */
  frames(buf: FrameBuffer, now: number): { oldest: StoredFrame; last: StoredFrame } {
    buf.evict(now);
    if (buf.lastFrameIndex === null) throw this.notYet(`A frame of stream ${this.streamId}`);
    const oldest = buf.oldestFrame;
    const last = buf.lastFrame;
    if (!oldest || !last) {
      throw this.evicted(`Every frame of stream ${this.streamId} has been evicted (no frame arrived within the retention window)`);
    }
    return { oldest, last };
  }

  /**
   * The stream time an offset names: a negative one counts back from the live edge (the contract:
   * now; the provider: the newest frame), a non-negative one forward from the oldest retained frame.
   */
  offsetTime(value: number, oldest: StoredFrame, last: StoredFrame, streamNow: number): number {
    if (value >= 0) return oldest.streamTimeMs + value;
    return (this.dialect === 'provider' ? last.streamTimeMs : streamNow) + value;
  }
}

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
 *   retained frame; newer than the last frame → `frame_not_yet_produced`.
 * - timestamp_ms / offset_ms (negative: back from the live edge; non-negative: forward from the oldest
 *   retained frame): the frame within tolerance_ms (snapping per direction). None within tolerance →
 *   `frame_evicted` when the time lies before the oldest retained frame, otherwise
 *   `frame_not_yet_produced` (the future, or a gap in which no frame was produced).
 */
export function resolveImage(ref: ImageReference, buf: FrameBuffer, now: number, opts: ResolveOptions = {}): StoredFrame {
  const r = new Resolver(opts.dialect ?? 'contract', ref.streamId);
  const { oldest, last } = r.frames(buf, now);
  const { axis, value } = ref.anchor;
  if (axis === 'frame_index') {
    const index = absoluteIndex(value, last.index);
    if (index > last.index) throw r.notYet(`Frame ${index} (last frame is ${last.index})`);
    if (index <= oldest.index) return oldest;
    return frameAtIndex(buf, index, 'forward') ?? last;
  }
  const t = axis === 'timestamp_ms' ? value : r.offsetTime(value, oldest, last, buf.streamTimeMs(now));
  const f = buf.atStreamTime(t, ref.toleranceMs, ref.direction);
  if (f) return f;
  const where = `within ${ref.toleranceMs} ms ${ref.direction === 'nearest' ? 'of' : ref.direction + ' from'} stream time ${t} ms`;
  if (t < oldest.streamTimeMs) throw r.evicted(`No retained frame ${where}: the oldest retained frame is at ${oldest.streamTimeMs} ms`);
  throw r.notYet(`A frame ${where} (last frame at ${last.streamTimeMs} ms)`);
}

/** One bound of a requested video window: a lifetime index or a stream time. */
type Bound = { axis: 'index'; index: number } | { axis: 'time'; t: number };

const boundText = (b: Bound): string => (b.axis === 'index' ? `frame ${b.index}` : `stream time ${b.t} ms`);

/**
 * Resolves a video reference to its sampled frames (at least one).
 *
 * The requested window runs from its start anchor (inclusive) to its end anchor (exclusive, as the
 * provider documents); without an end anchor, or with an end past now (or the index just past the
 * last frame), it runs through the newest frame. Offsets count as in images. It is then intersected
 * with the retained buffer (a start before it clamps up). Errors: a start in the future, or an
 * explicit start (end) index past the last frame (past the index after it) → `frame_not_yet_produced`;
 * an end before the start → a validation error at `loc` (the contract; an end at the start is an
 * empty window there) or, at or before it, 400 `segment_invalid` (the provider). A window holding
 * no retained frame yields the frame on screen at its end — the last one before it, or the oldest
 * retained frame when the window lies before the buffer (the contract) — or 404 `segment_empty`
 * (the provider).
 *
 * Sampling is anchored at the window's newest frame (the live edge when the end is omitted) and steps
 * back by 1/max_fps to the window start, taking the nearest frame at each step: max_fps caps frames
 * per second and the newest frame is always in.
 */
export function resolveVideo(
  ref: VideoReference,
  buf: FrameBuffer,
  now: number,
  loc: string[] = ['url'],
  opts: ResolveOptions = {},
): StoredFrame[] {
  const r = new Resolver(opts.dialect ?? 'contract', ref.streamId);
  const { oldest, last } = r.frames(buf, now);
  const streamNow = buf.streamTimeMs(now);

  const s = ref.start;
  let start: Bound;
  if (s.axis === 'frame_index') {
    const index = absoluteIndex(s.value, last.index);
    if (index > last.index) throw r.notYet(`Start frame ${index} (last frame is ${last.index})`);
    start = { axis: 'index', index };
  } else {
    const t = s.axis === 'timestamp_ms' ? s.value : r.offsetTime(s.value, oldest, last, streamNow);
    if (t > streamNow) throw r.notYet(`Start stream time ${t} ms (now is ${streamNow} ms)`);
    start = { axis: 'time', t };
  }

  // The exclusive end; undefined: through the newest frame.
  let end: Bound | undefined;
  const e = ref.end;
  if (e?.axis === 'frame_index') {
    const index = absoluteIndex(e.value, last.index);
    if (index > last.index + 1) throw r.notYet(`End frame ${index} (the end is exclusive; last frame is ${last.index})`);
    end = index > last.index ? undefined : { axis: 'index', index };
  } else if (e) {
    const t = e.axis === 'timestamp_ms' ? e.value : r.offsetTime(e.value, oldest, last, streamNow);
    end = t > streamNow ? undefined : { axis: 'time', t };
  }

  // The provider: an end at or before the start is invalid. The contract's dialect takes an end at
  // the start as an empty window (below), so a zero-length window still names the frame on screen.
  if (end && endsBeforeStart(start, end, buf, oldest, r.dialect === 'provider')) {
    const msg = `the end anchor (${boundText(end)}, exclusive) is ${r.dialect === 'provider' ? 'at or ' : ''}before the start anchor (${boundText(start)})`;
    if (r.dialect === 'provider') throw streamError(r.status.segmentInvalid, 'segment_invalid', `Invalid segment: ${msg}`);
    throw validationError('The video window ends before it starts', [{ loc, msg, type: 'value_error' }]);
  }

  // Intersected with the retained buffer: the first and the last frame inside the window.
  const startT = start.axis === 'time' ? Math.max(start.t, oldest.streamTimeMs) : undefined;
  const first =
    start.axis === 'index'
      ? frameAtIndex(buf, Math.max(start.index, oldest.index), 'forward')
      : buf.atStreamTime(startT!, Infinity, 'forward');
  let newest: StoredFrame | undefined = last;
  if (end?.axis === 'index') newest = end.index - 1 < oldest.index ? undefined : frameAtIndex(buf, end.index - 1, 'backward');
  else if (end) newest = buf.lastBefore(end.t);

  if (!first || !newest || first.index > newest.index) {
    if (r.dialect === 'provider') {
      throw streamError(r.status.segmentEmpty, 'segment_empty', `No retained frame of stream ${ref.streamId} lies in the requested window`);
    }
    return [newest ?? oldest];
  }

  // Anchored at the newest frame of the window and stepping back by 1/max_fps, so the live edge is
  // always sampled and a window of d seconds holds at most floor(d × max_fps) + 1 frames. Each step
  // takes the frame nearest its time (clamped into the window); a source slower than max_fps repeats
  // a frame, which is taken once.
  const fromT = startT ?? first.streamTimeMs;
  const stepMs = 1000 / ref.maxFps;
  const picks: StoredFrame[] = [newest];
  for (let k = 1; ; k++) {
    const t = newest.streamTimeMs - k * stepMs;
    if (t < fromT) break;
    let f = buf.atStreamTime(t, Infinity, 'nearest') ?? first;
    if (f.index < first.index) f = first;
    if (f.index > newest.index) f = newest;
    if (f.index < picks[picks.length - 1]!.index) picks.push(f);
  }
  return picks.reverse();
}

/**
 * Whether an exclusive end lies before the start (or at it, with `orAt`). Across axes an index is
 * placed at its frame's stream time; an evicted index lies somewhere before the oldest retained
 * frame, so against a time before that too the order is unknown and the window is left to come out
 * empty.
 */
function endsBeforeStart(start: Bound, end: Bound, buf: FrameBuffer, oldest: StoredFrame, orAt: boolean): boolean {
  const before = (e: number, s: number) => (orAt ? e <= s : e < s);
  if (start.axis === 'index' && end.axis === 'index') return before(end.index, start.index);
  if (start.axis === 'time' && end.axis === 'time') return before(end.t, start.t);
  const timeOf = (index: number) => (index < oldest.index ? undefined : frameAtIndex(buf, index, 'forward')?.streamTimeMs);
  if (start.axis === 'index' && end.axis === 'time') {
    const ts = timeOf(start.index);
    return ts !== undefined && before(end.t, ts);
  }
  if (start.axis === 'time' && end.axis === 'index') {
    const te = timeOf(end.index);
    return te === undefined ? start.t >= oldest.streamTimeMs : before(te, start.t);
  }
  return false;
}
