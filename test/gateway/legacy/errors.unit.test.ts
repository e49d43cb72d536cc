import { LEGACY_ERRORS } from '../../../src/gateway/legacy/contract/errors';
import { ServiceError } from '../../../src/lib/errors';

// The status, code and text of every legacy error the adapter raises itself: clients branch on
// status and code, and some show the text.
describe('LEGACY_ERRORS', () => {
  it.each([
    ['shuttingDown', LEGACY_ERRORS.shuttingDown(), 503, 'shutting_down', 'The gateway is shutting down; retry on another instance'],
    ['noSuchStreamId', LEGACY_ERRORS.noSuchStreamId(), 404, 'stream_not_found', 'Stream not found'],
    ['streamNotFound', LEGACY_ERRORS.streamNotFound('s1'), 404, 'stream_not_found', 'Stream s1 not found'],
    ['streamEnded', LEGACY_ERRORS.streamEnded('s1'), 404, 'stream_not_found', 'Stream s1 has ended'],
    ['streamEnded + why', LEGACY_ERRORS.streamEnded('s1', 'lease_expired'), 404, 'stream_not_found', 'Stream s1 has ended (lease_expired)'],
    ['streamEndedUpstream', LEGACY_ERRORS.streamEndedUpstream('s1'), 404, 'stream_not_found', 'Stream s1 has ended upstream'],
    ['unauthorized', LEGACY_ERRORS.unauthorized(), 401, 'unauthorized', 'Invalid or revoked API key'],
    ['unauthorized + text', LEGACY_ERRORS.unauthorized('Invalid API key'), 401, 'unauthorized', 'Invalid API key'],
    ['insufficientCredits', LEGACY_ERRORS.insufficientCredits(), 402, 'insufficient_credits', 'Insufficient credits'],
    [
      'concurrentStreamLimit',
      LEGACY_ERRORS.concurrentStreamLimit(5),
      429,
      'concurrent_stream_limit',
      "Concurrent stream limit reached (5 per API key): a slot frees when one of this key's streams is deleted " +
        '(DELETE /v0.2/streams/{id}) or its lease lapses without a keepalive',
    ],
    [
      'clientClosedRequest',
      LEGACY_ERRORS.clientClosedRequest(),
      499,
      'client_closed_request',
      'The client closed the request before the stream was created',
    ],
    [
      'unsupportedSource',
      LEGACY_ERRORS.unsupportedSource('webrtc'),
      422,
      'unsupported_source',
      'Source webrtc is not available on this gateway',
    ],
    ['unknownModel', LEGACY_ERRORS.unknownModel('x/y'), 422, 'validation_error', 'Unknown model "x/y"'],
    ['modelUnavailable', LEGACY_ERRORS.modelUnavailable('x/y', 'unavailable'), 503, 'model_unavailable', 'Model x/y is unavailable'],
    [
      'resultNotFound',
      LEGACY_ERRORS.resultNotFound(),
      404,
      'result_not_found',
      "Result not found: no result with this id is known for this API key's account",
    ],
    [
      'clipDropped',
      LEGACY_ERRORS.clipDropped('client_requested'),
      410,
      'clip_dropped',
      'The stream of this result has ended (client_requested) and its frames were dropped; the result can no longer be re-run',
    ],
    [
      'clipDropped, no reason',
      LEGACY_ERRORS.clipDropped(null),
      410,
      'clip_dropped',
      'The stream of this result has ended and its frames were dropped; the result can no longer be re-run',
    ],
    [
      'clipEvicted',
      LEGACY_ERRORS.clipEvicted(),
      410,
      'clip_evicted',
      "The frames of this result were evicted from the stream's frame buffer; the result can no longer be re-run",
    ],
    [
      'modelSaturated',
      LEGACY_ERRORS.modelSaturated('x/y'),
      503,
      'model_unavailable',
      'Model x/y is saturated (at capacity) and takes no new streams; retry later or use another ready model',
    ],
    [
      'streamEndedDuringSetup',
      LEGACY_ERRORS.streamEndedDuringSetup(),
      503,
      'stream_ended',
      'The stream ended while its media was being set up',
    ],
    [
      'mediaUnavailable',
      LEGACY_ERRORS.mediaUnavailable(),
      503,
      'media_unavailable',
      "The gateway's media relay is not available right now; retry shortly",
    ],
    [
      'roomFailed',
      LEGACY_ERRORS.roomFailed(401),
      502,
      'upstream_error',
      "The service's media room could not take the stream's media (401); retry later",
    ],
    [
      'roomFailed, no status',
      LEGACY_ERRORS.roomFailed(null),
      502,
      'upstream_error',
      "The service's media room could not take the stream's media; retry later",
    ],
    [
      'roomTimeout',
      LEGACY_ERRORS.roomTimeout(),
      504,
      'upstream_timeout',
      "The service's media room did not answer the offer in time; retry later",
    ],
    [
      'roomUnreachable',
      LEGACY_ERRORS.roomUnreachable(),
      502,
      'upstream_unreachable',
      "The service's media room could not be reached; retry later",
    ],
    [
      'whipUnsupported',
      LEGACY_ERRORS.whipUnsupported(405),
      502,
      'whip_unsupported',
      'The service\'s media room does not accept WHIP publishers (405 at its /whip/v1); the gateway must run with legacy.webrtc.mode "relay" (LEGACY_WEBRTC_MODE=relay) for this room',
    ],
  ])('%s → %i %s', (_name, err, status, code, message) => {
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ status, code, message, shape: 'legacy' });
  });

  it('every factory is in the table above', () => expect(Object.keys(LEGACY_ERRORS)).toHaveLength(22));

  it("media_unavailable's retry-after: whole seconds, at least 1", () => {
    const after = (s?: number) => (s === undefined ? LEGACY_ERRORS.mediaUnavailable() : LEGACY_ERRORS.mediaUnavailable(s)).options.headers;
    expect([after(), after(0), after(0.2), after(59.1)]).toEqual([
      { 'retry-after': '1' },
      { 'retry-after': '1' },
      { 'retry-after': '1' },
      { 'retry-after': '60' },
    ]);
  });

  it('details: the limit, the saturated status, the model field', () => {
    expect(LEGACY_ERRORS.concurrentStreamLimit(5).options.details).toEqual({ limit: 5 });
    const hinted = LEGACY_ERRORS.concurrentStreamLimit(5, 12);
    expect(hinted.options.details).toEqual({ limit: 5, lease_lapses_in_seconds: 12 });
    expect(hinted.options.headers).toEqual({ 'retry-after': '12' });
    expect(hinted.message).toMatch(/\(the soonest in 12 s\)$/);
    expect(LEGACY_ERRORS.modelSaturated('m').options.details).toEqual({ status: 'saturated' });
    expect(LEGACY_ERRORS.unknownModel('m').options.details).toEqual([
      { loc: ['body', 'inference', 'model'], msg: 'Unknown model "m"', type: 'value_error' },
    ]);
    expect(LEGACY_ERRORS.unknownModel('m', ['body', 'model']).options.details).toEqual([
      { loc: ['body', 'model'], msg: 'Unknown model "m"', type: 'value_error' },
    ]);
    expect(LEGACY_ERRORS.clipDropped(null).options.details).toEqual({ reason: 'stream_ended' });
    expect(LEGACY_ERRORS.clipEvicted().options.details).toEqual({ reason: 'window_evicted' });
  });
});
