import { brandOf } from '../../../src/brand';
import { ServiceError, type ValidationDetail } from '../../../src/lib/errors';
import { createLegacySchemas } from '../../../src/gateway/legacy/contract/schema';
import { legacyErrorRequestId, parseLegacy } from '../../../src/gateway/legacy/contract/validate';
import {
  buildCompletionRequest,
  buildReinferRequest,
  legacyThreadId,
  windowReference,
} from '../../../src/gateway/legacy/contract/upstream-request';
import {
  checkTokenRate,
  defaultMaxOutputTokens,
  normalizeCreate,
  targetFpsFromLegacyPair,
  type StreamSpec,
} from '../../../src/gateway/legacy/contract/spec';
import { legacyEndReasons, transportLostReason, LEGACY_CLOSES, endClose, tryLaterClose } from '../../../src/gateway/legacy/contract/closes';
import {
  legacyStreamState,
  microcentsToCents,
  toLegacyCreateResponse,
  toLegacyFeedback,
  toLegacyKeepalive,
  toLegacyModels,
  toLegacyPromptResponse,
  toLegacyResult,
  toLegacyReinfer,
  legacyRoomToken,
} from '../../../src/gateway/legacy/contract/responses';

const svc = brandOf({ brand: 'svc', roomVendor: 'room' });
const acme = brandOf({ brand: 'acme', roomVendor: 'lk' });
const limits = { maxTokensPerSecond: 128 };
const STREAM = '3f0c4f5e-7b1a-4c1e-9a55-0d9f2b7c1a01';
const inference = { prompt: 'What is happening?', model: 'acme/vision-1' };

function spec(body: unknown, brand = svc, fallback: string | null = null): StreamSpec {
  const parsed = parseLegacy(createLegacySchemas(brand).createStream, body, 'gen');
  return normalizeCreate(parsed, limits, fallback);
}

function rejection(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    return err as ServiceError;
  }
  throw new Error('expected a rejection');
}

