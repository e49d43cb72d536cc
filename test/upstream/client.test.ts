import { deadline, sleep } from '../helpers/time';
import { logLines } from '../helpers/log-lines';
import { brandOf } from '../../src/brand';
import { ServiceError } from '../../src/lib/errors';
import { createLogger } from '../../src/lib/logger';
import { UpstreamClient, UpstreamError, cacheInfo, isUpstreamStatus } from '../../src/upstream/client';
import { keyHash } from '../../src/lib/keys';
import type { UpstreamClientOptions } from '../../src/upstream/client';
import type { ChatCompletionRequest } from '../../src/upstream/types';
import { FakeUpstream, hang, json, reset, sampleCompletion, sampleStream, stallBody, streamErr } from './fake-upstream';
import type { Handler } from './fake-upstream';

const brand = brandOf({ brand: 'svc', roomVendor: 'room' });
const KEY = 'svc-test-key-0123456789';
const STREAM_ID = '5a0f3c7e-8b1d-4c2e-9f3a-1b2c3d4e5f60';
/** Shrunk schedule: 1 s becomes 1 ms. */
const FAST = { scale: 0.001 };
/** A retry wait no test outlives. */
const NEVER_MS = 10 * 60_000;
/** Hang bound for a call that must settle without a retry wait (far under NEVER_MS). */
const HANG_MS = 15_000;

const fakes: FakeUpstream[] = [];
const clients: UpstreamClient[] = [];

async function setup(opts: Partial<UpstreamClientOptions> = {}, ...script: Parameters<typeof FakeUpstream.start>) {
  const fake = await FakeUpstream.start(...script);
  fakes.push(fake);
  const client = new UpstreamClient({ baseUrl: fake.url, brand, retry: FAST, ...opts });
  clients.push(client);
  return { fake, client };
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

const question = (model: string): ChatCompletionRequest => ({
  model,
  messages: [{ role: 'user', content: [{ type: 'text', text: 'what is on screen?' }] }],
  max_completion_tokens: 64,
  thread_id: 't-1',
});

const modelsSeen = (fake: FakeUpstream) => fake.requests.map((r) => (JSON.parse(r.body) as { model: string }).model);

async function rejection(p: Promise<unknown>): Promise<UpstreamError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(UpstreamError);
    return err as UpstreamError;
  }
  throw new Error('expected a rejection');
}

/** The waits the client chose between attempts, as its debug log reports them. */
function retryWaits() {
  const { sink, lines } = logLines();
  const logger = createLogger('debug', 'test', sink);
  const waits = () =>
    lines
      .map((l) => JSON.parse(l) as { msg: string; delayMs?: number })
      .filter((l) => l.msg === 'upstream call failed, retrying')
      .map((l) => l.delayMs);
  return { logger, waits };
}

