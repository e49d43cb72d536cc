/**
 * The domain type of a legacy stream: `StreamSpec`, the neutral configuration a parsed legacy
 * create body becomes (transport, tick period, target fps from the deprecated pair, token cap, the
 * token-rate rule). Pure functions, no I/O; the rest of the adapter deals only in `StreamSpec`s.
 */
import type { LegacyCreateRequest } from './schema';
import { legacyValidationError } from './validate';

export type Transport = 'native' | 'webrtc' | 'room';

/** Where the media comes from; `room` is the customer's own media room (any vendor name). */
export type StreamSourceSpec =
  { transport: 'native' } | { transport: 'webrtc'; sdp: string } | { transport: 'room'; url: string; token: string };

export interface ClipSpec {
  targetFps: number;
  clipLengthMs: number;
  delayMs: number;
}

export interface FrameSpec {
  intervalMs: number;
}

export type DeprecatedField = 'webrtc' | 'sampling_ratio' | 'fps';

interface StreamSpecBase {
  transport: Transport;
  source: StreamSourceSpec;
  /** Tick period of the scheduler: `delay_seconds` (clip) or `interval_seconds` (frame). */
  intervalMs: number;
  prompt: string;
  model: string;
  /** Legacy `inference.backend` (the brand backend or the third-party one); echoed in results only. */
  backend: string;
  outputSchema: Record<string, unknown> | null;
  maxOutputTokens: number;
  /** Deprecated request fields this client used (for deprecation telemetry). */
  deprecatedFields: DeprecatedField[];
  /** `client.request_id`, else the fallback passed to normalizeCreate. */
  requestId: string | null;
}

export type StreamSpec = StreamSpecBase & ({ mode: 'clip'; clip: ClipSpec } | { mode: 'frame'; frame: FrameSpec });

/** target_fps when a clip body sends neither target_fps nor the fps + sampling_ratio pair (see schema.ts). */
export const DEFAULT_TARGET_FPS = 1;
/** Upper bound of legacy target_fps; the converted legacy pair is capped to it as well. */
export const MAX_TARGET_FPS = 30;

/** Float slack for products of decimal inputs (0.29 * 100 = 28.999999999999996). */
const EPSILON = 1e-9;

/** `target_fps = floor(fps * sampling_ratio)`, at least 1 (spec/legacy-clients.md), at most 30. */
export function targetFpsFromLegacyPair(fps: number, samplingRatio: number): number {
  return Math.min(MAX_TARGET_FPS, Math.max(1, Math.floor(fps * samplingRatio + EPSILON)));
}

/** Largest max_output_tokens allowed for this interval: `floor(limit * interval)`. */
export function maxTokensForInterval(intervalSeconds: number, maxTokensPerSecond: number): number {
  return Math.floor(maxTokensPerSecond * intervalSeconds + EPSILON);
}

/** Default max_output_tokens: `floor(limit * interval)`, at least 1. */
export function defaultMaxOutputTokens(intervalSeconds: number, maxTokensPerSecond: number): number {
  return Math.max(1, maxTokensForInterval(intervalSeconds, maxTokensPerSecond));
}

/** `2` → `2`, `0.5` → `0.5`, `128` → `128`; no float noise. */
export function formatNumber(n: number): string {
  return String(Number(n.toFixed(6)));
}

/** Where the interval of a mode is sent: `interval_seconds` (frame) or `delay_seconds` (clip). */
export type IntervalField = 'interval_seconds' | 'delay_seconds';

/** Seconds rounded up to ms: a suggested interval never falls short of what it must reach. */
const ceilMs = (seconds: number) => formatNumber(Math.ceil(seconds * 1000 - EPSILON) / 1000);

/**
 * The token-rate rule: `max_output_tokens / interval` must not exceed the limit. The message format is
 * fixed by spec/legacy-clients.md (clients display it verbatim); it ends with exactly what to send
 * instead. An interval too short for even one token is the interval's fault, and the 422 says so.
 */