describe('normalizeCreate', () => {
  it('deprecated offer + fps/sampling_ratio → webrtc clip spec with target_fps = floor(fps * ratio)', () => {
    const s = spec({
      webrtc: { type: 'offer', sdp: 'v=0' },
      processing: { sampling_ratio: 0.1, fps: 30, clip_length_seconds: 1, delay_seconds: 1 },
      inference: { ...inference, backend: 'svc' },
    });
    expect(s).toEqual({
      transport: 'webrtc',
      source: { transport: 'webrtc', sdp: 'v=0' },
      mode: 'clip',
      clip: { targetFps: 3, clipLengthMs: 1000, delayMs: 1000 },
      intervalMs: 1000,
      prompt: inference.prompt,
      model: inference.model,
      backend: 'svc',
      outputSchema: null,
      maxOutputTokens: 128,
      deprecatedFields: ['webrtc', 'sampling_ratio', 'fps'],
      requestId: null,
    });
  });

  it.each([
    [30, 0.1, 3],
    [15, 0.5, 7],
    [100, 0.29, 29], // 28.999999999999996 in floating point
    [5, 0.1, 1], // floor(0.5) = 0 → at least 1
    [1, 0.1, 1],
    [60, 1, 30], // capped at the legacy target_fps maximum
  ])('fps %s × sampling_ratio %s → target_fps %s', (fps, ratio, expected) => {
    expect(targetFpsFromLegacyPair(fps, ratio)).toBe(expected);
    const s = spec({ processing: { fps, sampling_ratio: ratio, clip_length_seconds: 2, delay_seconds: 2 }, inference });
    expect(s.mode === 'clip' && s.clip.targetFps).toBe(expected);
  });

  it('clip without target_fps or the legacy pair defaults to 1 fps', () => {
    const s = spec({ processing: { clip_length_seconds: 2.5, delay_seconds: 0.75 }, inference });
    expect(s.mode === 'clip' && s.clip).toEqual({ targetFps: 1, clipLengthMs: 2500, delayMs: 750 });
    expect(s.intervalMs).toBe(750);
    expect(s.deprecatedFields).toEqual([]);
  });

  it('transports: native (omitted / explicit), webrtc source, customer room', () => {
    const clip = { processing: { target_fps: 5, clip_length_seconds: 1, delay_seconds: 1 }, inference };
    expect(spec(clip).source).toEqual({ transport: 'native' });
    expect(spec({ ...clip, source: { type: 'native' } }).transport).toBe('native');
    expect(spec({ ...clip, source: { type: 'webrtc', sdp: 'o' } }).source).toEqual({ transport: 'webrtc', sdp: 'o' });
    const room = spec({ ...clip, source: { type: 'room', url: 'wss://r', token: 't' } });
    expect(room.transport).toBe('room');
    expect(room.source).toEqual({ transport: 'room', url: 'wss://r', token: 't' });
    expect(room.deprecatedFields).toEqual([]);
  });

  it('frame mode: interval, output schema, request id from client (else the fallback)', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } } };
    const body = {
      mode: 'frame',
      processing: { interval_seconds: 2 },
      inference: { ...inference, output_schema_json: schema, max_output_tokens: 200, backend: 'thirdparty' },
      client: { request_id: 'client-7' },
    };
    const s = spec(body);
    expect(s.mode).toBe('frame');
    expect(s.mode === 'frame' && s.frame).toEqual({ intervalMs: 2000 });
    expect(s).toMatchObject({ intervalMs: 2000, outputSchema: schema, maxOutputTokens: 200, backend: 'thirdparty', requestId: 'client-7' });
    expect(spec({ ...body, client: null }, svc, 'fallback-1').requestId).toBe('fallback-1');
  });

  it.each([
    [0.5, 64],
    [1, 128],
    [2.5, 320],
    [0.3, 38],
    [0.001, 1], // floor(0.128) = 0 → at least 1 … which the rate rule then rejects (below)
  ])('default max_output_tokens for a %ss interval is %s', (interval, expected) => {
    expect(defaultMaxOutputTokens(interval, 128)).toBe(expected);
  });
  it.each([
    [0.5, 64],
    [1, 128],
    [2.5, 320],
  ])('a %ss frame interval without max_output_tokens gets %s tokens', (interval, expected) => {
    expect(spec({ processing: { interval_seconds: interval }, inference }).maxOutputTokens).toBe(expected);
    expect(spec({ processing: { clip_length_seconds: 1, delay_seconds: interval }, inference }).maxOutputTokens).toBe(expected);
  });
  it('the default follows the configured limit', () => {
    expect(defaultMaxOutputTokens(2, 50)).toBe(100);
  });

  it('token rate over the limit → 422 with the exact legacy message (spec example: 300 tokens / 2 s)', () => {
    const body = { processing: { interval_seconds: 2 }, inference: { ...inference, max_output_tokens: 300 } };
    const err = rejection(() => spec(body));
    const message =
      'Effective output token rate (150.0 tok/s) exceeds maximum of 128 tok/s. ' +
      'max_output_tokens (300) / interval (2s) must be <= 128. Reduce max_output_tokens to at most 256. ' +
      'Send "max_output_tokens": 256 (or omit it: the default for this interval is 256), or keep 300 with "interval_seconds": 2.344 or more.';
    expect(err.status).toBe(422);
    expect(err.message).toBe(message);
    expect(legacyErrorRequestId(err, 'other')).toBe('other');
    expect(err.toLegacyBody('r')).toEqual({
      error: 'validation_error',
      message,
      request_id: 'r',
      details: [{ loc: ['body', 'inference', 'max_output_tokens'], msg: message, type: 'value_error' }],
    });
  });

  it.each([
    [
      200,
      0.5,
      'Effective output token rate (400.0 tok/s) exceeds maximum of 128 tok/s. max_output_tokens (200) / interval (0.5s) must be <= 128. Reduce max_output_tokens to at most 64.',
    ],
    [
      193,
      1.5,
      'Effective output token rate (128.7 tok/s) exceeds maximum of 128 tok/s. max_output_tokens (193) / interval (1.5s) must be <= 128. Reduce max_output_tokens to at most 192.',
    ],
    [
      129,
      1,
      'Effective output token rate (129.0 tok/s) exceeds maximum of 128 tok/s. max_output_tokens (129) / interval (1s) must be <= 128. Reduce max_output_tokens to at most 128.',
    ],
  ])('%s tokens every %ss → exact message', (tokens, interval, message) => {
    expect(() => checkTokenRate(tokens, interval, 128)).toThrow(message);
  });

  it('accepts exactly the limit (also with float-noisy intervals), and clip uses delay_seconds', () => {
    expect(() => checkTokenRate(256, 2, 128)).not.toThrow();
    expect(() => checkTokenRate(3, 0.3, 10)).not.toThrow();
    expect(() => checkTokenRate(192, 1.5, 128)).not.toThrow();
    const clip = {
      processing: { target_fps: 1, clip_length_seconds: 10, delay_seconds: 3 },
      inference: { ...inference, max_output_tokens: 384 },
    };
    expect(spec(clip).maxOutputTokens).toBe(384);
    const over = { ...clip, inference: { ...inference, max_output_tokens: 385 } };
    expect(rejection(() => spec(over)).message).toMatch(
      /interval \(3s\) must be <= 128\. Reduce max_output_tokens to at most 384\. .* or keep 385 with "delay_seconds": 3\.008 or more\.$/,
    );
  });

  it('an interval too short for even one token names the interval, not a max_output_tokens the client never sent', () => {
    const err = rejection(() => spec({ processing: { interval_seconds: 0.005 }, inference }));
    const message =
      'interval_seconds (0.005s) is too short: at the maximum of 128 tok/s not even one output token fits in it. Send "interval_seconds": 0.008 or more.';
    expect(err.message).toBe(message);
    expect(err.message).not.toMatch(/max_output_tokens/);
    expect(err.toLegacyBody('r')).toMatchObject({ details: [{ loc: ['body', 'processing', 'interval_seconds'], type: 'value_error' }] });
    const clip = rejection(() => spec({ processing: { target_fps: 1, clip_length_seconds: 1, delay_seconds: 0.001 }, inference }));
    expect(clip.message).toMatch(/^delay_seconds \(0\.001s\) is too short: .* Send "delay_seconds": 0\.008 or more\.$/);
  });

  it('legacy-clients.md frame body at 400 tok/s keeps its 422 and is told exactly what to send', () => {
    const body = {
      mode: 'frame',
      processing: { interval_seconds: 0.5 },
      inference: { ...inference, output_schema_json: { type: 'object' }, max_output_tokens: 200 },
    };
    const err = rejection(() => spec(body));
    expect(err.status).toBe(422);
    expect(err.message).toBe(
      'Effective output token rate (400.0 tok/s) exceeds maximum of 128 tok/s. max_output_tokens (200) / interval (0.5s) must be <= 128. ' +
        'Reduce max_output_tokens to at most 64. Send "max_output_tokens": 64 (or omit it: the default for this interval is 64), ' +
        'or keep 200 with "interval_seconds": 1.563 or more.',
    );
    // Both suggestions pass.
    expect(spec({ ...body, inference: { ...body.inference, max_output_tokens: 64 } }).maxOutputTokens).toBe(64);
    expect(spec({ ...body, inference: { ...inference, output_schema_json: { type: 'object' } } }).maxOutputTokens).toBe(64);
    expect(spec({ ...body, processing: { interval_seconds: 1.563 } }).maxOutputTokens).toBe(200);
  });

  it('the rejection carries the request id (client id, else the fallback)', () => {
    const body = { processing: { interval_seconds: 1 }, inference: { ...inference, max_output_tokens: 500 } };
    expect(
      legacyErrorRequestId(
        rejection(() => spec(body, svc, 'gen-5')),
        null,
      ),
    ).toBe('gen-5');
    const withClient = { ...body, client: { request_id: 'mine' } };
    expect(
      legacyErrorRequestId(
        rejection(() => spec(withClient, svc, 'gen-5')),
        null,
      ),
    ).toBe('mine');
  });

  it('a configured limit shows in the message', () => {
    expect(() => checkTokenRate(100, 2, 40)).toThrow(
      'Effective output token rate (50.0 tok/s) exceeds maximum of 40 tok/s. max_output_tokens (100) / interval (2s) must be <= 40. Reduce max_output_tokens to at most 80.',
    );
  });
});

