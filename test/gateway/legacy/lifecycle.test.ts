/**
 * The legacy /v0.2 interface end to end on real sockets: gateway + emulator, results naming the
 * right frames (the analyzer decodes the synthetic publisher's index pattern).
 */
import { clipBody, frameBody, http, KEY, KEY_B, KEY_BROKE, KEY_REVOKED, startStack, tail, useStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import { deadline, until } from '../../helpers/time';
import type { Stack } from '../../helpers/stack';
import { keyHash } from '../../../src/lib/keys';
import { slotsInUse } from '../../helpers/store-ops';

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

describe('legacy streams on the emulator', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s.close();
  });

  test('a clip stream: create, results at the cadence naming the clip window, keepalive, delete', async () => {
    const created = await http(s.url, 'POST', '/v0.2/streams', {
      body: clipBody({ target_fps: 4, clip_length_seconds: 1, delay_seconds: 0.5 }),
    });
    expect(created.status).toBe(201);
    const body = created.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['lease', 'room', 'stream_id', 'turn_servers', 'webrtc']);
    expect(body.lease).toEqual({ ttl_seconds: 45 });
    expect(Object.keys(body.room as object).sort()).toEqual(['token', 'url']);
    expect((body.room as { url: string }).url).toMatch(/^ws:\/\//);
    expect(body.webrtc).toBeNull();
    const id = body.stream_id as string;

    const sock = await openResults(s.url, id, KEY);
    const results = await sock.waitFor(4, 15_000);
    for (const r of results) {
      expect(Object.keys(r).sort()).toEqual(RESULT_KEYS);
      expect(r).toMatchObject({
        stream_id: id,
        mode: 'clip',
        model_name: 'local/analyzer',
        ok: true,
        error: null,
        prompt: 'What happens?',
      });
      expect(r.model_backend).toBe('svc');
    }
    // Windows after the first second are full: ~1 s of frames sampled at ≤ 4 fps, pattern = lifetime indices.
    const last = tail(results[3]!.result as string);
    expect(last.pattern).toEqual([last.first, last.last]);
    expect(last.frames).toBeGreaterThanOrEqual(3);
    expect(last.frames).toBeLessThanOrEqual(5);
    expect(last.spanMs).toBeLessThanOrEqual(1000);
    // Windows move forward with the live edge.
    expect(tail(results[3]!.result as string).last).toBeGreaterThan(tail(results[0]!.result as string).last);
    // Cadence itself is tested on fake time (streams-clock.test.ts, ticker.unit.test.ts).

    const ka = await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(ka.status).toBe(200);
    expect(Object.keys(ka.body as object).sort()).toEqual(
      ['cost_cents', 'credits_remaining_cents', 'room_token', 'seconds_charged', 'state', 'status', 'stream_id', 'ttl_seconds'].sort(),
    );
    expect(ka.body).toMatchObject({ status: 'ok', stream_id: id, ttl_seconds: 45, state: 'active' });
    expect((ka.body as { cost_cents: number }).cost_cents).toBeGreaterThan(0);
    expect(typeof (ka.body as { room_token: string }).room_token).toBe('string');

    const del = await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ status: 'ok' });
    expect(await sock.closed).toEqual({ code: 1001, reason: 'client_requested' });
    // Deleting again: already ended → 204; the upstream stream is gone too.
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(204);
    const up = await http(s.emulator.url, 'GET', `/v1beta/streams/${id}`);
    expect(up.body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
    // A socket opened on the tombstone closes at once with the reason.
    const late = await openResults(s.url, id, KEY);
    expect(await late.closed).toEqual({ code: 1001, reason: 'client_requested' });
  });

  test('stream info: the provider’s 12 fields with their types, counted across results; 404 once ended', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) })).body as { stream_id: string })
      .stream_id;
    const sock = await openResults(s.url, id, KEY);
    await sock.waitFor(3, 15_000);
    // Read right after a frame landed upstream, so the upstream's recent fps (info.fps) is above 0.
    const lastFrame = async () =>
      ((await http(s.emulator.url, 'GET', `/v1beta/streams/${id}`)).body as { last_frame_index: number }).last_frame_index;
    const seen = await lastFrame();
    await deadline(
      until(async () => (await lastFrame()) > seen),
      15_000,
      'a new frame upstream',
    );
    const r = await http(s.url, 'GET', `/v0.2/streams/${id}/info`);
    expect(r.status).toBe(200);
    const info = r.body as Record<string, number | string>;
    const integers = ['frame_width', 'frame_height', 'effective_width', 'effective_height', 'inferences_completed', 'inferences_failed'];
    const numbers = ['uptime_seconds', 'fps', 'last_inference_latency_seconds'];
    expect(Object.keys(info).sort()).toEqual([...integers, ...numbers, 'source_type', 'state', 'stream_id'].sort());
    for (const k of integers) expect([k, Number.isInteger(info[k])]).toEqual([k, true]);
    for (const k of numbers) expect([k, typeof info[k]]).toEqual([k, 'number']);
    expect(info).toMatchObject({ stream_id: id, source_type: 'native', state: 'active', inferences_failed: 0 });
    // Counted by the commits (the socket may not have seen the latest yet), on the store's record.
    expect(info.inferences_completed as number).toBeGreaterThanOrEqual(3);
    expect(info.last_inference_latency_seconds as number).toBeGreaterThan(0);
    expect(info.uptime_seconds as number).toBeGreaterThan(0);
    expect(info.fps as number).toBeGreaterThan(0);
    // A native stream's resolution is not told by the upstream: 0 (docs/migration.md).
    expect([info.frame_width, info.frame_height]).toEqual([0, 0]);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    expect(await http(s.url, 'GET', `/v0.2/streams/${id}/info`)).toMatchObject({ status: 404, body: { error: 'stream_not_found' } });
    expect(await http(s.url, 'POST', `/v0.2/streams/${id}/spectate`)).toMatchObject({ status: 404, body: { error: 'stream_not_found' } });
  });

  test('a frame stream with an output schema gets JSON results of the latest frame; prompt update takes effect', async () => {
    const schema = {
      type: 'object',
      properties: { frame_count: { type: 'integer' }, description: { type: 'string' } },
      required: ['frame_count', 'description'],
    };
    const created = await http(s.url, 'POST', '/v0.2/streams', {
      body: frameBody({ interval_seconds: 1 }, { output_schema_json: schema, max_output_tokens: 128 }),
    });
    expect(created.status).toBe(201);
    const id = (created.body as { stream_id: string }).stream_id;
    const sock = await openResults(s.url, id, KEY);
    const [first] = await sock.waitFor(1);
    expect(first).toMatchObject({ ok: true, mode: 'frame' });
    const parsed = JSON.parse(first!.result as string) as { frame_count: number };
    expect(parsed.frame_count).toBe(1);

    const patch = await http(s.url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'Now count the frames' } });
    expect(patch.status).toBe(200);
    expect(Object.keys(patch.body as object).sort()).toEqual(
      ['backend', 'created_at', 'id', 'model', 'output_schema_json', 'prompt', 'stream_id', 'updated_at'].sort(),
    );
    expect(patch.body).toMatchObject({
      stream_id: id,
      prompt: 'Now count the frames',
      model: 'local/analyzer',
      output_schema_json: schema,
    });
    const seen = sock.messages.length;
    await sock.waitFor(seen + 2);
    expect(sock.messages[seen + 1]!.prompt).toBe('Now count the frames');
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    await sock.closed;
  });

  test('several sockets per stream each get every later result, in order', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) })).body as { stream_id: string })
      .stream_id;
    const a = await openResults(s.url, id, KEY);
    const b = await openResults(s.url, id, KEY);
    await a.waitFor(3);
    await b.waitFor(3);
    const ids = (m: Record<string, unknown>[]) => m.map((r) => r.id);
    const commonIds = () => ids(b.messages).filter((x) => ids(a.messages).includes(x));
    // Both sockets get each later result; which one hears of it first is a race: wait, do not sleep.
    await deadline(
      until(() => commonIds().length >= 2, 10),
      10_000,
      'results on both sockets',
    );
    const common = commonIds();
    expect(common.length).toBeGreaterThanOrEqual(2);
    expect(ids(a.messages).filter((x) => common.includes(x))).toEqual(common);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    expect((await a.closed).code).toBe(1001);
    expect((await b.closed).code).toBe(1001);
  });

  test('WebSocket auth: bad key, wrong account, garbage first message → 1008', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() })).body as { stream_id: string }).stream_id;
    expect((await (await openResults(s.url, id, 'svc-nope')).closed).code).toBe(1008);
    expect((await (await openResults(s.url, id, KEY_REVOKED)).closed).code).toBe(1008);
    // Another account's stream closes exactly as a missing one.
    expect(await (await openResults(s.url, id, KEY_B)).closed).toEqual({ code: 1008, reason: 'stream_not_found' });
    expect(await (await openResults(s.url, '3f0c4f5e-7b1a-4c1e-9a55-0d9f2b7c1a01', KEY_B)).closed).toEqual({
      code: 1008,
      reason: 'stream_not_found',
    });
    const raw = await openResults(s.url, id, null);
    raw.ws.send('not json');
    expect((await raw.closed).code).toBe(1008);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  });

  test('another account gets the 404 of a missing stream on every stream operation; no key 401', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() })).body as { stream_id: string }).stream_id;
    const missing = '3f0c4f5e-7b1a-4c1e-9a55-0d9f2b7c1a01';
    for (const [method, path, body] of [
      ['POST', `/v0.2/streams/{id}/keepalive`, undefined],
      ['DELETE', `/v0.2/streams/{id}`, undefined],
      ['PATCH', `/v0.2/streams/{id}/config/prompt`, { prompt: 'x' }],
      ['POST', `/v0.2/streams/{id}/feedback`, { rating: 3, category: 'quality', feedback: '' }],
      ['GET', `/v0.2/streams/{id}/info`, undefined],
      ['POST', `/v0.2/streams/{id}/spectate`, undefined],
    ] as const) {
      const theirs = await http(s.url, method, path.replace('{id}', id), { key: KEY_B, body });
      const none = await http(s.url, method, path.replace('{id}', missing), { key: KEY_B, body });
      expect([method, path, theirs.status]).toEqual([method, path, 404]);
      // The same answer as for a stream that does not exist, but for the id it names.
      const { request_id: _a, ...theirsBody } = theirs.body as Record<string, unknown>;
      const { request_id: _b, ...noneBody } = none.body as Record<string, unknown>;
      expect(theirsBody).toEqual(JSON.parse(JSON.stringify(noneBody).replaceAll(missing, id)));
      expect(theirsBody).toMatchObject({ error: 'stream_not_found' });
      expect((await http(s.url, method, path.replace('{id}', id), { key: null, body })).status).toBe(401);
    }
    expect((await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`, { key: 'svc-unknown' })).status).toBe(401);
    const fb = await http(s.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 5, category: 'accuracy', feedback: 'great' } });
    expect(fb).toMatchObject({ status: 200, body: { status: 'ok' } });
    // The provider's range: an integer 0..10, the text optional (default "").
    expect((await http(s.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 0, category: 'latency' } })).status).toBe(200);
    expect((await http(s.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 10, category: 'latency' } })).status).toBe(200);
    for (const rating of [-1, 11, 2.5]) {
      expect((await http(s.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating, category: 'latency' } })).status).toBe(422);
    }
    const list = await http(s.url, 'GET', '/v0.2/streams/feedback');
    expect(list.body).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ stream_id: id, rating: 5, category: 'accuracy', feedback: 'great' }),
        expect.objectContaining({ stream_id: id, rating: 0, category: 'latency', feedback: '' }),
        expect.objectContaining({ stream_id: id, rating: 10, category: 'latency', feedback: '' }),
      ]),
    );
    expect(list.body).toHaveLength(3);
    expect((await http(s.url, 'GET', '/v0.2/streams/feedback', { key: KEY_B })).body).toEqual([]);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  });

  test('the 5-stream limit per key, and its release', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
      expect(r.status).toBe(201);
      ids.push((r.body as { stream_id: string }).stream_id);
    }
    const sixth = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(sixth.status).toBe(429);
    expect(sixth.body).toMatchObject({ error: 'concurrent_stream_limit', details: { limit: 5 } });
    // When to try again: the soonest lease lapse of the key's five streams, within one lease.
    const retryAfter = Number(sixth.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(s.cfg.legacy.leaseTtlSeconds);
    expect((sixth.body as { details: Record<string, unknown> }).details.lease_lapses_in_seconds).toBe(retryAfter);
    expect((sixth.body as { message: string }).message).toMatch(
      /deleted .*or its lease lapses without a keepalive \(the soonest in \d+ s\)/,
    );
    // Another key has its own slots.
    const other = await http(s.url, 'POST', '/v0.2/streams', { key: KEY_B, body: frameBody() });
    expect(other.status).toBe(201);
    await http(s.url, 'DELETE', `/v0.2/streams/${ids[0]}`);
    await http(s.url, 'DELETE', `/v0.2/streams/${ids[0]}`); // ending twice releases once
    const again = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(again.status).toBe(201);
    expect((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() })).status).toBe(429);
    for (const id of [...ids.slice(1), (again.body as { stream_id: string }).stream_id]) await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    await http(s.url, 'DELETE', `/v0.2/streams/${(other.body as { stream_id: string }).stream_id}`, { key: KEY_B });
  });

  test('models, health and unknown/not-ready models', async () => {
    const models = await http(s.url, 'GET', '/v0.2/models', { key: null });
    expect(models.status).toBe(200);
    expect(models.body).toEqual(
      expect.arrayContaining([
        { model: 'local/analyzer', ready: true, status: 'ready' },
        { model: 'local/offline', ready: false, status: 'unavailable' },
      ]),
    );
    const health = await fetch(`${s.url}/healthz`);
    expect(await health.text()).toBe('ok');
    const unknown = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({}, { model: 'local/nope' }) });
    expect(unknown.status).toBe(422);
    const offline = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({}, { model: 'local/offline' }) });
    expect(offline.status).toBe(503);
    expect(offline.body).toMatchObject({ error: 'model_unavailable' });
  });

  test('a broke account gets 402 on create; a revoked key 401', async () => {
    const broke = await http(s.url, 'POST', '/v0.2/streams', { key: KEY_BROKE, body: frameBody() });
    expect(broke.status).toBe(402);
    expect(broke.body).toMatchObject({ error: 'insufficient_credits' });
    const revoked = await http(s.url, 'POST', '/v0.2/streams', { key: KEY_REVOKED, body: frameBody() });
    expect(revoked.status).toBe(401);
  });

  test('the 128 tok/s rule and a validation error carry the legacy body', async () => {
    const r = await http(s.url, 'POST', '/v0.2/streams', {
      body: { ...clipBody({ delay_seconds: 2 }, { max_output_tokens: 300 }), client: { request_id: 'req-42' } },
    });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({
      request_id: 'req-42',
      message:
        'Effective output token rate (150.0 tok/s) exceeds maximum of 128 tok/s. max_output_tokens (300) / interval (2s) must be <= 128. Reduce max_output_tokens to at most 256. ' +
        'Send "max_output_tokens": 256 (or omit it: the default for this interval is 256), or keep 300 with "delay_seconds": 2.344 or more.',
    });
    const bad = await http(s.url, 'POST', '/v0.2/streams', { body: { ...frameBody(), extra: 1 } });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: 'validation_error', details: [expect.objectContaining({ loc: ['body', 'extra'] })] });
    expect(typeof (bad.body as { request_id: string }).request_id).toBe('string');
    const notJson = await http(s.url, 'POST', '/v0.2/streams', { raw: '{"mode":' });
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatchObject({ error: expect.any(String), request_id: expect.any(String) });
  });

  test('double slashes, empty JSON keepalive bodies and CORS preflights are accepted', async () => {
    const created = await http(s.url, 'POST', '//v0.2//streams', { body: frameBody({ interval_seconds: 5 }) });
    expect(created.status).toBe(201);
    const id = (created.body as { stream_id: string }).stream_id;
    const res = await fetch(`${s.url}//v0.2/streams/${id}/keepalive`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'content-length': '0', origin: 'https://app.example' },
    });
    expect(res.status).toBe(200);
    // The default CORS: the origin echoed with credentials, as browser SDKs need (see test/gateway/server.test.ts).
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    const pre = await fetch(`${s.url}/v0.2/streams`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-headers')).toContain('authorization');
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  });
});

