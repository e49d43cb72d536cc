import { decodeJpeg } from '../frames/codec';
import type { StoredFrame } from '../frames/types';
import { dominantColour, frameStats, meanAbsDiff, motionWord } from './frame-stats';
import type { DominantColour, FrameStats, MotionWord } from './frame-stats';
import { JsonSchemaValidators } from '../../lib/json-schema';
import { conformingInstance } from './json-instance';
import type { Filler, SchemaType } from './json-instance';

/**
 * The emulator's built-in model: it answers from the actual pixels of the referenced frames.
 * Each visual context is decoded (JPEG → RGB, a few frames at a time) and measured: test-pattern
 * indices, mean brightness, dominant colour, motion between consecutive frames. The answer is
 * prose (`full`: a sentence or two echoing the prompt; `mini`: terse) ending with one
 * machine-readable tail line per context, or JSON when a response format asks for it.
 *
 * Tail (exact, parsed by other parts' tests):
 *   [frames=<n> index=<first>..<last> span_ms=<ms> pattern=<first>..<last>]
 * with `index=none` when a context has no frames and `pattern=none` when no frame decodes.
 * JSON answers carry no tail (they must stay valid JSON); the same figures are in their fields.
 */

export interface VisualContext {
  /** `''` for an image sent in the request (a data or fetched URL), which belongs to no stream. */
  streamId: string;
  kind: 'image' | 'video';
  /** In time order. */
  frames: StoredFrame[];
}

export type ResponseFormat = { type: 'json_schema'; schema: object } | { type: 'json_object' };

export interface AnalyzerRequest {
  prompt: string;
  contexts: VisualContext[];
  variant: 'full' | 'mini';
  responseFormat?: ResponseFormat;
  /**
   * Output budget in characters. Like a model asked for a short answer, the analyzer says less
   * rather than being cut off: full prose → terse prose → the tails alone. Only when even the tails
   * do not fit does the completion layer truncate.
   */
  maxChars?: number;
}

export interface ContextAnalysis {
  streamId: string;
  kind: 'image' | 'video';
  frames: number;
  /** Frames whose JPEG decoded (the rest are counted but not measured). */
  decodedFrames: number;
  firstIndex: number | null;
  lastIndex: number | null;
  /** last.streamTimeMs − first.streamTimeMs. */
  spanMs: number;
  /** Lifetime indices of the frames, in order. */
  indices: number[];
  /** Test-pattern indices decoded, in frame order (frames without a pattern are skipped). */
  patternIndices: number[];
  patternFirst: number | null;
  patternLast: number | null;
  /** Mean BT.601 luma on a 0-255 scale; null when no frame decoded. */
  brightness: number | null;
  dominantColour: DominantColour | null;
  /** Mean absolute difference (0-255 per channel) between consecutive frames; null with fewer than 2. */
  motion: number | null;
  motionWord: MotionWord | null;
  /** Published size of the last frame. */
  width: number | null;
  height: number | null;
  /** This context's tail line. */
  tail: string;
}

export interface AnalyzerResult {
  text: string;
  analyses: ContextAnalysis[];
}

export interface AnalyzeOptions {
  /**
   * Per-frame measurements keyed by the stored JPEG, so overlapping windows (a clip scheduler
   * asks about mostly the same frames every few seconds) decode each frame once. Entries go
   * with their frames. Owned by the caller; omit for no caching.
   */
  cache?: WeakMap<Buffer, FrameStats | null>;
  /** Frames decoded at once (default 3: sharp runs each decode on the libuv pool). */
  concurrency?: number;
  /** Compiled response-schema validators; without it each json_schema answer builds a fresh ajv (~40 ms). */
  validators?: JsonSchemaValidators;
}

export interface Analyzer {
  analyze(req: AnalyzerRequest): Promise<AnalyzerResult>;
}

/** An analyzer with its own frame-stats cache and schema validators: one per emulator. */
export function createAnalyzer(opts: { concurrency?: number; maxSchemas?: number } = {}): Analyzer {
  const shared: AnalyzeOptions = {
    cache: new WeakMap(),
    validators: new JsonSchemaValidators({ maxEntries: opts.maxSchemas, lenient: true }),
    concurrency: opts.concurrency,
  };
  return { analyze: (req) => analyze(req, shared) };
}