describe('createStream', () => {
  it('retries 503 answers and returns the third attempt’s stream', async () => {
    const { fake, client } = await setup(
      { region: 'us-west1' },
      streamErr(503, 'upstream_http_503'),
      streamErr(503, 'upstream_http_503'),
      json(201, sampleStream(STREAM_ID)),
    );
    const created = await client.createStream(KEY);
    expect(created.id).toBe(STREAM_ID);
    expect(created.publish).toMatchObject({ type: 'room', token: 'publish-token-secret' });
    expect(fake.requests).toHaveLength(3);
    for (const r of fake.requests) {
      expect(r).toMatchObject({ method: 'POST', url: '/v1beta/streams', body: '{}' });
      expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['x-svc-region']).toBe('us-west1');
    }
  });

  it('is not retried when the socket is destroyed after the request arrived', async () => {
    const { logger, waits } = retryWaits();
    // A retry would wait past the test's hang bound: the answer coming at all shows none was made.
    const { fake, client } = await setup(
      { retry: { delaysMs: { create: [NEVER_MS] } }, logger },
      reset,
      json(201, sampleStream(STREAM_ID)),
    );
    const err = await rejection(deadline(client.createStream(KEY), HANG_MS, 'createStream'));
    expect(err).toMatchObject({ kind: 'network', status: 502, code: 'upstream_unreachable' });
    expect(fake.requests).toHaveLength(1);
    expect(waits()).toEqual([]);
  });

  it('is not retried after a timeout, and times out on the configured headers timeout', async () => {
    const { logger, waits } = retryWaits();
    const { fake, client } = await setup({ timeouts: { headersMs: 100 }, retry: { delaysMs: { create: [NEVER_MS] } }, logger }, hang);
    // The default headers timeout (30 s) would outlast this hang bound (undici checks timeouts on a coarse ~1 s clock).
    const err = await rejection(deadline(client.createStream(KEY), HANG_MS, 'createStream'));
    expect(err).toMatchObject({ kind: 'timeout', status: 504, code: 'upstream_timeout' });
    expect(fake.requests).toHaveLength(1);
    expect(waits()).toEqual([]);
  });

  it.each([
    [400, 'bad_request'],
    [401, 'unauthorized'],
    [402, 'billing_denied'],
    [422, 'validation_error'],
    [500, 'internal'],
  ])('is not retried on %i', async (status, code) => {
    const { fake, client } = await setup({}, streamErr(status, code), json(201, sampleStream(STREAM_ID)));
    const err = await rejection(client.createStream(KEY));
    expect(err).toMatchObject({ kind: 'http', status, code, upstreamCode: code, shape: 'stream' });
    expect(err.body).toEqual({ detail: { error: { message: `${code} happened`, type: 'stream_error', code } } });
    expect(fake.requests).toHaveLength(1);
  });

  it('reports connection refused as a network error without retrying', async () => {
    const fake = await FakeUpstream.start();
    const url = fake.url;
    await fake.close();
    const { logger, waits } = retryWaits();
    const client = new UpstreamClient({ baseUrl: url, brand, retry: { delaysMs: { create: [NEVER_MS] } }, logger });
    clients.push(client);
    const err = await rejection(deadline(client.createStream(KEY), HANG_MS, 'createStream'));
    expect(err.kind).toBe('network');
    expect(waits()).toEqual([]);
  });
});

describe('keepalive', () => {
  it('retries reset connections and 503, and succeeds on the 4th attempt', async () => {
    const renewed = { expires_at_ms: Date.now() + 300_000, publish: { token: 'fresh' }, stream_time_ms: 1234 };
    const { fake, client } = await setup({}, reset, streamErr(503, 'unavailable'), reset, json(200, renewed));
    await expect(client.keepalive(KEY, STREAM_ID)).resolves.toEqual(renewed);
    expect(fake.requests).toHaveLength(4);
    expect(fake.requests[0]).toMatchObject({ method: 'POST', url: `/v1beta/streams/${STREAM_ID}/keepalive` });
  });

  it('is fatal after the 4th failure', async () => {
    const { fake, client } = await setup({}, reset, streamErr(503, 'unavailable'), reset, streamErr(503, 'unavailable'), json(200, {}));
    const err = await rejection(client.keepalive(KEY, STREAM_ID));
    expect(err).toMatchObject({ status: 503, kind: 'http' });
    await sleep(30);
    expect(fake.requests).toHaveLength(4);
  });

  it('is not retried on 404 (ended stream)', async () => {
    const { fake, client } = await setup({}, streamErr(404, 'stream_not_found'));
    const err = await rejection(client.keepalive(KEY, STREAM_ID));
    expect(isUpstreamStatus(err, 404)).toBe(true);
    expect(err.upstreamCode).toBe('stream_not_found');
    expect(fake.requests).toHaveLength(1);
  });

  it('is not retried when a 2xx body is not JSON', async () => {
    const bad: Handler = (_req, res) => res.end('<html>');
    const { fake, client } = await setup({}, bad);
    const err = await rejection(client.keepalive(KEY, STREAM_ID));
    expect(err).toMatchObject({ status: 502, code: 'upstream_invalid_response', bodyStarted: true });
    expect(fake.requests).toHaveLength(1);
  });
});

