/**
 * Every legacy error the adapter raises from its own state or a /v1beta fact, with the status,
 * code and text legacy clients see (spec/legacy-clients.md; codes in docs/errors.md). Upstream
 * failures map in ./upstream-errors.ts, request validation in ./validate.ts.
 */
import { ServiceError } from '../../../lib/errors';
import { legacyError } from './validate';

const unknownModelText = (id: string) => `Unknown model ${JSON.stringify(id)}`;

export const LEGACY_ERRORS = {
  /** Shutdown began: retryable on another replica. */
  shuttingDown: (): ServiceError => legacyError(503, 'shutting_down', 'The gateway is shutting down; retry on another instance'),
  /** A malformed stream id in the path (never looked up). */
  noSuchStreamId: (): ServiceError => legacyError(404, 'stream_not_found', 'Stream not found'),
  streamNotFound: (streamId: string): ServiceError => legacyError(404, 'stream_not_found', `Stream ${streamId} not found`),
  /** A tombstone: the stream ended (`why`: its end reason, when shown). */
  streamEnded: (streamId: string, why?: string): ServiceError =>
    legacyError(404, 'stream_not_found', why === undefined ? `Stream ${streamId} has ended` : `Stream ${streamId} has ended (${why})`),
  /** The upstream no longer knows the stream (its keepalive answered 404). */
  streamEndedUpstream: (streamId: string): ServiceError => legacyError(404, 'stream_not_found', `Stream ${streamId} has ended upstream`),
  unauthorized: (message = 'Invalid or revoked API key'): ServiceError => legacyError(401, 'unauthorized', message),
  /** The balance read at keepalive is zero or below. */
  insufficientCredits: (): ServiceError => legacyError(402, 'insufficient_credits', 'Insufficient credits'),
  /**
   * `freesInSeconds`: when the soonest lease of the key's streams lapses if no keepalive renews it
   * (a crashed client's streams free their slots then); a keepalive postpones it, so it is when to
   * try again, not a promise.
   */
  concurrentStreamLimit: (limit: number, freesInSeconds?: number): ServiceError =>
    new ServiceError(
      429,
      'concurrent_stream_limit',
      `Concurrent stream limit reached (${limit} per API key): a slot frees when one of this key's streams is deleted ` +
        '(DELETE /v0.2/streams/{id}) or its lease lapses without a keepalive' +
        (freesInSeconds === undefined ? '' : ` (the soonest in ${freesInSeconds} s)`),
      {
        shape: 'legacy',
        details: { limit, ...(freesInSeconds === undefined ? {} : { lease_lapses_in_seconds: freesInSeconds }) },
        ...(freesInSeconds === undefined ? {} : { headers: { 'retry-after': String(freesInSeconds) } }),
      },
    ),
  clientClosedRequest: (): ServiceError =>
    legacyError(499, 'client_closed_request', 'The client closed the request before the stream was created'),
  unsupportedSource: (transport: string): ServiceError =>
    legacyError(422, 'unsupported_source', `Source ${transport} is not available on this gateway`),
  /** The stream ended (a DELETE, a shutdown) while its media was being set up. */
  streamEndedDuringSetup: (): ServiceError => legacyError(503, 'stream_ended', 'The stream ended while its media was being set up'),
  /** The replica's media worker is down (restarting, or failed for good): retryable, on this replica or another. */
  mediaUnavailable: (retryAfterSeconds = 1): ServiceError =>
    new ServiceError(503, 'media_unavailable', "The gateway's media relay is not available right now; retry shortly", {
      shape: 'legacy',
      details: null,
      headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    }),
  /** The upstream's media room refused the service's publish token or failed: not the client's business (502, retried). */
  roomFailed: (status: number | null): ServiceError =>
    legacyError(
      502,
      'upstream_error',
      `The service's media room could not take the stream's media${status === null ? '' : ` (${status})`}; retry later`,
    ),
  roomTimeout: (): ServiceError =>
    legacyError(504, 'upstream_timeout', "The service's media room did not answer the offer in time; retry later"),
  roomUnreachable: (): ServiceError =>
    legacyError(502, 'upstream_unreachable', "The service's media room could not be reached; retry later"),
  /** The upstream's room has no WHIP endpoint (404/405/501): the operator's setting, named for them. */
  whipUnsupported: (status: number): ServiceError =>
    legacyError(
      502,
      'whip_unsupported',
      `The service's media room does not accept WHIP publishers (${status} at its /whip/v1); ` +
        'the gateway must run with legacy.webrtc.mode "relay" (LEGACY_WEBRTC_MODE=relay) for this room',
    ),
  /** The /v1beta model list does not name it (`loc`: where the body names the model). */
  unknownModel: (id: string, loc: readonly string[] = ['body', 'inference', 'model']): ServiceError =>
    legacyError(422, 'validation_error', unknownModelText(id), [{ loc: [...loc], msg: unknownModelText(id), type: 'value_error' }]),
  /** The /v1beta model status is not `ready`. */
  modelUnavailable: (id: string, status: string): ServiceError =>
    new ServiceError(503, 'model_unavailable', `Model ${id} is ${status}`, {
      shape: 'legacy',
      details: null,
      log: { model: id, modelStatus: status },
    }),
  /** Ready upstream, but the gateway observed it saturated. */
  modelSaturated: (id: string): ServiceError =>
    new ServiceError(
      503,
      'model_unavailable',
      `Model ${id} is saturated (at capacity) and takes no new streams; retry later or use another ready model`,
      { shape: 'legacy', details: { status: 'saturated' }, log: { model: id, modelStatus: 'saturated' } },
    ),
  /**
   * Reinfer of a result id this account has no window for: never delivered, expired
   * (`legacy.resultWindowSeconds`), not yet recorded (clients retry a 404), or another account's
   * (the same answer, so it does not show that the result exists).
   */
  resultNotFound: (): ServiceError =>
    legacyError(404, 'result_not_found', "Result not found: no result with this id is known for this API key's account"),
  /** Reinfer of a result whose stream ended: the upstream dropped its frames, so it never comes back (410: not retried). */
  clipDropped: (why: string | null): ServiceError =>
    legacyError(
      410,
      'clip_dropped',
      `The stream of this result has ended${why ? ` (${why})` : ''} and its frames were dropped; the result can no longer be re-run`,
      { reason: 'stream_ended' },
    ),
  /** Reinfer of a result whose frames aged out of the upstream's frame buffer (410: not retried). */
  clipEvicted: (): ServiceError =>
    legacyError(
      410,
      'clip_evicted',
      "The frames of this result were evicted from the stream's frame buffer; the result can no longer be re-run",
      {
        reason: 'window_evicted',
      },
    ),
} as const;
