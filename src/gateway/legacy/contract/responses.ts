/**
 * /v1beta answers as the legacy wire shapes (pure): results, create, keepalive (room token),
 * models, prompt and feedback responses. The adapter core calls these `toLegacy*` renderers and
 * never branches on legacy quirks or brand/vendor names.
 */
import type { Brand } from '../../../brand';
import type { LegacyMode } from './schema';
import type { StreamSpec } from './spec';

/** The parts of a /v1beta chat completion a legacy result needs (defensive: upstream is untrusted). */
export interface CompletionLike {
  model?: unknown;
  choices?: Array<{ message?: { content?: unknown } | null; finish_reason?: unknown } | null> | null;
}

/** The first choice's text, finish reason and the model that answered, each only when well-typed. */
function answerOf(completion: CompletionLike | null | undefined) {
  const choice = completion?.choices?.[0] ?? null;
  const content = choice?.message?.content;
  return {
    choice,
    content: typeof content === 'string' ? content : undefined,
    finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
    model: typeof completion?.model === 'string' ? completion.model : undefined,
  };
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
  spec: Pick<StreamSpec, 'mode' | 'backend' | 'model'>;
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
  const answer = answerOf(input.completion);
  let error = input.error ?? null;
  if (error === null && !answer.choice) error = input.completion ? 'upstream returned no choices' : 'no completion';
  const ok = error === null;
  // The total spans the inference (it is measured from the tick's due time, the inference around
  // the call, and a tick may start a moment before its due time or round the other way).
  const inferenceMs = Math.max(0, Math.round(input.inferenceLatencyMs));
  return {
    id: input.id,
    stream_id: input.streamId,
    mode: input.spec.mode,
    model_backend: input.spec.backend,
    model_name: answer.model ?? input.modelName ?? input.spec.model,
    prompt: input.prompt,
    result: ok ? (answer.content ?? '') : '',
    inference_latency_ms: inferenceMs,
    total_latency_ms: Math.max(inferenceMs, Math.round(input.totalLatencyMs)),
    ok,
    error,
    finish_reason: ok ? answer.finishReason : null,
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
export function toLegacyModels(list: V1betaModelList, observed?: ReadonlyMap<string, 'degraded' | 'saturated'>): LegacyModelEntry[] {
  const out: LegacyModelEntry[] = [];
  for (const entry of list.data ?? []) {
    if (!entry || typeof entry.id !== 'string') continue;
    const upstream = typeof entry.status === 'string' && LEGACY_STATUSES.includes(entry.status) ? entry.status : 'unavailable';
    const status = (upstream === 'ready' ? (observed?.get(entry.id) ?? 'ready') : upstream) as LegacyModelStatus;
    out.push({ model: entry.id, ready: status === 'ready' || status === 'degraded', status });
  }
  return out;
}

export type LegacyStreamState = 'pending' | 'active' | 'idle';

/**
 * Legacy keepalive `state` from a /v1beta stream read: `pending` before the first frame, `idle` when
 * no frame arrived for `idleAfterMs`, else `active`.
 */
/** `GET /v0.2/streams/{id}/info` (the provider's `StreamInfoResponse`, all 12 fields). */
export interface LegacyStreamInfo {
  stream_id: string;
  source_type: string;
  state: LegacyStreamState;
  uptime_seconds: number;
  fps: number;
  frame_width: number;
  frame_height: number;
  effective_width: number;
  effective_height: number;
  inferences_completed: number;
  inferences_failed: number;
  last_inference_latency_seconds: number;
}

/** The provider processes frames at most 720p: the shorter side capped at 720, the aspect kept. */
export const PROCESSING_SHORT_SIDE = 720;

/** Size after the 720p cap (0 × 0 stays unknown). */
export function effectiveSize(width: number, height: number): { width: number; height: number } {
  const short = Math.min(width, height);
  if (short <= PROCESSING_SHORT_SIDE) return { width, height };
  const scale = PROCESSING_SHORT_SIDE / short;
  return { width: Math.round(width * scale), height: Math.round(height * scale) };
}

export function toLegacyStreamInfo(
  input: {
    streamId: string;
    transport: 'native' | 'webrtc' | 'room';
    state: LegacyStreamState;
    uptimeMs: number;
    fps: number;
    /** 0 when unknown (a native stream: the upstream does not tell its resolution). */
    width: number;
    height: number;
    inferencesCompleted: number;
    inferencesFailed: number;
    lastInferenceMs: number;
  },
  brand: Brand,
): LegacyStreamInfo {
  const effective = effectiveSize(input.width, input.height);
  return {
    stream_id: input.streamId,
    source_type: input.transport === 'room' ? brand.room : input.transport,
    state: input.state,
    uptime_seconds: Math.max(0, Math.round(input.uptimeMs) / 1000),
    fps: Math.round(input.fps * 100) / 100,
    frame_width: input.width,
    frame_height: input.height,
    effective_width: effective.width,
    effective_height: effective.height,
    inferences_completed: input.inferencesCompleted,
    inferences_failed: input.inferencesFailed,
    last_inference_latency_seconds: Math.max(0, input.lastInferenceMs) / 1000,
  };
}

/** `POST /v0.2/streams/{id}/spectate`: `{<vendor>: {url, token}}` (the provider's `SpectateResponse`). */
export type LegacySpectate = Record<string, { url: string; token: string }>;

export function toLegacySpectate(view: { url: string; token: string }, brand: Brand): LegacySpectate {
  return { [brand.room]: { url: view.url, token: view.token } };
}

export function legacyStreamState(stream: { last_frame_at_ms?: number | null }, nowMs: number, idleAfterMs = 10_000): LegacyStreamState {
  const last = stream.last_frame_at_ms;
  if (last === null || last === undefined) return 'pending';
  return nowMs - last > idleAfterMs ? 'idle' : 'active';
}

/** 1 cent = 1,000,000 microcents (spec/legacy-clients.md). */
export function microcentsToCents(microcents: number): number {
  return microcents / 1_000_000;
}

/** The keepalive's room token: the fresh publish token of a native stream, else null. */
export function legacyRoomToken(spec: Pick<StreamSpec, 'transport'> | null | undefined, publishToken: string | undefined): string | null {
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

/**
 * Keepalive body; the token field is named after the vendor (`room_token` by default). Credits are
 * whole cents, as the provider types them (an integer), rounded down: never more than the account has.
 */
export function toLegacyKeepalive(input: LegacyKeepaliveInput, brand: Brand): Record<string, unknown> {
  return {
    status: 'ok',
    stream_id: input.streamId,
    ttl_seconds: input.ttlSeconds,
    credits_remaining_cents: Math.floor(input.creditsRemainingCents),
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
  spec: Pick<StreamSpec, 'backend' | 'model' | 'outputSchema'>;
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

/** The reinfer response: `{id, model, content, finish_reason, usage}`, `id` a new one. */
export interface LegacyReinferResponse {
  id: string;
  model: string;
  content: string;
  finish_reason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

export function toLegacyReinfer(input: {
  id: string;
  completion: CompletionLike & { usage?: unknown };
  modelName: string;
}): LegacyReinferResponse {
  const answer = answerOf(input.completion);
  const u = input.completion.usage as Record<string, unknown> | null | undefined;
  const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return {
    id: input.id,
    model: answer.model ?? input.modelName,
    content: answer.content ?? '',
    finish_reason: answer.finishReason,
    usage:
      u && typeof u === 'object'
        ? { prompt_tokens: count(u.prompt_tokens), completion_tokens: count(u.completion_tokens), total_tokens: count(u.total_tokens) }
        : null,
  };
}