describe('buildCompletionRequest', () => {
  const clipSpec = spec({ processing: { target_fps: 4, clip_length_seconds: 2.5, delay_seconds: 2 }, inference });
  const frameSpec = spec({
    processing: { interval_seconds: 1 },
    inference: { ...inference, output_schema_json: { type: 'object' }, max_output_tokens: 50 },
  });

  it('clip → video_url over the last clip window at target_fps', () => {
    expect(buildCompletionRequest(clipSpec, STREAM, svc, { threadId: 'th-1', prompt: 'patched prompt' })).toEqual({
      model: 'acme/vision-1',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'patched prompt' },
            { type: 'video_url', video_url: { url: `svc://streams/${STREAM}?start_offset_ms=-2500&max_fps=4` } },
          ],
        },
      ],
      max_completion_tokens: 256,
      thread_id: 'th-1',
      stream: false,
    });
  });

  it('frame → image_url of the newest frame, with response_format for the output schema', () => {
    expect(buildCompletionRequest(frameSpec, STREAM, svc, { threadId: 'th-2', prompt: 'p', model: 'acme/fallback' })).toEqual({
      model: 'acme/fallback',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'p' },
            { type: 'image_url', image_url: { url: `svc://streams/${STREAM}?frame_index=-1` } },
          ],
        },
      ],
      max_completion_tokens: 50,
      response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } },
      thread_id: 'th-2',
      stream: false,
    });
  });

  it('the reference scheme follows the brand', () => {
    const req = buildCompletionRequest(frameSpec, STREAM, acme, { threadId: 't', prompt: 'p' });
    const part = req.messages[0].content[1];
    expect(part).toEqual({ type: 'image_url', image_url: { url: `acme://streams/${STREAM}?frame_index=-1` } });
  });
});

