/**
 * The contract's resource shapes (spec/interface.md "Resources and their fields"), shared by the
 * emulator that produces them and the upstream client that consumes them, so the two sides cannot
 * drift apart.
 */

export type StreamState = 'active' | 'ended';
/** `reaped`: the provider's system cleanup (in the emulator: a stream idle past `emulator.reapIdleSeconds`). */
export type StreamEndReason = 'expired' | 'deleted' | 'reaped';

/** `GET /v1beta/streams/{id}`. Frame fields stay null until the first frame arrives. */
export interface Stream {
  id: string;
  state: StreamState;
  stream_time_ms: number;
  first_frame_at_ms: number | null;
  last_frame_at_ms: number | null;
  last_frame_index: number | null;
  first_available_frame_at_ms: number | null;
  first_available_frame_index: number | null;
  created_at_ms: number;
  recent_fps: number;
  retained_frame_count: number;
  evicted_frame_count: number;
  expires_at_ms: number | null;
  ttl_seconds: number;
  ended_at_ms: number | null;
  end_reason: StreamEndReason | null;
  audio: boolean;
}

export interface Balance {
  user_id: string;
  balance_microcents: number;
  balance_cents: number;
}

/** The Model pricing object. */
export interface ModelPricing {
  id: string;
  model: string;
  provider: string;
  version: string;
  input_microcents_per_token: number;
  output_microcents_per_token: number;
  cached_input_microcents_per_token: number;
  public: boolean;
}

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** Cost of one completion in microcents: input, cached input (never more than the input) and output. */
export function costMicrocents(
  pricing: Pick<ModelPricing, 'input_microcents_per_token' | 'output_microcents_per_token' | 'cached_input_microcents_per_token'>,
  usage: TokenUsage,
  cachedTokens = 0,
): number {
  const cached = Math.min(Math.max(0, cachedTokens), usage.prompt_tokens);
  return (
    (usage.prompt_tokens - cached) * pricing.input_microcents_per_token +
    cached * pricing.cached_input_microcents_per_token +
    usage.completion_tokens * pricing.output_microcents_per_token
  );
}
