/**
 * The checks of the conformance kit: what each one verifies and the provider doc page
 * (`Overshoot-ai/docs`, `api-reference/…`) it comes from. Data only, so the CLI can name them.
 */

export interface CheckInfo {
  /** What the gateway relies on, in a few words (the report's title column). */
  title: string;
  /** The provider's doc page under `api-reference/`. */
  doc: string;
}

export const CHECKS = {
  'key.prefix': { title: 'the key carries the configured key prefix (the gateway refuses other legacy keys)', doc: 'authentication.mdx' },
  'key.wrong': { title: 'a wrong key gets 401 on balance and stream reads, in a body the gateway parses', doc: 'authentication.mdx' },
  'models.list': { title: 'model list {object, data:[{id, status}]}; statuses known; the model is ready', doc: 'list-models.mdx' },
  'pricing.list': { title: 'GET /billing/pricing lists pricing objects without a key', doc: 'list-pricing.mdx' },
  'pricing.model': { title: "the model's pricing: integer microcents per token", doc: 'get-pricing.mdx' },
  balance: { title: 'balance {user_id, balance_microcents, balance_cents} (how the gateway checks a legacy key)', doc: 'get-balance.mdx' },
  'stream.create': {
    title: 'create {id, state: active, publish {type, url, token}, expires_at_ms, ttl_seconds}',
    doc: 'create-stream.mdx',
  },
  'stream.read': { title: 'stream read: lease fields, and the frame fields the gateway polls', doc: 'get-stream.mdx' },
  'region.echo': { title: 'the serving region comes back in the region header', doc: 'regions.mdx' },
  'region.wrong': { title: 'the other region gets 409 region_error; the right one 200', doc: 'regions.mdx' },
  'stream.keepalive': { title: 'keepalive: new expires_at_ms, fresh publish.token, stream_time_ms', doc: 'keepalive-stream.mdx' },
  'viewer-token': { title: 'viewer token {view: {url, token, expires_in_seconds}}', doc: 'viewer-token.mdx' },
  'room.whip': {
    title: 'the room takes a WHIP publisher (webrtc legacy streams): POST <publish url>/whip/v1 → answer with candidates; DELETE ends it',
    doc: 'create-stream.mdx',
  },
  'frames.first': { title: 'first frame: last_frame_at_ms turns non-null, with index and stream clock', doc: 'stream-lifecycle.mdx' },
  'completion.clip': {
    title: 'clip reference (start_offset_ms<0, max_fps) answers; completion shape and usage',
    doc: 'chat-completions.mdx',
  },
  'completion.frame': { title: 'frame reference (frame_index=-1) answers; completion shape and usage', doc: 'stream-media-urls.mdx' },
  'prompt-cache': { title: 'thread_id echoed in <brand>.cache {thread_id, cache_hit, cached_input_tokens}', doc: 'prompt-cache.mdx' },
  'completion.sse': { title: 'stream: true → text/event-stream, data: chunks, data: [DONE]', doc: 'chat-completions.mdx' },
  'reference.future-frame': {
    title: 'a future frame_index fails with frame_not_yet_produced (nested error shape)',
    doc: 'chat-completions.mdx',
  },
  'reference.repeated-key': {
    title: 'a repeated query key is refused before inference: 422 validation_error (contract) or 400 query_param_invalid (provider)',
    doc: 'errors.mdx',
  },
  'errors.stream-not-found': { title: 'a completion on an unknown stream: 404 stream_not_found (nested error shape)', doc: 'errors.mdx' },
  'errors.read-not-found': {
    title: 'reading an unknown stream: 404 in a body the gateway parses ({detail: string} or nested)',
    doc: 'errors.mdx',
  },
  'stream.delete': { title: 'delete: 200 {id, deleted: true}', doc: 'delete-stream.mdx' },
  'stream.after-delete': { title: 'after delete: keepalive 404, read ended/deleted or 404, completions 404', doc: 'stream-lifecycle.mdx' },
} as const satisfies Record<string, CheckInfo>;

export type CheckId = keyof typeof CHECKS;

export const CHECK_IDS = Object.keys(CHECKS) as CheckId[];

export function isCheckId(id: string): id is CheckId {
  return Object.hasOwn(CHECKS, id);
}
