/**
 * A `StreamSpec` as the /v1beta chat-completion request of one tick (pure): the visual reference
 * of the stream's window and the stream's prompt-cache thread; and a delivered result's window as
 * the request of a reinfer.
 */
import type { Brand } from '../../../brand';
import type { ChatCompletionRequest, ContentPart } from '../../../upstream/types';
import type { LegacyMode } from './schema';
import type { StreamSpec } from './spec';
import { formatNumber } from './spec';

/** The prompt-cache thread of a legacy stream: one per stream, so its ticks share a cache. */
export const legacyThreadId = (streamId: string): string => `legacy-${streamId}`;

/** The visual reference one tick asks about: the last clip window, or the newest frame. */
export function streamReference(spec: StreamSpec, streamId: string, brand: Brand): string {
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
  spec: StreamSpec,
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

// ── Reinfer: a delivered result's window → one /v1beta chat completion ──

/** The frames behind a delivered result on its stream's clock (what the store keeps for reinfer). */
export interface StreamWindow {
  streamId: string;
  mode: 'clip' | 'frame';
  startMs: number;
  endMs: number;
  maxFps: number;
}

/**
 * The reference of a result's frames on the stream clock: a clip as a segment between two
 * `*_timestamp_ms` anchors at its `max_fps`; a frame as the last frame at or before its time
 * (`direction=backward`, what `frame_index=-1` took then), however old.
 */
export function windowReference(w: StreamWindow, brand: Brand): string {
  const base = `${brand.scheme}://streams/${encodeURIComponent(w.streamId)}`;
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
  brand: Brand,
  opts: { prompt: string; model: string; maxTokens: number; temperature: number | null; outputSchema: Record<string, unknown> | null },
): ChatCompletionRequest {
  return {
    model: opts.model,
    messages: promptAbout(opts.prompt, w.mode, windowReference(w, brand)),
    max_completion_tokens: opts.maxTokens,
    ...(opts.temperature === null ? {} : { temperature: opts.temperature }),
    ...outputFormat(opts.outputSchema),
    stream: false,
  };
}