describe('chatCompletion', () => {
  it('retries, then falls back to the next ready model, skipping a not-ready one', async () => {
    const handler: Handler = (req, res, seen) => {
      const { model } = JSON.parse(seen.body) as { model: string };
      if (model === 'local/c') json(200, sampleCompletion(model))(req, res, seen);
      else streamErr(503, 'model_unavailable')(req, res, seen);
    };
    const { fake, client } = await setup({}, handler);
    const readiness: string[] = [];
    const attempts: string[] = [];
    const result = await client.chatCompletion(KEY, question('local/a'), {
      fallbackModels: ['local/b', 'local/c'],
      isModelReady: async (id) => {
        readiness.push(id);
        return id !== 'local/b';
      },
      onAttempt: (a) => attempts.push(`${a.model}#${a.attempt}/${a.totalAttempts}`),
    });
    // The contract's count: 3 attempts on a model, then the next ready one.
    expect(result).toMatchObject({ model: 'local/c', attempts: 4, fallbackUsed: true });
    expect(result.response.choices[0]!.message.content).toBe('answer from local/c');
    expect(cacheInfo(result.response, brand)).toEqual({ thread_id: 't-1', cache_hit: false, cached_input_tokens: 0 });
    expect(modelsSeen(fake)).toEqual(['local/a', 'local/a', 'local/a', 'local/c']);
    expect(readiness).toEqual(['local/b', 'local/c']);
    expect(attempts).toEqual(['local/a#1/1', 'local/a#2/2', 'local/a#3/3', 'local/c#1/4']);
    const sent = JSON.parse(fake.requests[3]!.body) as ChatCompletionRequest;
    expect(sent).toMatchObject({ thread_id: 't-1', max_completion_tokens: 64 });
  });

  it('answers from the first model without fallback when a retry succeeds', async () => {
    const { fake, client } = await setup({}, reset, json(200, sampleCompletion('local/a')));
    const result = await client.chatCompletion(KEY, question('local/a'), { fallbackModels: ['local/b'] });
    expect(result).toMatchObject({ model: 'local/a', attempts: 2, fallbackUsed: false });
    expect(fake.requests[1]!.url).toBe('/v1beta/chat/completions');
  });

  it('throws non-retryable errors at once, without fallback', async () => {
    const { fake, client } = await setup({}, streamErr(422, 'frame_not_yet_produced'));
    const err = await rejection(client.chatCompletion(KEY, question('local/a'), { fallbackModels: ['local/b'] }));
    expect(err).toMatchObject({ status: 422, upstreamCode: 'frame_not_yet_produced' });
    expect(fake.requests).toHaveLength(1);
  });

  it('falls back without retrying when the model is unavailable with a non-503 status', async () => {
    const { fake, client } = await setup({}, streamErr(400, 'model_unavailable'), json(200, sampleCompletion('local/b')));
    const result = await client.chatCompletion(KEY, question('local/a'), { fallbackModels: ['local/b'] });
    expect(result).toMatchObject({ model: 'local/b', attempts: 2, fallbackUsed: true });
    expect(modelsSeen(fake)).toEqual(['local/a', 'local/b']);
  });

  it('throws the last error once every model is exhausted', async () => {
    const { fake, client } = await setup({}, streamErr(503, 'upstream_http_503'));
    const err = await rejection(client.chatCompletion(KEY, question('local/a'), { fallbackModels: ['local/b', 'local/a'] }));
    expect(err.status).toBe(503);
    expect(modelsSeen(fake)).toEqual([...Array(3).fill('local/a'), ...Array(3).fill('local/b')]);
  });

  it('does not retry once a 2xx body has started', async () => {
    const { fake, client } = await setup({ timeouts: { bodyMs: 100 } }, stallBody);
    const err = await rejection(client.chatCompletion(KEY, question('local/a'), { fallbackModels: ['local/b'] }));
    expect(err).toMatchObject({ kind: 'timeout', bodyStarted: true });
    expect(fake.requests).toHaveLength(1);
  });

  it('honours retry-after in seconds', async () => {
    const { logger, waits } = retryWaits();
    const { fake, client } = await setup(
      { retry: { ...FAST, jitter: 0 }, logger },
      streamErr(503, 'upstream_http_503', { 'retry-after': '1' }),
      json(200, sampleCompletion('local/a')),
    );
    await client.chatCompletion(KEY, question('local/a'));
    expect(waits()).toEqual([1000]);
    expect(fake.requests).toHaveLength(2);
  });

  it('honours retry-after as an HTTP date, and caps long hints', async () => {
    const { logger, waits } = retryWaits();
    const at = new Date(Date.now() + 2000).toUTCString(); // second resolution: up to 2 s from now
    const { fake, client } = await setup(
      { retry: { ...FAST, retryAfterCapMs: 5000 }, logger },
      streamErr(503, 'upstream_http_503', { 'retry-after': at }),
      json(200, sampleCompletion('local/a')),
    );
    await client.chatCompletion(KEY, question('local/a'));
    const [dated] = waits();
    expect(dated).toBeGreaterThan(0);
    expect(dated).toBeLessThanOrEqual(2000);
    const capped = retryWaits();
    const cappedClient = new UpstreamClient({ baseUrl: fake.url, brand, retry: { ...FAST, retryAfterCapMs: 50 }, logger: capped.logger });
    clients.push(cappedClient);
    fake.reply(streamErr(503, 'upstream_http_503', { 'retry-after': '3600' }), json(200, sampleCompletion('local/a')));
    await cappedClient.chatCompletion(KEY, question('local/a'));
    expect(capped.waits()).toEqual([50]);
  });

  it('waits the real contract schedule when not shrunk (first wait 0.5 s ± 10 %)', async () => {
    const { logger, waits } = retryWaits();
    const { fake, client } = await setup(
      { retry: {}, logger },
      streamErr(503, 'upstream_http_503'),
      json(200, sampleCompletion('local/a')),
    );
    await client.chatCompletion(KEY, question('local/a'));
    const [wait] = waits();
    expect(wait).toBeGreaterThanOrEqual(450);
    expect(wait).toBeLessThanOrEqual(550);
    expect(fake.requests).toHaveLength(2);
  });

  it('stops a retry wait when the signal aborts', async () => {
    // The wait would outlast the hang bound: settling at all shows the abort cut it.
    const ac = new AbortController();
    // Aborted once the retry wait has begun (the client logs it right before it waits).
    const logger = createLogger('debug', 'test', {
      write: (line: string) =>
        void (line.includes('upstream call failed, retrying') && setImmediate(() => ac.abort(new Error('stream ended')))),
    });
    const { fake, client } = await setup({ retry: { delaysMs: { completion: [NEVER_MS, NEVER_MS] } }, logger }, streamErr(503, 'x'));
    const p = client.chatCompletion(KEY, question('local/a'), { signal: ac.signal, fallbackModels: ['local/b'] });
    await expect(deadline(p, HANG_MS, 'chatCompletion')).rejects.toThrow('stream ended');
    expect(fake.requests).toHaveLength(1);
  });

  it('aborts a request in flight', async () => {
    const { client } = await setup({}, hang);
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error('stream ended')), 50);
    await expect(client.chatCompletion(KEY, question('local/a'), { signal: ac.signal })).rejects.toThrow('stream ended');
    clearTimeout(timer);
  });

  it('retries timeouts per the completion policy', async () => {
    const { fake, client } = await setup({ timeouts: { headersMs: 100 }, retry: { delaysMs: { completion: [1] } } }, hang);
    const err = await rejection(client.chatCompletion(KEY, question('local/a')));
    expect(err).toMatchObject({ kind: 'timeout', status: 504, code: 'upstream_timeout' });
    expect(fake.requests).toHaveLength(2);
  });

  it('refuses streaming requests', async () => {
    const { fake, client } = await setup({}, json(200, {}));
    const req = { ...question('local/a'), stream: true } as unknown as ChatCompletionRequest;
    await expect(client.chatCompletion(KEY, req)).rejects.toMatchObject({ status: 400, code: 'stream_not_supported' });
    expect(fake.requests).toHaveLength(0);
  });

  it('serves 1,000 concurrent completions over a bounded pool of keep-alive connections', async () => {
    const { fake, client } = await setup({ connections: 64 }, (req, res, seen) => json(200, sampleCompletion('local/a'))(req, res, seen));
    const results = await Promise.all(Array.from({ length: 1000 }, () => client.chatCompletion(KEY, question('local/a'))));
    expect(results.every((r) => r.attempts === 1)).toBe(true);
    expect(fake.requests).toHaveLength(1000);
    expect(fake.connections).toBeLessThanOrEqual(64);
  });
});