describe('legacy stream endings', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ legacy: { leaseTtlSeconds: 1, upstreamKeepaliveSeconds: 0.3 } });
  });
  afterAll(async () => {
    await s.close();
  });

  test('no keepalive: the legacy lease expires → 1001 lease_expired, upstream deleted, slot released', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) })).body as { stream_id: string })
      .stream_id;
    const sock = await openResults(s.url, id, KEY);
    expect(await sock.closed).toEqual({ code: 1001, reason: 'lease_expired' });
    expect((await http(s.emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended' });
    expect((await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(404);
    expect(await slotsInUse(s.gateway.gateway.store, keyHash(KEY))).toBe(0);
  });

  test('the upstream stream expiring ends the legacy stream', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) })).body as { stream_id: string })
      .stream_id;
    const keepalive = setInterval(() => void http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`), 300);
    try {
      const sock = await openResults(s.url, id, KEY);
      await http(s.emulator.url, 'POST', `/_emulator/streams/${id}/expire`);
      expect(await sock.closed).toEqual({ code: 1001, reason: 'lease_expired' });
    } finally {
      clearInterval(keepalive);
    }
  });
});

describe('a legacy stream whose account runs dry', () => {
  // The default lease: a 1 s one would race the client's keepalives on a loaded machine, and end
  // the stream as lease_expired before the 402 could.
  const stack = useStack();

  test('402 mid-stream ends the stream with insufficient_credits', async () => {
    const s = stack();
    const id = (
      (await http(s.url, 'POST', '/v0.2/streams', { key: KEY_B, body: frameBody({ interval_seconds: 0.3 }) })).body as { stream_id: string }
    ).stream_id;
    try {
      const sock = await openResults(s.url, id, KEY_B);
      await sock.waitFor(1);
      await http(s.emulator.url, 'POST', '/_emulator/balance', { body: { api_key: KEY_B, balance_microcents: 0 } });
      expect(await sock.closed).toEqual({ code: 1001, reason: 'insufficient_credits' });
    } finally {
      await http(s.emulator.url, 'POST', '/_emulator/balance', { body: { api_key: KEY_B, balance_microcents: 1_000_000_000 } });
    }
  });

  test('a keepalive refused for credits (402) leaves the stream running; a top-up through checkout and a keepalive renew it', async () => {
    const s = stack();
    // One tick a minute: after the first result no completion meets the empty balance meanwhile.
    const id = (
      (await http(s.url, 'POST', '/v0.2/streams', { key: KEY_B, body: frameBody({ interval_seconds: 60 }) })).body as { stream_id: string }
    ).stream_id;
    try {
      const sock = await openResults(s.url, id, KEY_B);
      await sock.waitFor(1, 15_000);
      await http(s.emulator.url, 'POST', '/_emulator/balance', { body: { api_key: KEY_B, balance_microcents: 0 } });
      const refused = await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`, { key: KEY_B });
      expect(refused).toMatchObject({ status: 402, body: { error: 'insufficient_credits' } });
      expect(await http(s.url, 'GET', `/v0.2/streams/${id}/info`, { key: KEY_B })).toMatchObject({ status: 200, body: { stream_id: id } });

      // The customer tops up on the hosted checkout page (through the gateway's /billing passthrough).
      const checkout = await http(s.url, 'POST', '/billing/checkout', { key: KEY_B, body: { amount_cents: 500 } });
      expect(checkout.status).toBe(200);
      const page = await fetch((checkout.body as { url: string }).url);
      expect(page.status).toBe(200);
      const renewed = await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`, { key: KEY_B });
      expect(renewed).toMatchObject({ status: 200, body: { status: 'ok', stream_id: id } });
      // What the checkout paid, less at most what the stream cost since.
      expect((renewed.body as { credits_remaining_cents: number }).credits_remaining_cents).toBeGreaterThan(450);
      expect((renewed.body as { credits_remaining_cents: number }).credits_remaining_cents).toBeLessThanOrEqual(500);
      expect(sock.ws.readyState).toBe(sock.ws.OPEN);
      await http(s.url, 'DELETE', `/v0.2/streams/${id}`, { key: KEY_B });
      expect(await sock.closed).toEqual({ code: 1001, reason: 'client_requested' });
    } finally {
      await http(s.emulator.url, 'POST', '/_emulator/balance', { body: { api_key: KEY_B, balance_microcents: 1_000_000_000 } });
    }
  });
});

describe('upstream failures', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ legacy: { fallbackModels: ['local/analyzer-mini'] } });
  });
  afterAll(async () => {
    await s.close();
  });

  test('a 503 burst is retried; a longer one falls back to the next ready model; then recovers', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) })).body as { stream_id: string })
      .stream_id;
    const sock = await openResults(s.url, id, KEY);
    await sock.waitFor(1);
    // Two failures: the retries absorb them, the answer still comes from the requested model.
    await http(s.emulator.url, 'POST', '/_emulator/faults', { body: { model: 'local/analyzer', count: 2, status: 503 } });
    let n = sock.messages.length;
    await sock.waitFor(n + 2);
    expect(sock.messages.slice(n, n + 2).every((m) => m.ok === true)).toBe(true);
    expect(sock.messages[n]!.model_name).toBe('local/analyzer');
    // Three failures exhaust the contract's 3 attempts: the fallback model answers.
    await http(s.emulator.url, 'POST', '/_emulator/faults', { body: { model: 'local/analyzer', count: 3, status: 503 } });
    n = sock.messages.length;
    const [fallback] = (await sock.waitFor(n + 1)).slice(n);
    expect(fallback).toMatchObject({ ok: true, model_name: 'local/analyzer-mini' });
    n = sock.messages.length;
    await sock.waitFor(n + 1);
    expect(sock.messages[n]!.model_name).toBe('local/analyzer');
    // Everything failing: an ok:false result with a clear error.
    await http(s.emulator.url, 'POST', '/_emulator/faults', { body: { model: '*', count: 8, status: 503 } });
    n = sock.messages.length;
    const [failed] = (await sock.waitFor(n + 1)).slice(n);
    expect(failed).toMatchObject({ ok: false, result: '', finish_reason: null });
    expect(failed!.error).toMatch(/503/);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  });
});
