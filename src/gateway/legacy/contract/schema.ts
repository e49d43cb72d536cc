/**
 * Zod schemas of the legacy /v0.2 request bodies (spec/interface.md "Legacy create-stream request",
 * spec/legacy-clients.md). Shape rules only; the v0.2 → v1beta meaning lives in translate.ts.
 *
 * The vendor token (`source.type` of a customer room) and the brand token (`inference.backend`) are
 * configuration, hence the factory. Parsed output uses the neutral source type `room` whatever the
 * vendor is called on the wire, so nothing downstream sees the configured name.
 *
 * Decisions where the contract is silent:
 * - clip processing with neither `target_fps` nor the `fps` + `sampling_ratio` pair is accepted and
 *   later defaults to 1 fps: the contract types `target_fps` as "integer or null" (not required), and 1
 *   is the default `max_fps` of a v1beta video part.
 * - `mode` omitted or null: clip or frame is detected from the processing keys that carry a value
 *   (null-valued keys do not count, so serialisers that emit every optional field still work).
 * - `inference.backend` may be omitted (→ brand backend) but not null (the contract does not say nullable).
 *
 * Bounds where the contract gives none (every tenant-controlled number, string and structure has
 * one; they are listed in docs/configuration.md "Request limits"): see LEGACY_LIMITS.
 */
import { z } from 'zod';
import type { Brand } from '../../../brand';
import { INTEGER_EXPECTED } from './validate';
import { isRecord } from '../../../lib/is-record';
import { DEFAULT_SCHEMA_LIMITS, schemaLimitViolation } from '../../../lib/json-schema';

/**
 * Upper bounds the contract leaves open. An hour between clips (the contract: "greater than 0")
 * is far beyond any client and keeps every timer finite; the token-rate rule then bounds
 * max_output_tokens (128 tok/s × 3600 s). Strings are capped well above real use (a prompt of
 * 32k characters is ~8k tokens; SDP offers are a few KB; JWT room tokens under 2 KB).
 */
export const LEGACY_LIMITS = {
  maxDelaySeconds: 3600,
  maxSourceFps: 240,
  maxPromptChars: 32_768,
  maxModelChars: 256,
  maxSdpChars: 64 * 1024,
  maxUrlChars: 2048,
  maxTokenChars: 8192,
  maxRequestIdChars: 256,
  maxCategoryChars: 64,
  maxFeedbackChars: 4096,
  /** Reinfer: a result id is a UUID; the output cap of one re-run and its sampling temperature. */
  maxResultIdChars: 128,
  maxReinferTokens: 8192,
  maxTemperature: 2,
} as const;

export type LegacyMode = 'clip' | 'frame';

/** Source after parsing; `room` is the neutral name of the configured vendor's source type. */
export type LegacySource = { type: 'webrtc'; sdp: string } | { type: 'room'; url: string; token: string } | { type: 'native' };

export interface ClipProcessing {
  target_fps: number | null;
  sampling_ratio: number | null;
  fps: number | null;
  clip_length_seconds: number;
  delay_seconds: number;
}

export interface FrameProcessing {
  interval_seconds: number;
}

export interface LegacyInference {
  prompt: string;
  model: string;
  /** The configured brand backend or the third-party one (`brand.thirdPartyBackend`). */
  backend: string;
  output_schema_json: Record<string, unknown> | null;
  max_output_tokens: number | null;
}

interface LegacyCreateCommon {
  source: LegacySource | null;
  /** Deprecated top-level offer (never together with `source`). */
  webrtc: { type: 'offer'; sdp: string } | null;
  inference: LegacyInference;
  client: { request_id: string | null } | null;
}

/** A valid create body; `mode` is always resolved (explicit or detected). */
export type LegacyCreateRequest = LegacyCreateCommon &
  ({ mode: 'clip'; processing: ClipProcessing } | { mode: 'frame'; processing: FrameProcessing });

export interface LegacyPromptPatch {
  prompt: string;
}

/** `POST /v0.2/chat/completions/clip` (reinfer): a delivered result re-run with a new prompt. */
export interface LegacyReinferBody {
  result_id: string;
  prompt: string;
  model: string;
  temperature: number | null;
  max_tokens: number | null;
  output_schema: Record<string, unknown> | null;
}

export interface LegacyFeedbackBody {
  rating: number;
  category: string;
  feedback: string;
}

const nonEmpty = z.string().min(1);
const bounded = (max: number) => nonEmpty.max(max);
const prompt = bounded(LEGACY_LIMITS.maxPromptChars);
/** An integer field; the marker message keeps wrong-typed input reported as `int_type`. */
const int = () => z.int({ error: (iss) => (iss.code === 'invalid_type' ? INTEGER_EXPECTED : undefined) });

export const CLIP_KEYS = ['target_fps', 'sampling_ratio', 'fps', 'clip_length_seconds', 'delay_seconds'] as const;
export const FRAME_KEYS = ['interval_seconds'] as const;

