/**
 * A `SessionSpec` as the /v1beta chat-completion request of one tick (pure): the visual reference
 * of the stream's window and the stream's prompt-cache thread.
 */
import type { Brand } from '../../brand';
import type { ChatCompletionRequest, ContentPart } from '../../upstream/types';
import type { SessionSpec } from './spec';

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
  const url = streamReference(spec, streamId, brand);
  const visual: ContentPart =
    spec.mode === 'clip' ? { type: 'video_url', video_url: { url } } : { type: 'image_url', image_url: { url } };
  return {
    model: opts.model ?? spec.model,
    messages: [{ role: 'user', content: [{ type: 'text', text: opts.prompt }, visual] }],
    max_completion_tokens: spec.maxOutputTokens,
    ...(spec.outputSchema
      ? { response_format: { type: 'json_schema' as const, json_schema: { name: 'output', schema: spec.outputSchema } } }
      : {}),
    thread_id: opts.threadId,
    stream: false,
  };
}