export function checkTokenRate(
  maxOutputTokens: number,
  intervalSeconds: number,
  maxTokensPerSecond: number,
  requestId: string | null = null,
  field: IntervalField = 'interval_seconds',
): void {
  if (maxOutputTokens <= maxTokensPerSecond * intervalSeconds + EPSILON) return;
  const limit = formatNumber(maxTokensPerSecond);
  const allowed = maxTokensForInterval(intervalSeconds, maxTokensPerSecond);
  if (allowed < 1) {
    const message =
      `${field} (${formatNumber(intervalSeconds)}s) is too short: at the maximum of ${limit} tok/s not even one output token ` +
      `fits in it. Send "${field}": ${ceilMs(1 / maxTokensPerSecond)} or more.`;
    throw legacyValidationError([{ loc: ['body', 'processing', field], msg: message, type: 'value_error' }], requestId, message);
  }
  const rate = (maxOutputTokens / intervalSeconds).toFixed(1);
  const message =
    `Effective output token rate (${rate} tok/s) exceeds maximum of ${limit} tok/s. ` +
    `max_output_tokens (${maxOutputTokens}) / interval (${formatNumber(intervalSeconds)}s) must be <= ${limit}. ` +
    `Reduce max_output_tokens to at most ${allowed}. Send "max_output_tokens": ${allowed} (or omit it: the default ` +
    `for this interval is ${allowed}), or keep ${maxOutputTokens} with "${field}": ${ceilMs(maxOutputTokens / maxTokensPerSecond)} or more.`;
  throw legacyValidationError([{ loc: ['body', 'inference', 'max_output_tokens'], msg: message, type: 'value_error' }], requestId, message);
}

const toMs = (seconds: number) => Math.max(1, Math.round(seconds * 1000));

/**
 * Parsed legacy create body → StreamSpec. Throws a 422 legacy ServiceError when the token-rate rule
 * fails (its request id readable with `legacyErrorRequestId`). `fallbackRequestId` is used when the
 * body has no `client.request_id`.
 */
export function normalizeCreate(
  parsed: LegacyCreateRequest,
  limits: { maxTokensPerSecond: number },
  fallbackRequestId: string | null = null,
): StreamSpec {
  const deprecatedFields: DeprecatedField[] = [];
  let source: StreamSourceSpec;
  if (parsed.source?.type === 'webrtc') source = { transport: 'webrtc', sdp: parsed.source.sdp };
  else if (parsed.source?.type === 'room') source = { transport: 'room', url: parsed.source.url, token: parsed.source.token };
  else if (parsed.source?.type === 'native') source = { transport: 'native' };
  else if (parsed.webrtc) source = { transport: 'webrtc', sdp: parsed.webrtc.sdp };
  else source = { transport: 'native' };
  if (parsed.webrtc) deprecatedFields.push('webrtc');

  const inf = parsed.inference;
  let intervalSeconds: number;
  let modeSpec: { mode: 'clip'; clip: ClipSpec } | { mode: 'frame'; frame: FrameSpec };
  if (parsed.mode === 'clip') {
    const p = parsed.processing;
    if (p.sampling_ratio !== null) deprecatedFields.push('sampling_ratio');
    if (p.fps !== null) deprecatedFields.push('fps');
    const targetFps =
      p.target_fps ?? (p.fps !== null && p.sampling_ratio !== null ? targetFpsFromLegacyPair(p.fps, p.sampling_ratio) : DEFAULT_TARGET_FPS);
    intervalSeconds = p.delay_seconds;
    modeSpec = {
      mode: 'clip',
      clip: { targetFps, clipLengthMs: toMs(p.clip_length_seconds), delayMs: toMs(p.delay_seconds) },
    };
  } else {
    intervalSeconds = parsed.processing.interval_seconds;
    modeSpec = { mode: 'frame', frame: { intervalMs: toMs(intervalSeconds) } };
  }
  const intervalMs = modeSpec.mode === 'clip' ? modeSpec.clip.delayMs : modeSpec.frame.intervalMs;

  const requestId = parsed.client?.request_id ?? fallbackRequestId;
  const maxOutputTokens = inf.max_output_tokens ?? defaultMaxOutputTokens(intervalSeconds, limits.maxTokensPerSecond);
  checkTokenRate(
    maxOutputTokens,
    intervalSeconds,
    limits.maxTokensPerSecond,
    requestId,
    parsed.mode === 'clip' ? 'delay_seconds' : 'interval_seconds',
  );

  return {
    transport: source.transport,
    source,
    ...modeSpec,
    intervalMs,
    prompt: inf.prompt,
    model: inf.model,
    backend: inf.backend,
    outputSchema: inf.output_schema_json,
    maxOutputTokens,
    deprecatedFields,
    requestId,
  };
}
