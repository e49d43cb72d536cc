/**
 * Wire types of the /v1beta and /billing interface (spec/interface.md "Resources", and
 * spec/legacy-clients.md "/v1beta facts the contract leaves out").
 */

export type { Balance, ModelPricing, Stream, StreamEndReason, StreamState } from '../lib/wire';
import type { StreamState } from '../lib/wire';

export interface PublishInfo {
  /** The media-room vendor (`brandOf(cfg).room`). */
  type: string;
  /** wss:// address of the media room. */
  url: string;
  /** Short-lived publish token; a secret, never logged. */
  token: string;
}

export interface CreateStreamResponse {
  id: string;
  state: StreamState;
  publish: PublishInfo;
  expires_at_ms: number;
  ttl_seconds: number;
}

/** The contract names three fields; the others are optional and may be absent. */
export interface KeepaliveResponse {
  expires_at_ms: number;
  publish: Partial<PublishInfo> & { token: string };
  stream_time_ms: number;
  id?: string;
  state?: StreamState;
  ttl_seconds?: number;
  [extra: string]: unknown;
}

/** `POST /v1beta/streams/{id}/viewer-token`: a subscribe-only room token for watching the stream. */
export interface ViewerTokenResponse {
  view: { url: string; token: string; expires_in_seconds: number };
}

export interface DeleteStreamResult {
  id: string;
  deleted: true;
  /** True when the upstream answered 404: the stream had already ended and gone (delete is idempotent). */
  alreadyGone: boolean;
}

export type ContentPart =
  { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } } | { type: 'video_url'; video_url: { url: string } };

export interface ChatMessage {
  role: string;
  content: string | ContentPart[];
  [extra: string]: unknown;
}

export type ResponseFormat =
  { type: 'json_schema'; json_schema: { name: string; schema: object; strict?: boolean } } | { type: 'json_object' } | { type: 'text' };

/** Non-streaming chat-completion request. Unknown fields pass through unchanged. */
export interface ChatCompletionRequest {
  model: string;
  messages: ChatMessage[];
  max_completion_tokens?: number;
  max_tokens?: number;
  /** Streaming (SSE) completions are not served by this client; use the passthrough. */
  stream?: false;
  response_format?: ResponseFormat;
  /** Prompt-cache key, echoed in `<brand>.cache.thread_id`. */
  thread_id?: string;
  [extra: string]: unknown;
}

export interface ChatCompletionChoice {
  index: number;
  message: { role: string; content: string | null; tool_calls?: unknown[] };
  finish_reason: string | null;
}

export interface CacheInfo {
  thread_id: string | null;
  cache_hit: boolean;
  cached_input_tokens: number;
}

/** The cache details sit under a brand-named field (`svc` by default): read them with `cacheInfo`. */
export interface ChatCompletionResponse {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: ChatCompletionChoice[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  [brandField: string]: unknown;
}

export type ModelStatus = 'ready' | 'unavailable' | (string & {});

export interface ModelEntry {
  id: string;
  object: string;
  created: number;
  owned_by: string;
  status: ModelStatus;
}

export interface ModelList {
  object: string;
  data: ModelEntry[];
}