export const clipProcessingSchema: z.ZodType<ClipProcessing, unknown> = z
  .strictObject({
    target_fps: int().min(1).max(30).nullish(),
    sampling_ratio: z.number().min(0.1).max(1).nullish(),
    fps: int().positive().max(LEGACY_LIMITS.maxSourceFps).nullish(),
    clip_length_seconds: z.number().min(0.1).max(60),
    delay_seconds: z.number().positive().max(LEGACY_LIMITS.maxDelaySeconds),
  })
  .superRefine((p, ctx) => {
    const hasTarget = p.target_fps != null;
    const hasFps = p.fps != null;
    const hasRatio = p.sampling_ratio != null;
    const fail = (message: string) => ctx.addIssue({ code: 'custom', message, params: { type: 'value_error' } });
    if (hasTarget && (hasFps || hasRatio)) {
      fail('target_fps cannot be combined with the deprecated fps/sampling_ratio pair; send only target_fps');
    } else if (hasFps && !hasRatio) {
      fail('fps requires sampling_ratio (target_fps = fps * sampling_ratio); prefer target_fps');
    } else if (hasRatio && !hasFps) {
      fail('sampling_ratio requires fps (target_fps = fps * sampling_ratio); prefer target_fps');
    }
  })
  .transform((p) => ({
    target_fps: p.target_fps ?? null,
    sampling_ratio: p.sampling_ratio ?? null,
    fps: p.fps ?? null,
    clip_length_seconds: p.clip_length_seconds,
    delay_seconds: p.delay_seconds,
  }));

export const frameProcessingSchema: z.ZodType<FrameProcessing, unknown> = z.strictObject({
  interval_seconds: z.number().positive().max(60),
});

/**
 * An output schema (`output_schema_json`, reinfer's `output_schema`): size and complexity caps,
 * checked before anything else looks at the schema; compiled later (../streams/stream-start.ts). A plain-object check
 * rather than z.record, which would copy every key of a huge schema before the caps could refuse it.
 */
export const outputSchema = z
  .custom<Record<string, unknown>>(isRecord, { message: 'Input should be a valid dictionary', params: { type: 'dict_type' } })
  .superRefine((schema, ctx) => {
    const over = schemaLimitViolation(schema, DEFAULT_SCHEMA_LIMITS);
    if (over) ctx.addIssue({ code: 'custom', message: `output_schema_json is too complex: ${over}`, params: { type: 'value_error' } });
  });

type Kind = LegacyMode | 'mixed' | 'unknown';

/** Which processing object was sent, judged by the keys that carry a value. */
export function detectProcessingKind(processing: Record<string, unknown>): Kind {
  const has = (keys: readonly string[]) => keys.some((k) => processing[k] !== undefined && processing[k] !== null);
  const clip = has(CLIP_KEYS);
  const frame = has(FRAME_KEYS);
  if (clip && frame) return 'mixed';
  if (clip) return 'clip';
  if (frame) return 'frame';
  return 'unknown';
}

/** Reserved legacy names the configured vendor token must not shadow. */
const RESERVED_VENDOR_TOKENS = ['webrtc', 'native', 'lease', 'stream_id', 'turn_servers'];