describe('streams, models and billing', () => {
  it('reads a stream and maps a 404 to stream_not_found', async () => {
    const stream = {
      ...sampleStream(STREAM_ID),
      stream_time_ms: 0,
      first_frame_at_ms: null,
      last_frame_at_ms: null,
      last_frame_index: null,
      first_available_frame_at_ms: null,
      first_available_frame_index: null,
      created_at_ms: Date.now(),
      recent_fps: 0,
      retained_frame_count: 0,
      evicted_frame_count: 0,
      ended_at_ms: null,
      end_reason: null,
      audio: false,
    };
    const { fake, client } = await setup({}, json(200, stream), streamErr(404, 'stream_not_found'));
    const read = await client.getStream(KEY, STREAM_ID, { region: 'us-central1' });
    expect(read.last_frame_at_ms).toBeNull();
    expect(fake.requests[0]!.headers['x-svc-region']).toBe('us-central1');
    const err = await rejection(client.getStream(KEY, STREAM_ID));
    expect(isUpstreamStatus(err, 404)).toBe(true);
    expect(isUpstreamStatus(err, 410)).toBe(false);
    expect(err.code).toBe('stream_not_found');
    expect(err).toBeInstanceOf(ServiceError);
    expect(fake.requests).toHaveLength(2);
  });

  it('deletes a stream, treats 404 as already gone, and retries a failing delete with backoff', async () => {
    const { fake, client } = await setup(
      {},
      json(200, { id: STREAM_ID, deleted: true }),
      streamErr(404, 'stream_not_found'),
      streamErr(500, 'boom'),
    );
    await expect(client.deleteStream(KEY, STREAM_ID)).resolves.toEqual({ id: STREAM_ID, deleted: true, alreadyGone: false });
    await expect(client.deleteStream(KEY, STREAM_ID)).resolves.toEqual({ id: STREAM_ID, deleted: true, alreadyGone: true });
    // 500 on every try: the initial attempt and the policy's four retries, then thrown.
    await expect(client.deleteStream(KEY, STREAM_ID)).rejects.toMatchObject({ status: 500 });
    expect(fake.requests.map((r) => [r.method, r.url])).toEqual(Array(7).fill(['DELETE', `/v1beta/streams/${STREAM_ID}`]));
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('lists models without authentication', async () => {
    const list = { object: 'list', data: [{ id: 'local/analyzer', object: 'model', created: 1, owned_by: 'local', status: 'ready' }] };
    const { fake, client } = await setup({}, json(200, list));
    await expect(client.listModels()).resolves.toEqual(list);
    expect(fake.requests[0]!.url).toBe('/v1beta/models');
    expect(fake.requests[0]!.headers.authorization).toBeUndefined();
  });

  it('keeps the model id’s slash in the pricing path, without authentication', async () => {
    const price = {
      id: '1d1e1f10-0000-4000-8000-000000000001',
      model: 'local/analyzer',
      provider: 'local',
      version: '2026-01-01',
      input_microcents_per_token: 10,
      output_microcents_per_token: 40,
      cached_input_microcents_per_token: 2,
      public: true,
    };
    const { fake, client } = await setup({}, json(200, price), json(200, [price]), json(200, { object: 'list', data: [price] }));
    await expect(client.pricing('local/analyzer')).resolves.toEqual(price);
    await expect(client.allPricing()).resolves.toEqual([price]);
    await expect(client.allPricing()).resolves.toEqual([price]);
    expect(fake.requests.map((r) => r.url)).toEqual(['/billing/pricing/local/analyzer', '/billing/pricing', '/billing/pricing']);
    expect(fake.requests.every((r) => r.headers.authorization === undefined)).toBe(true);
  });

  it('reads the balance with the caller’s key over one kept-alive connection', async () => {
    const balance = { user_id: '0f5b8a8e-3d2c-4a47-9a61-6f1f2b9c0a01', balance_microcents: 1_500_000, balance_cents: 1 };
    const { fake, client } = await setup({}, json(200, balance));
    for (let i = 0; i < 10; i++) await expect(client.balance(KEY)).resolves.toEqual(balance);
    expect(fake.requests[0]).toMatchObject({ method: 'GET', url: '/billing/accounts/me/balance' });
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    // The pool may open a second socket while the first finishes its response; never one per call.
    expect(fake.connections).toBeLessThanOrEqual(2);
  });

  it('keeps a base URL path prefix', async () => {
    const fake = await FakeUpstream.start(json(200, { object: 'list', data: [] }));
    fakes.push(fake);
    const client = new UpstreamClient({ baseUrl: `${fake.url}/prefix/`, brand });
    clients.push(client);
    await client.listModels();
    expect(fake.requests[0]!.url).toBe('/prefix/v1beta/models');
  });

  it('refuses calls after close', async () => {
    const { client } = await setup({}, json(200, {}));
    await client.close();
    await expect(client.balance(KEY)).rejects.toMatchObject({ code: 'upstream_client_closed' });
  });
});

describe('logging', () => {
  it('never logs the API key, only its fingerprint', async () => {
    const lines: string[] = [];
    const logger = createLogger('trace', 'upstream-test', { write: (s: string) => void lines.push(s) });
    const handler: Handler = (req, res, seen) => {
      const { model } = JSON.parse(seen.body || '{}') as { model?: string };
      if (model === 'local/b') json(200, sampleCompletion(model))(req, res, seen);
      else streamErr(503, 'upstream_http_503')(req, res, seen);
    };
    const { client } = await setup({ logger }, handler);
    await client.chatCompletion(KEY, question('local/a'), { fallbackModels: ['local/b'] });
    await rejection(client.keepalive(KEY, STREAM_ID));
    await rejection(client.createStream(KEY));
    const text = lines.join('');
    expect(lines.length).toBeGreaterThanOrEqual(7); // 3 completion retries + fallback + 3 keepalive retries + 3 create retries
    expect(text).toContain(keyHash(KEY));
    expect(text).not.toContain(KEY);
    expect(text).not.toContain('test-key');
    expect(text).not.toContain('Bearer');
  });
});

describe('request id and trace context', () => {
  it('sends x-request-id and a traceparent in the caller’s trace, a new span per call', async () => {
    const { fake, client } = await setup({}, json(200, { user_id: 'u', balance_microcents: 1, balance_cents: 0 }));
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    await client.balance(KEY, { requestId: 'req-1', traceId });
    await client.balance(KEY, { requestId: 'req-2', traceId });
    await client.balance(KEY);
    const [a, b, c] = fake.requests.map((r) => r.headers);
    expect(a!['x-request-id']).toBe('req-1');
    expect(b!['x-request-id']).toBe('req-2');
    expect(a!.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(b!.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(a!.traceparent).not.toBe(b!.traceparent);
    expect(c!['x-request-id']).toBeUndefined();
    expect(c!.traceparent).toBeUndefined();
  });
});
