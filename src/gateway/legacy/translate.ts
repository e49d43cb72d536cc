/**
 * Every v0.2 ⇄ v1beta difference, in one place (pure functions, no I/O): a parsed legacy create
 * body becomes a neutral SessionSpec, a SessionSpec becomes a /v1beta chat-completion request, and
 * /v1beta answers become the legacy wire shapes. The adapter core only handles SessionSpecs and
 * calls the `toLegacy*` renderers; it never branches on legacy quirks or brand/vendor names.
 */
import type { Brand } from '../../brand';
import type { ChatCompletionRequest, ContentPart } from '../../upstream/types';
import type { LegacyCreateRequest, LegacyMode } from './schema';
import { legacyValidationError } from './validate';

export type Transport = 'native' | 'webrtc' | 'room';

/** Where the media comes from; `room` is the customer's own media room (any vendor name). */
export type SessionSource =
  | { transport: 'native' }
  | { transport: 'webrtc'; sdp: string }
  | { transport: 'room'; url: string; token: string };

export interface ClipSpec {
  targetFps: number;
  clipLengthMs: number;
  delayMs: number;
}

export interface FrameSpec {
  intervalMs: number;
}

export type DeprecatedField = 'webrtc' | 'sampling_ratio' | 'fps';

interface SessionSpecBase {
  transport: Transport;
  source: SessionSource;
  /** Tick period of the scheduler: `delay_seconds` (clip) or `interval_seconds` (frame). */
  intervalMs: number;
  prompt: string;
  model: string;
  /** Legacy `inference.backend` (`thirdparty` or the brand backend); echoed in results only. */
  backend: string;
  outputSchema: Record<string, unknown> | null;
  maxOutputTokens: number;
  /** Deprecated request fields this client used (for deprecation telemetry). */
  deprecatedFields: DeprecatedField[];
  /** `client.request_id`, else the fallback passed to normalizeCreate. */
  requestId: string | null;
}

export type SessionSpec = SessionSpecBase &
  ({ mode: 'clip'; clip: ClipSpec } | { mode: 'frame'; frame: FrameSpec });

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
function formatNumber(n: number): string {
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
  throw legacyValidationError(
    [{ loc: ['body', 'inference', 'max_output_tokens'], msg: message, type: 'value_error' }],
    requestId,
    message,
  );
}

const toMs = (seconds: number) => Math.max(1, Math.round(seconds * 1000));

/**
 * Parsed legacy create body → SessionSpec. Throws a 422 legacy ServiceError when the token-rate rule
 * fails (its request id readable with `legacyErrorRequestId`). `fallbackRequestId` is used when the
 * body has no `client.request_id`.
 */