export const EMPTY_TAIL = '[frames=0 index=none span_ms=0 pattern=none]';

export async function analyze(req: AnalyzerRequest, opts: AnalyzeOptions = {}): Promise<AnalyzerResult> {
  const analyses: ContextAnalysis[] = [];
  for (const ctx of req.contexts) analyses.push(await analyzeContext(ctx, opts));
  let prose = req.variant === 'mini' ? miniProse(req.prompt, analyses) : fullProse(req.prompt, analyses);

  const fmt = req.responseFormat;
  if (fmt?.type === 'json_object') return { text: JSON.stringify(jsonObjectAnswer(prose, analyses)), analyses };
  if (fmt?.type === 'json_schema') {
    const { value } = conformingInstance(fmt.schema, analysisFiller(prose, req.prompt, analyses), opts.validators);
    return { text: JSON.stringify(value), analyses };
  }
  const tails = (analyses.length > 0 ? analyses.map((a) => a.tail) : [EMPTY_TAIL]).join('\n');
  const budget = req.maxChars ?? Infinity;
  if (prose.length + 1 + tails.length > budget) prose = miniProse(req.prompt, analyses);
  if (prose.length + 1 + tails.length > budget) return { text: tails, analyses };
  return { text: `${prose}\n${tails}`, analyses };
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

async function statsOf(frame: StoredFrame, cache: AnalyzeOptions['cache']): Promise<FrameStats | null> {
  const hit = cache?.get(frame.jpeg);
  if (hit !== undefined) return hit;
  let stats: FrameStats | null;
  try {
    stats = frameStats(await decodeJpeg(frame.jpeg));
  } catch {
    stats = null; // an undecodable frame is counted, not measured
  }
  cache?.set(frame.jpeg, stats);
  return stats;
}

export function tailOf(
  a: Pick<ContextAnalysis, 'frames' | 'firstIndex' | 'lastIndex' | 'spanMs' | 'patternFirst' | 'patternLast'>,
): string {
  const index = a.firstIndex === null ? 'none' : `${a.firstIndex}..${a.lastIndex}`;
  const pattern = a.patternFirst === null ? 'none' : `${a.patternFirst}..${a.patternLast}`;
  return `[frames=${a.frames} index=${index} span_ms=${a.spanMs} pattern=${pattern}]`;
}

const finiteOr0 = (v: number): number => (Number.isFinite(v) ? v : 0);

async function analyzeContext(ctx: VisualContext, opts: AnalyzeOptions): Promise<ContextAnalysis> {
  const frames = ctx.frames;
  const stats = await mapLimit(frames, opts.concurrency ?? 3, (f) => statsOf(f, opts.cache));
  const decoded = stats.filter((s): s is FrameStats => s !== null);
  const patternIndices = decoded.map((s) => s.pattern).filter((p): p is number => p !== null);

  let motion: number | null = null;
  if (decoded.length >= 2) {
    let sum = 0;
    for (let i = 1; i < decoded.length; i++) sum += meanAbsDiff(decoded[i - 1]!, decoded[i]!);
    motion = sum / (decoded.length - 1);
  }
  const first = frames[0];
  const last = frames[frames.length - 1];
  const analysis: Omit<ContextAnalysis, 'tail'> = {
    streamId: ctx.streamId,
    kind: ctx.kind,
    frames: frames.length,
    decodedFrames: decoded.length,
    // A request's own image has no lifetime index.
    firstIndex: first && ctx.streamId ? first.index : null,
    lastIndex: last && ctx.streamId ? last.index : null,
    spanMs: first && last ? finiteOr0(Math.round(last.streamTimeMs - first.streamTimeMs)) : 0,
    indices: frames.map((f) => f.index),
    patternIndices,
    patternFirst: patternIndices.length ? patternIndices[0]! : null,
    patternLast: patternIndices.length ? patternIndices[patternIndices.length - 1]! : null,
    brightness: decoded.length ? decoded.reduce((s, f) => s + f.brightness, 0) / decoded.length : null,
    dominantColour: dominantColour(decoded),
    motion,
    motionWord: motion === null ? null : motionWord(motion),
    width: last ? last.width : null,
    height: last ? last.height : null,
  };
  return { ...analysis, tail: tailOf(analysis) };
}

// ---------------------------------------------------------------------------------------------
// Prose

/** The prompt as a one-line quote: whitespace collapsed, brackets neutralised (tails stay unambiguous). */
function quotePrompt(prompt: string, max = 160): string {
  const flat = String(prompt ?? '')
    .replace(/\s+/g, ' ')
    .replace(/\[/g, '(')
    .replace(/]/g, ')')
    .trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

const shortId = (id: string): string => (id.length > 8 ? id.slice(0, 8) : id);
const round1 = (v: number): number => Math.round(v * 10) / 10;

function motionPhrase(a: ContextAnalysis): string | null {
  if (a.motion === null) return null;
  const mad = round1(a.motion).toFixed(1);
  switch (a.motionWord) {
    case 'still':
      return `it is still (mean frame difference ${mad})`;
    case 'slight':
      return `there is slight motion (mean frame difference ${mad})`;
    default:
      return `it is moving (mean frame difference ${mad})`;
  }
}

function describeContext(a: ContextAnalysis): string {
  const what = a.kind === 'image' ? 'Image' : 'Video';
  if (a.frames === 0) return `${what} from stream ${shortId(a.streamId)}: no frames were available.`;
  const span =
    a.frames === 1 ? `frame ${a.firstIndex}` : `${a.frames} frames, indices ${a.firstIndex} to ${a.lastIndex} over ${a.spanMs} ms`;
  const parts = [
    a.streamId ? `${what} from stream ${shortId(a.streamId)} (${span}).` : `${what} sent with the request (${a.width}x${a.height}).`,
  ];
  if (a.patternFirst === null) parts.push('No test pattern is visible.');
  else if (a.patternIndices.length === 1) parts.push(`The test pattern reads ${a.patternFirst}.`);
  else parts.push(`The test pattern reads ${a.patternFirst} to ${a.patternLast} (${a.patternIndices.length} of ${a.frames} frames).`);
  if (a.decodedFrames === 0) {
    parts.push('The frames could not be decoded.');
  } else {
    const colour = a.dominantColour ? `mostly ${a.dominantColour.name} (${a.dominantColour.hex})` : 'of mixed colour';
    const look = `The picture is ${colour} with mean brightness ${Math.round(a.brightness ?? 0)} of 255`;
    const motion = motionPhrase(a);
    parts.push(motion ? `${look}, and ${motion}.` : `${look}.`);
  }
  return parts.join(' ');
}

function noFramesAnswer(prompt: string, terse: boolean): string {
  const q = quotePrompt(prompt);
  if (terse) return q ? `No frames provided; text only: "${q}".` : 'No frames or question provided.';
  if (!q) return 'No question and no frames were provided, so there is nothing to answer or look at.';
  const greeting = /^(hi|hello|hey|good (morning|afternoon|evening))\b/i.test(q) ? 'Hello! ' : '';
  return (
    `${greeting}You asked: "${q}"${/[.?!…]$/.test(q) ? '' : '.'} No image or video frames were provided with this request, so I can only ` +
    'respond to the text; attach a frame (image_url) or a window (video_url) with an svc:// reference and I will describe what it shows.'
  );
}

function fullProse(prompt: string, analyses: ContextAnalysis[]): string {
  if (analyses.length === 0) return noFramesAnswer(prompt, false);
  const q = quotePrompt(prompt);
  const intro = q ? `You asked: "${q}"${/[.?!…]$/.test(q) ? '' : '.'}` : 'No question was given, so here is what the frames show.';
  return [intro, ...analyses.map(describeContext)].join(' ');
}

function miniProse(prompt: string, analyses: ContextAnalysis[]): string {
  if (analyses.length === 0) return noFramesAnswer(prompt, true);
  return analyses
    .map((a) => {
      if (a.frames === 0) return 'No frames.';
      const bits = [
        a.firstIndex === null
          ? `1 image ${a.width}x${a.height}`
          : a.frames === 1
            ? `1 frame #${a.firstIndex}`
            : `${a.frames} frames ${a.firstIndex}..${a.lastIndex}, ${a.spanMs} ms`,
        a.patternFirst === null ? 'no pattern' : `pattern ${a.patternFirst}..${a.patternLast}`,
      ];
      if (a.dominantColour) bits.push(`${a.dominantColour.name} ${a.dominantColour.hex}`);
      if (a.brightness !== null) bits.push(`brightness ${Math.round(a.brightness)}`);
      if (a.motionWord) bits.push(a.motionWord);
      return `${bits.join(', ')}.`;
    })
    .join(' ');
}

// ---------------------------------------------------------------------------------------------
// JSON

function contextFields(a: ContextAnalysis): Record<string, unknown> {
  return {
    stream_id: a.streamId,
    kind: a.kind,
    frames: a.frames,
    first_index: a.firstIndex,
    last_index: a.lastIndex,
    span_ms: a.spanMs,
    pattern_first: a.patternFirst,
    pattern_last: a.patternLast,
    pattern_frames: a.patternIndices.length,
    brightness: a.brightness === null ? null : round1(a.brightness),
    dominant_color: a.dominantColour?.name ?? null,
    dominant_color_hex: a.dominantColour?.hex ?? null,
    motion: a.motionWord,
    motion_score: a.motion === null ? null : round1(a.motion),
    moving: a.motionWord === null ? false : a.motionWord !== 'still',
  };
}

const EMPTY_ANALYSIS: ContextAnalysis = {
  streamId: '',
  kind: 'image',
  frames: 0,
  decodedFrames: 0,
  firstIndex: null,
  lastIndex: null,
  spanMs: 0,
  indices: [],
  patternIndices: [],
  patternFirst: null,
  patternLast: null,
  brightness: null,
  dominantColour: null,
  motion: null,
  motionWord: null,
  width: null,
  height: null,
  tail: EMPTY_TAIL,
};

/** The context a single-valued field describes: the first one with frames. */
const primaryOf = (analyses: ContextAnalysis[]): ContextAnalysis => analyses.find((a) => a.frames > 0) ?? analyses[0] ?? EMPTY_ANALYSIS;

function jsonObjectAnswer(prose: string, analyses: ContextAnalysis[]): Record<string, unknown> {
  const { stream_id: _s, kind: _k, ...primary } = contextFields(primaryOf(analyses));
  return { answer: prose, ...primary, contexts: analyses.map(contextFields) };
}

const norm = (key: string): string => key.toLowerCase().replace(/[^a-z0-9]/g, '');
const set = (...keys: string[]): Set<string> => new Set(keys);

const FRAMES = set('frames', 'framecount', 'count', 'numframes', 'nframes', 'totalframes', 'numberofframes', 'framesanalyzed');
const FIRST_INDEX = set('firstindex', 'startindex', 'firstframeindex', 'startframeindex', 'firstframe', 'startframe');
const LAST_INDEX = set('lastindex', 'endindex', 'lastframeindex', 'endframeindex', 'lastframe', 'endframe', 'index', 'frameindex');
const SPAN_MS = set('spanms', 'durationms', 'timespanms', 'span', 'duration', 'elapsedms', 'windowms');
const SPAN_S = set('spans', 'spanseconds', 'durations', 'durationsec', 'durationseconds', 'seconds', 'elapsedseconds');
const PATTERN_FIRST = set('patternfirst', 'firstpattern', 'patternstart', 'firstpatternindex', 'patternfirstindex');
const PATTERN_LAST = set(
  'patternlast',
  'lastpattern',
  'patternend',
  'lastpatternindex',
  'patternlastindex',
  'patternindex',
  'pattern',
  'testpattern',
);
const PATTERN_LIST = set('patternindices', 'patterns', 'decodedindices', 'testpatternindices');
const INDEX_LIST = set('indices', 'frameindices', 'indexes');
const BRIGHTNESS = set('brightness', 'meanbrightness', 'averagebrightness', 'avgbrightness', 'luminance', 'luma', 'meanluma');
const COLOUR = set('dominantcolor', 'dominantcolour', 'color', 'colour', 'maincolor', 'maincolour', 'primarycolor', 'primarycolour');
const COLOUR_HEX = set('dominantcolorhex', 'dominantcolourhex', 'colorhex', 'colourhex', 'hex');
const MOTION = set('motion', 'movement', 'motionlevel', 'activity');
const MOVING = set('moving', 'ismoving', 'hasmotion', 'motiondetected', 'inmotion');
const MOTION_SCORE = set('motionscore', 'motionamount', 'mad', 'meandifference', 'framedifference');
const TEXT = set(
  'description',
  'summary',
  'text',
  'answer',
  'result',
  'caption',
  'response',
  'content',
  'output',
  'explanation',
  'reasoning',
  'observation',
  'observations',
  'message',
  'details',
  'analysis',
  'scene',
);
const PROMPT = set('prompt', 'question', 'query');
const CONTEXT_LIST = set('contexts', 'streams', 'videos', 'images', 'clips', 'analyses', 'results', 'items');

/** Converts a measurement to what the schema wants at that spot (number, string, boolean, any). */
function asType(v: unknown, type: SchemaType | 'any'): unknown {
  if (v === undefined) return undefined;
  switch (type) {
    case 'string':
      return v === null ? undefined : String(v);
    case 'integer':
      return typeof v === 'number' ? Math.round(v) : undefined;
    case 'number':
      return typeof v === 'number' ? v : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : undefined;
    case 'null':
      return v === null ? null : undefined;
    case 'any':
      return v === null ? undefined : v;
    default:
      return undefined;
  }
}

/** Maps schema property names to the analysis (exact aliases first, then telling substrings). */
export function analysisFiller(prose: string, prompt: string, analyses: ContextAnalysis[]): Filler {
  const a = primaryOf(analyses);
  const f = contextFields(a);
  const patternRange = a.patternFirst === null ? 'none' : `${a.patternFirst}..${a.patternLast}`;
  return (key, type, schema) => {
    const k = norm(key);
    if (type === 'array') {
      if (PATTERN_LIST.has(k)) return a.patternIndices;
      if (INDEX_LIST.has(k)) return a.indices;
      if (CONTEXT_LIST.has(k) && analyses.length > 0) return analyses.map(contextFields);
      return undefined;
    }
    if (type === 'object') return undefined;
    if (FRAMES.has(k)) return asType(a.frames, type);
    if (FIRST_INDEX.has(k)) return asType(a.firstIndex, type);
    if (LAST_INDEX.has(k)) return asType(a.lastIndex, type);
    if (SPAN_MS.has(k)) return asType(a.spanMs, type);
    if (SPAN_S.has(k)) return asType(a.spanMs / 1000, type);
    if (PATTERN_FIRST.has(k)) return asType(a.patternFirst, type);
    if (PATTERN_LAST.has(k)) {
      if (type === 'boolean') return a.patternLast !== null;
      if (type === 'string') return patternRange;
      return asType(a.patternLast, type);
    }
    if (BRIGHTNESS.has(k) || k.includes('bright')) {
      // A schema capped at 1 wants brightness as a fraction.
      const unit = typeof schema.maximum === 'number' && schema.maximum <= 1 && a.brightness !== null;
      return asType(unit ? Math.round((a.brightness! / 255) * 1000) / 1000 : f.brightness, type);
    }
    if (COLOUR_HEX.has(k) || ((k.includes('color') || k.includes('colour')) && k.includes('hex'))) {
      return asType(f.dominant_color_hex, type);
    }
    if (COLOUR.has(k) || k.includes('color') || k.includes('colour')) return asType(f.dominant_color, type);
    if (MOVING.has(k)) return type === 'any' ? f.moving : asType(f.moving, type);
    if (MOTION_SCORE.has(k)) return asType(f.motion_score, type);
    if (MOTION.has(k) || k.includes('motion') || k.includes('moving')) {
      if (type === 'boolean') return f.moving;
      if (type === 'number' || type === 'integer') return asType(f.motion_score, type);
      return asType(f.motion, type);
    }
    if (k === 'streamid' || k === 'stream') return asType(a.streamId || undefined, type);
    if (k === 'kind') return asType(analyses.length ? a.kind : undefined, type);
    if (k === 'width') return asType(a.width, type);
    if (k === 'height') return asType(a.height, type);
    if (PROMPT.has(k)) return asType(prompt, type);
    if (TEXT.has(k) || /description|summary|caption|answer|explanation/.test(k)) {
      return type === 'string' || type === 'any' ? prose : undefined;
    }
    return undefined;
  };
}
