/**
 * Every error code the service emits, one per line, sorted: adding a code is adding one line here
 * and one row in docs/errors.md (test/lib/error-codes.unit.test.ts checks code, registry and page against
 * each other, both ways). `<name>` stands for a variable part, e.g. `upstream_http_<status>`.
 * The value says where the code is emitted; docs/errors.md says when and with which status.
 */
export const ERROR_CODES = {
  account_not_found: 'emulator control API',
  auth_rate_limited: '/v0.2',
  bad_request: 'framework 4xx (emulator, gateway); admin API',
  billing_denied: '/v1beta emulator',
  brownout: '/v0.2',
  client_closed_request: '/v0.2 (logs only)',
  clip_dropped: '/v0.2 (reinfer)',
  clip_evicted: '/v0.2 (reinfer)',
  concurrent_stream_limit: '/v0.2',
  feedback_limit_reached: '/v0.2',
  forbidden: '/v1beta emulator; /v0.2',
  frame_evicted: '/v1beta emulator',
  frame_not_yet_produced: '/v1beta emulator',
  insufficient_credits: '/v0.2',
  interface_retired: '/v0.2',
  internal_error: '/v0.2',
  invalid_api_key: '/v1beta emulator',
  invalid_body: '/v0.2',
  invalid_image: 'emulator control API',
  invalid_json: '/v1beta emulator',
  media_unavailable: '/v0.2 (room and relayed webrtc creates)',
  missing_api_key: '/v1beta emulator',
  model_not_found: '/v1beta emulator',
  model_unavailable: '/v1beta emulator; /v0.2',
  not_found: '/v1beta emulator; /v0.2',
  not_native_stream: '/v0.2 (spectate)',
  payload_too_large: '/v1beta emulator',
  query_param_invalid: '/v1beta emulator (provider dialect)',
  rate_limit_exceeded: '/v1beta emulator',
  region_error: '/v1beta emulator',
  request_aborted: 'framework (emulator, gateway)',
  result_not_found: '/v0.2 (reinfer)',
  revoked_api_key: '/v1beta emulator',
  room_bad_join_request: 'emulator media room',
  room_internal_error: 'emulator media room',
  room_not_found: 'emulator media room',
  room_server_closing: 'emulator media room',
  room_unauthorized: 'emulator media room',
  room_v1_publish_only: 'emulator media room',
  segment_empty: '/v1beta emulator (provider dialect)',
  segment_invalid: '/v1beta emulator (provider dialect)',
  shutting_down: '/v0.2',
  source_unreachable: '/v1beta emulator',
  store_unavailable: '/v0.2; admin API',
  stream_ended: '/v0.2 (media relays)',
  stream_not_found: '/v1beta emulator; /v0.2',
  stream_not_supported: 'gateway upstream client',
  unauthorized: '/v0.2; admin API',
  unsupported_encoding: 'framework (emulator, gateway)',
  unsupported_source: '/v0.2',
  upstream_circuit_open: 'gateway upstream client',
  upstream_client_closed: 'gateway upstream client',
  upstream_error: '/v0.2',
  'upstream_http_<status>': '/v1beta emulator; gateway upstream client',
  upstream_invalid_response: 'gateway upstream client',
  upstream_request_invalid: 'gateway upstream client',
  upstream_timeout: '/v0.2; gateway upstream client',
  upstream_unavailable: '/v0.2',
  upstream_unreachable: 'gateway upstream client',
  validation_error: '/v1beta emulator; /v0.2',
  whip_unsupported: '/v0.2 (webrtc create)',
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** True when `code` is registered, a `<name>` placeholder matching any `[a-z0-9]+` part. */
export function isRegisteredCode(code: string): boolean {
  return REGISTERED.some((re) => re.test(code));
}

const REGISTERED = Object.keys(ERROR_CODES).map((k) => new RegExp(`^${k.replace(/<[a-z]+>/g, '[a-z0-9]+')}$`));