export function normalizeCreate(
  parsed: LegacyCreateRequest,
  limits: { maxTokensPerSecond: number },
  fallbackRequestId: string | null = null,
): SessionSpec {
  const deprecatedFields: DeprecatedField[] = [];
  let source: SessionSource;
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
      p.target_fps ??
      (p.fps !== null && p.sampling_ratio !== null ? targetFpsFromLegacyPair(p.fps, p.sampling_ratio) : DEFAULT_TARGET_FPS);
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
  checkTokenRate(maxOutputTokens, intervalSeconds, limits.maxTokensPerSecond, requestId, parsed.mode === 'clip' ? 'delay_seconds' : 'interval_seconds');

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

// ---------------------------------------------------------------------------------------------
// SessionSpec → /v1beta chat completion

/** The prompt-cache thread of a legacy stream: one per stream, so its ticks share a cache. */
export const legacyThreadId = (streamId: string): string => `legacy-${streamId}`;

/** The visual reference one tick asks about: the last clip window, or the newest frame. */
export function streamReference(spec: SessionSpec, streamId: string, brand: Brand): string {
  const base = `${brand.scheme}://streams/${encodeURIComponent(streamId)}`;
  return spec.mode === 'clip'
    ? `${base}?start_offset_ms=-${spec.clip.clipLengthMs}&max_fps=${spec.clip.targetFps}`
    : `${base}?frame_index=-1`;
}

/**
 * Body of `POST /v1beta/chat/completions` for one tick. `prompt` is the current prompt (it may have
 * been patched since create); `model` overrides the spec's model for fallbacks.
 */
export function buildCompletionRequest(
  spec: SessionSpec,
  streamId: string,
  brand: Brand,
  opts: { threadId: string; prompt: string; model?: string },
): ChatCompletionRequest {
  return {
    model: opts.model ?? spec.model,
    messages: promptAbout(opts.prompt, spec.mode, streamReference(spec, streamId, brand)),
    max_completion_tokens: spec.maxOutputTokens,
    ...outputFormat(spec.outputSchema),
    thread_id: opts.threadId,
    stream: false,
  };
}

/** One user message: the prompt, then the frames (a video part for a clip, an image part for a frame). */
function promptAbout(prompt: string, mode: LegacyMode, url: string): ChatCompletionRequest['messages'] {
  const visual: ContentPart = mode === 'clip' ? { type: 'video_url', video_url: { url } } : { type: 'image_url', image_url: { url } };
  return [{ role: 'user', content: [{ type: 'text', text: prompt }, visual] }];
}

/** An output schema as the completion's `response_format` (nothing without one). */
function outputFormat(schema: Record<string, unknown> | null): Pick<ChatCompletionRequest, 'response_format'> {
  return schema ? { response_format: { type: 'json_schema', json_schema: { name: 'output', schema } } } : {};
}

// ---------------------------------------------------------------------------------------------
// Reinfer: a delivered result's window → /v1beta chat completion

/** The frames behind a delivered result on the stream clock (ms since its first frame). */
export interface StreamWindow {
  /** `clip`: the segment [startMs, endMs] sampled at `maxFps`; `frame`: the frame on screen at `endMs`. */
  mode: LegacyMode;
  startMs: number;
  endMs: number;
  maxFps: number;
}

/**
 * The reference of a result's frames on the stream clock: a clip as a segment between two
 * `*_timestamp_ms` anchors at its `max_fps`; a frame as the last frame at or before its time
 * (`direction=backward`, what `frame_index=-1` took then), however old.
 */
export function windowReference(w: StreamWindow, streamId: string, brand: Brand): string {
  const base = `${brand.scheme}://streams/${encodeURIComponent(streamId)}`;
  const end = Math.max(0, Math.round(w.endMs));
  if (w.mode === 'frame') return `${base}?timestamp_ms=${end}&direction=backward&tolerance_ms=${end + 1}`;
  const start = Math.min(end, Math.max(0, Math.round(w.startMs)));
  return `${base}?start_timestamp_ms=${start}&end_timestamp_ms=${end}&max_fps=${formatNumber(w.maxFps)}`;
}

/**
 * Body of the reinfer completion: the new prompt on the result's window, an image part for a frame
 * and a video part for a clip (as the tick asked), with the caller's output schema
 * (`response_format`), token cap and temperature where given.
 */
export function buildReinferRequest(
  w: StreamWindow,
  streamId: string,
  brand: Brand,
  opts: { prompt: string; model: string; maxTokens: number; temperature: number | null; outputSchema: Record<string, unknown> | null },
): ChatCompletionRequest {
  return {
    model: opts.model,
    messages: promptAbout(opts.prompt, w.mode, windowReference(w, streamId, brand)),
    max_completion_tokens: opts.maxTokens,
    ...(opts.temperature === null ? {} : { temperature: opts.temperature }),
    ...outputFormat(opts.outputSchema),
    stream: false,
  };
}

/** The reinfer response: `{id, model, content, finish_reason, usage}`, `id` a new one. */
export interface LegacyReinferResponse {
  id: string;
  model: string;
  content: string;
  finish_reason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

export function toLegacyReinfer(input: { id: string; completion: CompletionLike & { usage?: unknown }; modelName: string }): LegacyReinferResponse {
  const choice = input.completion.choices?.[0] ?? null;
  const content = choice?.message?.content;
  const u = input.completion.usage as Record<string, unknown> | null | undefined;
  const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return {
    id: input.id,
    model: typeof input.completion.model === 'string' ? input.completion.model : input.modelName,
    content: typeof content === 'string' ? content : '',
    finish_reason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
    usage:
      u && typeof u === 'object'
        ? { prompt_tokens: count(u.prompt_tokens), completion_tokens: count(u.completion_tokens), total_tokens: count(u.total_tokens) }
        : null,
  };
}

// ---------------------------------------------------------------------------------------------
// /v1beta answers → legacy wire shapes

/** The parts of a /v1beta chat completion a legacy result needs (defensive: upstream is untrusted). */
export interface CompletionLike {
  model?: unknown;
  choices?: Array<{ message?: { content?: unknown } | null; finish_reason?: unknown } | null> | null;
}

export interface LegacyResultMessage {
  id: string;
  stream_id: string;
  mode: LegacyMode;
  model_backend: string;
  model_name: string;
  prompt: string;
  result: string;
  inference_latency_ms: number;
  total_latency_ms: number;
  ok: boolean;
  error: string | null;
  finish_reason: string | null;
}

export interface LegacyResultInput {
  /** Id of this result message (the caller generates it). */
  id: string;
  streamId: string;
  spec: Pick<SessionSpec, 'mode' | 'backend' | 'model'>;
  /** The prompt this inference used. */
  prompt: string;
  /** The upstream answer on success. */
  completion?: CompletionLike | null;
  /** Failure description; when set the result is not ok. */
  error?: string | null;
  /** Model that was asked last (after fallbacks); the completion's own `model` wins when present. */
  modelName?: string;
  inferenceLatencyMs: number;
  totalLatencyMs: number;
}

/**
 * One legacy WebSocket result message: exactly the legacy keys. On failure `result` is `''` (not
 * null) so clients typing it as a string still parse the message, and `finish_reason` is null.
 */
export function toLegacyResult(input: LegacyResultInput): LegacyResultMessage {
  const choice = input.completion?.choices?.[0] ?? null;
  const content = choice?.message?.content;
  const answeredModel = typeof input.completion?.model === 'string' ? input.completion.model : undefined;
  let error = input.error ?? null;
  if (error === null && !choice) error = input.completion ? 'upstream returned no choices' : 'no completion';
  const ok = error === null;
  return {
    id: input.id,
    stream_id: input.streamId,
    mode: input.spec.mode,
    model_backend: input.spec.backend,
    model_name: answeredModel ?? input.modelName ?? input.spec.model,
    prompt: input.prompt,
    result: ok && typeof content === 'string' ? content : '',
    inference_latency_ms: Math.max(0, Math.round(input.inferenceLatencyMs)),
    total_latency_ms: Math.max(0, Math.round(input.totalLatencyMs)),
    ok,
    error,
    finish_reason: ok && typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
  };
}

export interface TurnServer {
  urls: string;
  username: string;
  credential: string;
}

/** What the media layer produced for a new stream, per transport. */
export type LegacyMedia =
  | { transport: 'native'; url: string; token: string }
  | { transport: 'webrtc'; answerSdp: string; turnServers: readonly TurnServer[] }
  | { transport: 'room' };

export interface LegacyCreateResponse {
  stream_id: string;
  webrtc: { type: 'answer'; sdp: string } | null;
  lease: { ttl_seconds: number };
  turn_servers: TurnServer[] | null;
  /** Plus `[brand.room]: {url, token} | null`. */
  [vendorField: string]: unknown;
}

/**
 * Body of the 201 create response. Sub-objects hold exactly the keys the Python SDK accepts; the
 * room object (named after the vendor) is set for native streams only.
 */
export function toLegacyCreateResponse(
  input: { streamId: string; ttlSeconds: number; media: LegacyMedia },
  brand: Brand,
): LegacyCreateResponse {
  const { media } = input;
  return {
    stream_id: input.streamId,
    webrtc: media.transport === 'webrtc' ? { type: 'answer', sdp: media.answerSdp } : null,
    lease: { ttl_seconds: input.ttlSeconds },
    turn_servers:
      media.transport === 'webrtc'
        ? media.turnServers.map((t) => ({ urls: t.urls, username: t.username, credential: t.credential }))
        : null,
    [brand.room]: media.transport === 'native' ? { url: media.url, token: media.token } : null,
  };
}

export type LegacyModelStatus = 'ready' | 'degraded' | 'saturated' | 'unavailable';

export interface LegacyModelEntry {
  model: string;
  ready: boolean;
  status: LegacyModelStatus;
}

/** A /v1beta model list (only what the legacy list needs; untrusted input). */
export interface V1betaModelList {
  data?: Array<{ id?: unknown; status?: unknown } | null> | null;
}

const LEGACY_STATUSES: readonly string[] = ['ready', 'degraded', 'saturated', 'unavailable'];

/**
 * /v1beta model list → bare legacy array. /v1beta only says ready or unavailable; the gateway's own
 * observations (`observed`) refine a ready model to degraded or saturated.
 */
export function toLegacyModels(
  list: V1betaModelList,
  observed?: ReadonlyMap<string, 'degraded' | 'saturated'>,
): LegacyModelEntry[] {
  const out: LegacyModelEntry[] = [];
  for (const entry of list.data ?? []) {
    if (!entry || typeof entry.id !== 'string') continue;
    const upstream = typeof entry.status === 'string' && LEGACY_STATUSES.includes(entry.status) ? entry.status : 'unavailable';
    const status = (upstream === 'ready' ? (observed?.get(entry.id) ?? 'ready') : upstream) as LegacyModelStatus;
    out.push({ model: entry.id, ready: status === 'ready' || status === 'degraded', status });
  }
  return out;
}

/** End reason of every stream a shutting-down gateway ends (and of the sockets it closes). */
export const SERVER_SHUTDOWN = 'server_shutdown';

/** Close reasons of legacy WebSocket 1001 closes (the stream's end reason). */
export function legacyEndReasons(brand: Brand) {
  return {
    clientRequested: 'client_requested',
    leaseExpired: 'lease_expired',
    insufficientCredits: 'insufficient_credits',
    webrtcDisconnected: 'webrtc_disconnected',
    roomDisconnected: brand.roomDisconnected,
    serverShutdown: SERVER_SHUTDOWN,
  } as const;
}

/** A results-socket close: code and reason text, as legacy clients classify them. */
export interface LegacyClose {
  code: number;
  reason: string;
}

/**
 * Every results-socket close that is not a stream end (1001 + end reason). 1008 is fatal in legacy
 * clients (a refused key or stream), 1011 and 1013 are retried (could not check; try later).
 */
export const LEGACY_CLOSES = {
  authTimeout: { code: 1008, reason: 'authentication timeout' },
  badFirstMessage: { code: 1008, reason: 'first message must be {"api_key": "..."}' },
  authFailed: { code: 1008, reason: 'authentication failed' },
  streamNotFound: { code: 1008, reason: 'stream_not_found' },
  forbidden: { code: 1008, reason: 'forbidden' },
  authRateLimited: { code: 1013, reason: 'too many failed authentications' },
  authUnavailable: { code: 1011, reason: 'authorization unavailable' },
  /**
   * 1012 Service Restart: this replica left and handed the stream to another; not an end (1001),
   * so clients reconnect (legacy-clients.md) and land on a replica that serves it.
   */
  replicaLeaving: { code: 1012, reason: 'service_restart' },
} as const satisfies Record<string, LegacyClose>;

/** 1001 Going Away: the stream ended, the reason says why. */
export const endClose = (reason: string): LegacyClose => ({ code: 1001, reason });

/** 1013 Try Again Later with a sunset refusal's reason: not the 1008 of a bad key. */
export const tryLaterClose = (reason: string): LegacyClose => ({ code: 1013, reason });

export type LegacyEndReasons = ReturnType<typeof legacyEndReasons>;

/** End reason when the gateway loses the media transport of a webrtc or customer-room stream. */
export function transportLostReason(transport: Exclude<Transport, 'native'>, brand: Brand): string {
  return transport === 'webrtc' ? 'webrtc_disconnected' : brand.roomDisconnected;
}

export type LegacyStreamState = 'pending' | 'active' | 'idle';

/**
 * Legacy keepalive `state` from a /v1beta stream read: `pending` before the first frame, `idle` when
 * no frame arrived for `idleAfterMs`, else `active`.
 */
export function legacyStreamState(
  stream: { last_frame_at_ms?: number | null },
  nowMs: number,
  idleAfterMs = 10_000,
): LegacyStreamState {
  const last = stream.last_frame_at_ms;
  if (last === null || last === undefined) return 'pending';
  return nowMs - last > idleAfterMs ? 'idle' : 'active';
}

/** 1 cent = 1,000,000 microcents (spec/legacy-clients.md). */
export function microcentsToCents(microcents: number): number {
  return microcents / 1_000_000;
}

/** The keepalive's room token: the fresh publish token of a native stream, else null. */
export function legacyRoomToken(spec: Pick<SessionSpec, 'transport'> | null | undefined, publishToken: string | undefined): string | null {
  return spec?.transport === 'native' ? (publishToken ?? null) : null;
}

export interface LegacyKeepaliveInput {
  streamId: string;
  ttlSeconds: number;
  creditsRemainingCents: number;
  costCents: number;
  secondsCharged: number;
  state: LegacyStreamState;
  /** Fresh publish token (native streams), else null. */
  roomToken: string | null;
}

/** Keepalive body; the token field is named after the vendor (`room_token` by default). */
export function toLegacyKeepalive(input: LegacyKeepaliveInput, brand: Brand): Record<string, unknown> {
  return {
    status: 'ok',
    stream_id: input.streamId,
    ttl_seconds: input.ttlSeconds,
    credits_remaining_cents: input.creditsRemainingCents,
    cost_cents: input.costCents,
    seconds_charged: input.secondsCharged,
    state: input.state,
    [brand.roomTokenField]: input.roomToken,
  };
}

export interface LegacyPromptResponse {
  id: string;
  stream_id: string;
  prompt: string;
  backend: string;
  model: string;
  output_schema_json: Record<string, unknown> | null;
  created_at: string;
  updated_at: string;
}

/** Response of `PATCH /v0.2/streams/{id}/config/prompt`; timestamps as ISO strings. */
export function toLegacyPromptResponse(input: {
  id: string;
  streamId: string;
  prompt: string;
  spec: Pick<SessionSpec, 'backend' | 'model' | 'outputSchema'>;
  createdAtMs: number;
  updatedAtMs: number;
}): LegacyPromptResponse {
  return {
    id: input.id,
    stream_id: input.streamId,
    prompt: input.prompt,
    backend: input.spec.backend,
    model: input.spec.model,
    output_schema_json: input.spec.outputSchema,
    created_at: new Date(input.createdAtMs).toISOString(),
    updated_at: new Date(input.updatedAtMs).toISOString(),
  };
}

export interface LegacyFeedbackEntry {
  id: string;
  stream_id: string;
  rating: number;
  category: string;
  feedback: string;
  created_at: string;
  updated_at: string;
}

/** One entry of `GET /v0.2/streams/feedback`. */
export function toLegacyFeedback(input: {
  id: string;
  streamId: string;
  rating: number;
  category: string;
  feedback: string;
  createdAtMs: number;
  updatedAtMs: number;
}): LegacyFeedbackEntry {
  return {
    id: input.id,
    stream_id: input.streamId,
    rating: input.rating,
    category: input.category,
    feedback: input.feedback,
    created_at: new Date(input.createdAtMs).toISOString(),
    updated_at: new Date(input.updatedAtMs).toISOString(),
  };
}