describe('reinfer: a result window → completion, completion → legacy body', () => {
  it('a clip is a segment between stream-clock anchors at its fps; a frame the last frame at or before its time', () => {
    expect(windowReference({ streamId: STREAM, mode: 'clip', startMs: 1499.6, endMs: 2500.4, maxFps: 2 }, svc)).toBe(
      `svc://streams/${STREAM}?start_timestamp_ms=1500&end_timestamp_ms=2500&max_fps=2`,
    );
    expect(windowReference({ streamId: STREAM, mode: 'frame', startMs: 900, endMs: 900, maxFps: 0 }, acme)).toBe(
      `acme://streams/${STREAM}?timestamp_ms=900&direction=backward&tolerance_ms=901`,
    );
    // Never a negative anchor, never an end before the start.
    expect(windowReference({ streamId: STREAM, mode: 'clip', startMs: -300, endMs: -5, maxFps: 0.5 }, svc)).toBe(
      `svc://streams/${STREAM}?start_timestamp_ms=0&end_timestamp_ms=0&max_fps=0.5`,
    );
  });

  it("the request: the new prompt on the window, the caller's schema, cap and temperature", () => {
    const req = buildReinferRequest({ streamId: STREAM, mode: 'frame', startMs: 10, endMs: 10, maxFps: 0 }, svc, {
      prompt: 'again',
      model: 'acme/vision-1',
      maxTokens: 99,
      temperature: 0.3,
      outputSchema: { type: 'object' },
    });
    expect(req).toEqual({
      model: 'acme/vision-1',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'again' },
            { type: 'image_url', image_url: { url: `svc://streams/${STREAM}?timestamp_ms=10&direction=backward&tolerance_ms=11` } },
          ],
        },
      ],
      max_completion_tokens: 99,
      temperature: 0.3,
      response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } },
      stream: false,
    });
    const plain = buildReinferRequest({ streamId: STREAM, mode: 'clip', startMs: 0, endMs: 500, maxFps: 6 }, svc, {
      prompt: 'p',
      model: 'm',
      maxTokens: 5,
      temperature: null,
      outputSchema: null,
    });
    expect(Object.keys(plain).sort()).toEqual(['max_completion_tokens', 'messages', 'model', 'stream']);
  });

  it('the response: {id, model, content, finish_reason, usage}, defensive about the upstream', () => {
    const completion = {
      model: 'acme/vision-1',
      choices: [{ message: { content: 'hi' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    };
    expect(toLegacyReinfer({ id: 'n1', completion, modelName: 'x' })).toEqual({
      id: 'n1',
      model: 'acme/vision-1',
      content: 'hi',
      finish_reason: 'stop',
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    });
    expect(toLegacyReinfer({ id: 'n2', completion: { choices: null }, modelName: 'x' })).toEqual({
      id: 'n2',
      model: 'x',
      content: '',
      finish_reason: null,
      usage: null,
    });
  });
});

describe('toLegacyResult', () => {
  const RESULT_KEYS = [
    'error',
    'finish_reason',
    'id',
    'inference_latency_ms',
    'mode',
    'model_backend',
    'model_name',
    'ok',
    'prompt',
    'result',
    'stream_id',
    'total_latency_ms',
  ];
  const s = { mode: 'frame' as const, backend: 'svc', model: 'acme/vision-1' };

  it('success: the answer text, the model that answered, exactly the legacy keys', () => {
    const msg = toLegacyResult({
      id: 'res-1',
      streamId: STREAM,
      spec: s,
      prompt: 'Count people',
      completion: {
        model: 'acme/vision-1-mini',
        choices: [{ message: { content: '{"people":2}' }, finish_reason: 'stop' }],
      },
      modelName: 'acme/vision-1-mini',
      inferenceLatencyMs: 412.6,
      totalLatencyMs: 530.2,
    });
    expect(Object.keys(msg).sort()).toEqual(RESULT_KEYS);
    expect(msg).toEqual({
      id: 'res-1',
      stream_id: STREAM,
      mode: 'frame',
      model_backend: 'svc',
      model_name: 'acme/vision-1-mini',
      prompt: 'Count people',
      result: '{"people":2}',
      inference_latency_ms: 413,
      total_latency_ms: 530,
      ok: true,
      error: null,
      finish_reason: 'stop',
    });
  });

  it('failure: ok false, error text, empty result, the model tried', () => {
    const msg = toLegacyResult({
      id: 'res-2',
      streamId: STREAM,
      spec: s,
      prompt: 'p',
      error: 'model_unavailable: replica failed',
      modelName: 'acme/fallback',
      inferenceLatencyMs: 10,
      totalLatencyMs: 12,
    });
    expect(Object.keys(msg).sort()).toEqual(RESULT_KEYS);
    expect(msg).toMatchObject({
      ok: false,
      error: 'model_unavailable: replica failed',
      result: '',
      finish_reason: null,
      model_name: 'acme/fallback',
    });
  });

  it('a completion without choices is a failure, not a crash', () => {
    const msg = toLegacyResult({
      id: 'r',
      streamId: STREAM,
      spec: s,
      prompt: 'p',
      completion: { choices: [] },
      inferenceLatencyMs: 1,
      totalLatencyMs: 1,
    });
    expect(msg).toMatchObject({ ok: false, error: 'upstream returned no choices', model_name: 'acme/vision-1' });
  });

  it.each([
    [3.6, 3.4, 4, 4],
    [4, 2, 4, 4],
    [4.2, 9.7, 4, 10],
    [-1, -2, 0, 0],
  ])('inference %d ms, total %d ms → %d / %d: the total never below the inference', (inference, total, wantInference, wantTotal) => {
    const msg = toLegacyResult({
      id: 'r',
      streamId: STREAM,
      spec: s,
      prompt: 'p',
      completion: null,
      inferenceLatencyMs: inference,
      totalLatencyMs: total,
    });
    expect([msg.inference_latency_ms, msg.total_latency_ms]).toEqual([wantInference, wantTotal]);
  });
});

describe('toLegacyCreateResponse', () => {
  it('native: vendor object with url and token only', () => {
    const body = toLegacyCreateResponse(
      { streamId: STREAM, ttlSeconds: 45, media: { transport: 'native', url: 'wss://room', token: 'pub' } },
      svc,
    );
    expect(Object.keys(body)).toEqual(['stream_id', 'webrtc', 'lease', 'turn_servers', 'room']);
    expect(body).toEqual({
      stream_id: STREAM,
      webrtc: null,
      lease: { ttl_seconds: 45 },
      turn_servers: null,
      room: { url: 'wss://room', token: 'pub' },
    });
  });

  it('webrtc: answer and TURN entries with exactly urls/username/credential', () => {
    const turn = { urls: 'turn:t.example:3478', username: 'u', credential: 'c', ttl: 600 } as never;
    const body = toLegacyCreateResponse(
      { streamId: STREAM, ttlSeconds: 45, media: { transport: 'webrtc', answerSdp: 'v=0 answer', turnServers: [turn] } },
      svc,
    );
    expect(body).toEqual({
      stream_id: STREAM,
      webrtc: { type: 'answer', sdp: 'v=0 answer' },
      lease: { ttl_seconds: 45 },
      turn_servers: [{ urls: 'turn:t.example:3478', username: 'u', credential: 'c' }],
      room: null,
    });
    expect(Object.keys((body.turn_servers ?? [])[0]!).sort()).toEqual(['credential', 'urls', 'username']);
  });

  it('customer room source: nothing to hand back but the lease', () => {
    expect(toLegacyCreateResponse({ streamId: STREAM, ttlSeconds: 45, media: { transport: 'room' } }, svc)).toEqual({
      stream_id: STREAM,
      webrtc: null,
      lease: { ttl_seconds: 45 },
      turn_servers: null,
      room: null,
    });
  });

  it('the vendor names the room field', () => {
    const body = toLegacyCreateResponse({ streamId: STREAM, ttlSeconds: 45, media: { transport: 'native', url: 'u', token: 't' } }, acme);
    expect(Object.keys(body)).toEqual(['stream_id', 'webrtc', 'lease', 'turn_servers', 'lk']);
    expect(body.lk).toEqual({ url: 'u', token: 't' });
  });
});

describe('toLegacyModels', () => {
  const list = {
    object: 'list',
    data: [
      { id: 'acme/a', object: 'model', created: 1, owned_by: 'acme', status: 'ready' },
      { id: 'acme/b', object: 'model', created: 1, owned_by: 'acme', status: 'ready' },
      { id: 'acme/c', object: 'model', created: 1, owned_by: 'acme', status: 'ready' },
      { id: 'acme/d', object: 'model', created: 1, owned_by: 'acme', status: 'unavailable' },
      { id: 'acme/e', status: 'warming' },
      { status: 'ready' },
      null,
    ],
  };
  it('bare array of {model, ready, status}; observed load refines ready models', () => {
    const observed = new Map<string, 'degraded' | 'saturated'>([
      ['acme/b', 'degraded'],
      ['acme/c', 'saturated'],
      ['acme/d', 'degraded'],
    ]);
    const models = toLegacyModels(list, observed);
    expect(models).toEqual([
      { model: 'acme/a', ready: true, status: 'ready' },
      { model: 'acme/b', ready: true, status: 'degraded' },
      { model: 'acme/c', ready: false, status: 'saturated' },
      { model: 'acme/d', ready: false, status: 'unavailable' },
      { model: 'acme/e', ready: false, status: 'unavailable' },
    ]);
    for (const m of models) expect(Object.keys(m).sort()).toEqual(['model', 'ready', 'status']);
  });
  it('without observations and on an empty list', () => {
    expect(
      toLegacyModels(list)
        .slice(0, 2)
        .map((m) => m.status),
    ).toEqual(['ready', 'ready']);
    expect(toLegacyModels({})).toEqual([]);
  });
});

describe('end reasons, keepalive, prompt and feedback responses', () => {
  it('end reasons follow the vendor', () => {
    expect(legacyEndReasons(svc)).toEqual({
      clientRequested: 'client_requested',
      leaseExpired: 'lease_expired',
      insufficientCredits: 'insufficient_credits',
      webrtcDisconnected: 'webrtc_disconnected',
      roomDisconnected: 'room_disconnected',
      serverShutdown: 'server_shutdown',
      upstreamEnded: 'upstream_ended',
    });
    expect(legacyEndReasons(acme).roomDisconnected).toBe('lk_disconnected');
    expect(transportLostReason('webrtc', acme)).toBe('webrtc_disconnected');
    expect(transportLostReason('room', acme)).toBe('lk_disconnected');
  });

  it('keepalive has exactly the legacy keys; the token field follows the vendor; credits in whole cents', () => {
    const input = {
      streamId: STREAM,
      ttlSeconds: 45,
      creditsRemainingCents: 1234,
      costCents: 0.5,
      secondsCharged: 15,
      state: 'active' as const,
      roomToken: 'fresh',
    };
    expect(toLegacyKeepalive(input, svc)).toEqual({
      status: 'ok',
      stream_id: STREAM,
      ttl_seconds: 45,
      credits_remaining_cents: 1234,
      cost_cents: 0.5,
      seconds_charged: 15,
      state: 'active',
      room_token: 'fresh',
    });
    expect(toLegacyKeepalive({ ...input, creditsRemainingCents: 1234.99 }, svc).credits_remaining_cents).toBe(1234);
    expect(Object.keys(toLegacyKeepalive({ ...input, roomToken: null }, acme)).sort()).toEqual([
      'cost_cents',
      'credits_remaining_cents',
      'lk_token',
      'seconds_charged',
      'state',
      'status',
      'stream_id',
      'ttl_seconds',
    ]);
  });

  it('stream state and cents', () => {
    expect(legacyStreamState({ last_frame_at_ms: null }, 1000)).toBe('pending');
    expect(legacyStreamState({}, 1000)).toBe('pending');
    expect(legacyStreamState({ last_frame_at_ms: 995_000 }, 1_000_000)).toBe('active');
    expect(legacyStreamState({ last_frame_at_ms: 980_000 }, 1_000_000)).toBe('idle');
    expect(legacyStreamState({ last_frame_at_ms: 980_000 }, 1_000_000, 30_000)).toBe('active');
    expect(microcentsToCents(2_500_000)).toBe(2.5);
  });

  it('prompt response with ISO timestamps', () => {
    const body = toLegacyPromptResponse({
      id: 'cfg-1',
      streamId: STREAM,
      prompt: 'new prompt',
      spec: { backend: 'svc', model: 'acme/vision-1', outputSchema: null },
      createdAtMs: Date.UTC(2025, 0, 2, 3, 4, 5),
      updatedAtMs: Date.UTC(2025, 0, 2, 3, 5, 0),
    });
    expect(body).toEqual({
      id: 'cfg-1',
      stream_id: STREAM,
      prompt: 'new prompt',
      backend: 'svc',
      model: 'acme/vision-1',
      output_schema_json: null,
      created_at: '2025-01-02T03:04:05.000Z',
      updated_at: '2025-01-02T03:05:00.000Z',
    });
  });

  it('feedback entry', () => {
    expect(
      toLegacyFeedback({ id: 'f', streamId: STREAM, rating: 4, category: 'accuracy', feedback: 'ok', createdAtMs: 0, updatedAtMs: 1000 }),
    ).toEqual({
      id: 'f',
      stream_id: STREAM,
      rating: 4,
      category: 'accuracy',
      feedback: 'ok',
      created_at: '1970-01-01T00:00:00.000Z',
      updated_at: '1970-01-01T00:00:01.000Z',
    });
  });
});

describe('a custom brand end to end: acme / lk', () => {
  it('source type, backend, scheme and field names all change', () => {
    const s = spec({ source: { type: 'lk', url: 'wss://lk.example', token: 'sub' }, processing: { interval_seconds: 1 }, inference }, acme);
    expect(s.source).toEqual({ transport: 'room', url: 'wss://lk.example', token: 'sub' });
    expect(s.backend).toBe('acme');
    const req = buildCompletionRequest(s, STREAM, acme, { threadId: 't', prompt: s.prompt });
    expect(JSON.stringify(req)).toContain(`"acme://streams/${STREAM}?frame_index=-1"`);
    const result = toLegacyResult({
      id: 'r',
      streamId: STREAM,
      spec: s,
      prompt: s.prompt,
      completion: { model: s.model, choices: [{ message: { content: 'ok' }, finish_reason: 'stop' }] },
      inferenceLatencyMs: 1,
      totalLatencyMs: 2,
    });
    expect(result.model_backend).toBe('acme');
    const details = rejection(() =>
      spec({ source: { type: 'room', url: 'u', token: 't' }, processing: { interval_seconds: 1 }, inference }, acme),
    ).options.details as ValidationDetail[];
    expect(details[0]).toMatchObject({ loc: ['body', 'source', 'type'], type: 'literal_error' });
  });
});

describe('results-socket closes', () => {
  // Legacy clients treat 1008 as fatal (stop), 1011/1012/1013 as retryable, 1001 as the stream's end.
  it.each([
    ['authTimeout', 1008, 'authentication timeout'],
    ['badFirstMessage', 1008, 'first message must be {"api_key": "..."}'],
    ['authFailed', 1008, 'authentication failed'],
    ['streamNotFound', 1008, 'stream_not_found'],
    ['authRateLimited', 1013, 'too many failed authentications'],
    ['authUnavailable', 1011, 'authorization unavailable'],
    ['replicaLeaving', 1012, 'service_restart'],
  ] as const)('%s closes %i "%s"', (name, code, reason) => {
    expect(LEGACY_CLOSES[name]).toEqual({ code, reason });
  });
  it('every close is listed above', () => expect(Object.keys(LEGACY_CLOSES)).toHaveLength(7));
  it('a stream end is 1001 with its reason; a sunset refusal is 1013', () => {
    expect(endClose('lease_expired')).toEqual({ code: 1001, reason: 'lease_expired' });
    expect(tryLaterClose('brownout')).toEqual({ code: 1013, reason: 'brownout' });
  });
});

describe('per-stream legacy values', () => {
  it('the thread id is one per stream', () => expect(legacyThreadId(STREAM)).toBe(`legacy-${STREAM}`));
  it.each([
    [{ transport: 'native' as const }, 'tok', 'tok'],
    [{ transport: 'native' as const }, undefined, null],
    [{ transport: 'webrtc' as const }, 'tok', null],
    [{ transport: 'room' as const }, 'tok', null],
    [null, 'tok', null],
  ])('room token of %j with publish token %j is %j', (s, token, want) => {
    expect(legacyRoomToken(s, token)).toBe(want);
  });
});