export function createLegacySchemas(brand: Brand) {
  if (RESERVED_VENDOR_TOKENS.includes(brand.room)) {
    throw new Error(`room vendor token "${brand.room}" collides with a legacy field or source type`);
  }

  const webrtcSource = z.strictObject({ type: z.literal('webrtc'), sdp: bounded(LEGACY_LIMITS.maxSdpChars) });
  const roomSource = z.strictObject({
    type: z.literal(brand.room),
    url: bounded(LEGACY_LIMITS.maxUrlChars),
    token: bounded(LEGACY_LIMITS.maxTokenChars),
  });
  const nativeSource = z.strictObject({ type: z.literal('native') });
  const source = z.discriminatedUnion('type', [webrtcSource, roomSource, nativeSource]).transform((s): LegacySource => {
    if ('sdp' in s) return { type: 'webrtc', sdp: s.sdp };
    if ('url' in s) return { type: 'room', url: s.url, token: s.token };
    return { type: 'native' };
  });

  const offer = z.strictObject({ type: z.literal('offer'), sdp: bounded(LEGACY_LIMITS.maxSdpChars) });

  /** `inference.backend`: the third-party backend or the brand's own, in the provider's order. */
  const backend = z.enum([...new Set([brand.thirdPartyBackend, brand.backend])] as [string, ...string[]]);
  const inference = z
    .strictObject({
      prompt,
      model: bounded(LEGACY_LIMITS.maxModelChars),
      backend: backend.default(brand.backend),
      output_schema_json: outputSchema.nullish(),
      max_output_tokens: int().positive().nullish(),
    })
    .transform((i): LegacyInference => ({
      prompt: i.prompt,
      model: i.model,
      backend: i.backend,
      output_schema_json: i.output_schema_json ?? null,
      max_output_tokens: i.max_output_tokens ?? null,
    }));

  const client = z.strictObject({ request_id: z.string().max(LEGACY_LIMITS.maxRequestIdChars).nullish() });

  /** Everything but the inside of `processing`, which needs the mode first. */
  const head = z.strictObject({
    source: source.nullish(),
    webrtc: offer.nullish(),
    mode: z.enum(['clip', 'frame']).nullish(),
    processing: z.looseObject({}),
    inference,
    client: client.nullish(),
  });

  /**
   * The create body. One pass reports the issues of the head and of `processing` together, so a
   * client fixing its body sees every problem at once.
   */
  const createStream = z.unknown().transform((body, ctx): LegacyCreateRequest => {
    const issues: z.core.$ZodIssue[] = [];
    const headResult = head.safeParse(body, { reportInput: true });
    if (!headResult.success) issues.push(...headResult.error.issues);

    const raw = isRecord(body) ? body : {};
    const rawMode = raw.mode === 'clip' || raw.mode === 'frame' ? raw.mode : null;
    let processing: { mode: 'clip'; value: ClipProcessing } | { mode: 'frame'; value: FrameProcessing } | null = null;

    if (isRecord(raw.processing)) {
      const kind = detectProcessingKind(raw.processing);
      let mode: LegacyMode | null = rawMode;
      const processingIssue = (message: string) =>
        issues.push({ code: 'custom', message, path: ['processing'], params: { type: 'value_error' } } as z.core.$ZodIssue);
      if (mode !== null && (kind === 'clip' || kind === 'frame') && kind !== mode) {
        processingIssue(`mode is '${mode}' but processing is a ${kind} configuration (${describeKeys(kind)})`);
        mode = null;
      } else if (mode === null && kind === 'mixed') {
        processingIssue(
          `processing mixes clip fields (${describeKeys('clip')}) and frame fields (${describeKeys('frame')}); send one configuration`,
        );
      } else if (mode === null && kind === 'unknown') {
        processingIssue(
          `cannot tell clip from frame processing: send clip fields (${describeKeys('clip')}) or frame fields (${describeKeys('frame')}), or set mode`,
        );
      } else {
        mode ??= kind as LegacyMode;
      }
      // The explicit mode check above only runs for a known mode; an invalid `mode` is reported by the head.
      if (mode === 'clip') {
        const r = clipProcessingSchema.safeParse(raw.processing, { reportInput: true });
        if (r.success) processing = { mode: 'clip', value: r.data };
        else issues.push(...prefix('processing', r.error.issues));
      } else if (mode === 'frame') {
        const r = frameProcessingSchema.safeParse(raw.processing, { reportInput: true });
        if (r.success) processing = { mode: 'frame', value: r.data };
        else issues.push(...prefix('processing', r.error.issues));
      }
    }

    if (raw.source != null && raw.webrtc != null) {
      issues.push({
        code: 'custom',
        message: 'send either source or the deprecated top-level webrtc offer, not both',
        path: ['webrtc'],
        params: { type: 'value_error' },
      } as z.core.$ZodIssue);
    }

    if (issues.length > 0 || !headResult.success || processing === null) {
      ctx.issues.push(...(issues as never[]));
      return z.NEVER;
    }
    const h = headResult.data;
    const common: LegacyCreateCommon = {
      source: h.source ?? null,
      webrtc: h.webrtc ?? null,
      inference: h.inference,
      client: h.client ? { request_id: h.client.request_id ?? null } : null,
    };
    return processing.mode === 'clip'
      ? { ...common, mode: 'clip', processing: processing.value }
      : { ...common, mode: 'frame', processing: processing.value };
  });

  const promptPatch: z.ZodType<LegacyPromptPatch, unknown> = z.strictObject({ prompt });

  const feedback: z.ZodType<LegacyFeedbackBody, unknown> = z.strictObject({
    rating: int().min(0).max(10),
    category: bounded(LEGACY_LIMITS.maxCategoryChars),
    feedback: z.string().max(LEGACY_LIMITS.maxFeedbackChars).default(''),
  });

  const reinfer: z.ZodType<LegacyReinferBody, unknown> = z
    .strictObject({
      result_id: bounded(LEGACY_LIMITS.maxResultIdChars),
      prompt,
      model: bounded(LEGACY_LIMITS.maxModelChars),
      temperature: z.number().min(0).max(LEGACY_LIMITS.maxTemperature).nullish(),
      max_tokens: int().positive().max(LEGACY_LIMITS.maxReinferTokens).nullish(),
      output_schema: outputSchema.nullish(),
    })
    .transform((b) => ({
      result_id: b.result_id,
      prompt: b.prompt,
      model: b.model,
      temperature: b.temperature ?? null,
      max_tokens: b.max_tokens ?? null,
      output_schema: b.output_schema ?? null,
    }));

  /**
   * The pieces of the create body, for the OpenAPI document (openapi.ts), which describes `processing`
   * as clip or frame where the router decides it by the mode first.
   */
  const parts = { webrtcSource, roomSource, nativeSource, source, offer, client, inference, backend };

  return { createStream, promptPatch, feedback, reinfer, source, inference, parts };
}

export type LegacySchemas = ReturnType<typeof createLegacySchemas>;

function describeKeys(kind: LegacyMode): string {
  return (kind === 'clip' ? CLIP_KEYS : FRAME_KEYS).join(', ');
}

function prefix(key: string, issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.map((i) => ({ ...i, path: [key, ...i.path] }));
}
