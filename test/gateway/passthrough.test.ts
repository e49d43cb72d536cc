/**
 * /v1beta and /billing through the gateway: unchanged against the emulator (every endpoint, the
 * official openai client, JSON and SSE), and the proxy's failure paths against scripted upstreams
 * (no buffering, client aborts, mid-stream failures, unreachable and silent upstreams).
 */
import http from 'node:http';
import OpenAI from 'openai';
import request from 'supertest';
import { createGateway } from '../../src/gateway/app';
import { createLogger } from '../../src/lib/logger';
import { http as call, KEY, KEY_B, startStack, tail } from '../helpers/stack';
import type { Stack } from '../helpers/stack';
import { closeServer } from '../../src/lib/listen';
import { gatewayOn, rawRequest, startRawUpstream } from './doubles';
import type { RawUpstream } from './doubles';
import type { RunningGateway } from '../../src/gateway/server';
import { deadline, sleep, until } from '../helpers/time';

/** Response headers that differ per connection or per moment, not per proxy. */
const VOLATILE = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length']);

function headerNames(h: Headers): string[] {
  const names: string[] = [];
  h.forEach((_v, k) => names.push(k));
  return names.filter((k) => !VOLATILE.has(k)).sort();
}

async function both(
  s: Stack,
  method: string,
  path: string,
  opts: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {},
) {
  const send = async (base: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
    if (opts.key !== null) headers.authorization = `Bearer ${opts.key ?? KEY}`;
    const res = await fetch(`${base}${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: text ? (JSON.parse(text) as unknown) : null };
  };
  const direct = await send(s.emulator.url);
  const via = await send(s.url);
  return { direct, via };
}

/** Waits until the emulator reports a first frame for a stream (created through the gateway). */
async function streamWithFrames(s: Stack, key = KEY): Promise<string> {
  const created = await call(s.url, 'POST', '/v1beta/streams', { key, body: {} });
  expect(created.status).toBe(201);
  const id = (created.body as { id: string }).id;
  for (let i = 0; i < 100; i++) {
    const st = await call(s.url, 'GET', `/v1beta/streams/${id}`, { key });
    if (
      (st.body as { last_frame_index: number | null }).last_frame_index !== null &&
      (st.body as { last_frame_index: number }).last_frame_index >= 3
    )
      return id;
    await sleep(50);
  }
  throw new Error('no frames arrived');
}

describe('passthrough against the emulator', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s.close();
  });

  test('public and billing endpoints answer through the gateway exactly as directly, plus x-request-id', async () => {
    const cases: [string, string, { key?: string | null }][] = [
      ['GET', '/v1beta/models', { key: null }],
      ['GET', '/billing/pricing', { key: null }],
      ['GET', '/billing/pricing/local/analyzer', { key: null }],
      ['GET', '/billing/pricing/local/analyzer-mini', { key: null }],
      ['GET', '/billing/pricing/local/none', { key: null }],
      ['GET', '/billing/accounts/me/balance', {}],
      ['GET', '/billing/accounts/me/balance', { key: null }],
      ['GET', '/billing/accounts/me/balance', { key: 'svc-not-a-key' }],
      ['GET', '/v1beta/streams/not-a-uuid', {}],
      ['GET', '/v1beta/streams/00000000-0000-4000-8000-000000000000', {}],
      ['GET', '/v1beta/no-such-thing?x=1', {}],
    ];
    for (const [method, path, opts] of cases) {
      const { direct, via } = await both(s, method, path, opts);
      expect({ path, status: via.status }).toEqual({ path, status: direct.status });
      expect(via.body).toEqual(direct.body);
      expect(headerNames(via.headers)).toEqual([...headerNames(direct.headers), 'x-request-id'].sort());
      expect(via.headers.get('content-type')).toBe(direct.headers.get('content-type'));
      expect(via.headers.get('x-request-id')).toMatch(/^[\w-]+$/);
      // No CORS or deprecation headers leak onto the current interface.
      expect(via.headers.get('deprecation')).toBeNull();
    }
    const pricing = await call(s.url, 'GET', '/billing/pricing/local/analyzer', { key: null });
    expect(pricing.body).toMatchObject({ model: 'local/analyzer', input_microcents_per_token: 10 });
  });

  test('the stream lifecycle passes through: create, read, keepalive, delete, region header and its echo', async () => {
    const created = await call(s.url, 'POST', '/v1beta/streams', { body: {} });
    expect(created.status).toBe(201);
    const c = created.body as { id: string; state: string; publish: { type: string; url: string; token: string }; ttl_seconds: number };
    expect(c).toMatchObject({ state: 'active', ttl_seconds: 300, publish: { type: 'room' } });
    expect(created.headers.get('x-svc-region')).toBe('us-west1');

    const [direct, via] = await Promise.all([
      call(s.emulator.url, 'GET', `/v1beta/streams/${c.id}`),
      call(s.url, 'GET', `/v1beta/streams/${c.id}`),
    ]);
    expect(via.status).toBe(200);
    expect((via.body as { id: string; created_at_ms: number }).created_at_ms).toBe(
      (direct.body as { created_at_ms: number }).created_at_ms,
    );
    // Another account cannot see it, through the gateway as directly.
    const other = await both(s, 'GET', `/v1beta/streams/${c.id}`, { key: KEY_B });
    expect(other.via.status).toBe(other.direct.status);
    expect(other.via.body).toEqual(other.direct.body);

    const region = await fetch(`${s.url}/v1beta/streams/${c.id}`, {
      headers: { authorization: `Bearer ${KEY}`, 'X-Svc-Region': 'us-west1' },
    });
    expect(region.status).toBe(200);
    expect(region.headers.get('x-svc-region')).toBe('us-west1');
    await region.text();
    const wrong = await both(s, 'GET', `/v1beta/streams/${c.id}`, { headers: { 'X-Svc-Region': 'us-central1' } });
    expect(wrong.via.status).toBe(409);
    expect(wrong.via.body).toEqual(wrong.direct.body);
    expect(wrong.via.body).toEqual({ detail: { error: 'region_error', expected_region: 'us-west1', requested_region: 'us-central1' } });

    const ka = await call(s.url, 'POST', `/v1beta/streams/${c.id}/keepalive`);
    expect(ka.status).toBe(200);
    expect(ka.body).toMatchObject({ id: c.id, ttl_seconds: 300, publish: { token: expect.any(String) } });

    const del = await call(s.url, 'DELETE', `/v1beta/streams/${c.id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ id: c.id, deleted: true });
    expect((await call(s.url, 'GET', `/v1beta/streams/${c.id}`)).body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
    expect((await call(s.url, 'POST', `/v1beta/streams/${c.id}/keepalive`)).status).toBe(404);
  });

  test('the official openai client: models, a JSON completion and a streamed completion about live frames', async () => {
    const client = new OpenAI({ baseURL: `${s.url}/v1beta`, apiKey: KEY, maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain('local/analyzer');

    const id = await streamWithFrames(s);
    const messages = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, text: 'What happens?' },
          { type: 'image_url' as const, image_url: { url: `svc://streams/${id}?frame_index=-1` } },
        ],
      },
    ];
    const json = await client.chat.completions.create({ model: 'local/analyzer', messages });
    expect(json.object).toBe('chat.completion');
    expect(json.choices[0]!.finish_reason).toBe('stop');
    const answer = json.choices[0]!.message.content!;
    expect(tail(answer).frames).toBe(1);
    expect(json.usage!.total_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({
      model: 'local/analyzer',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let chunks = 0;
    let usage: unknown;
    for await (const chunk of stream) {
      chunks += 1;
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(3);
    expect(tail(text).frames).toBe(1);
    expect(usage).toMatchObject({ total_tokens: expect.any(Number) });

    // An upstream error reaches the client as the same typed error.
    await expect(client.chat.completions.create({ model: 'local/offline', messages })).rejects.toMatchObject({ status: 503 });
    await call(s.url, 'DELETE', `/v1beta/streams/${id}`);
  });

  test('a client abort stops the upstream work: the aborted completion is never charged', async () => {
    const id = await streamWithFrames(s, KEY_B);
    const body = {
      model: 'local/analyzer',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=-1` } }] }],
    };
    const balance = async () =>
      ((await call(s.url, 'GET', '/billing/accounts/me/balance', { key: KEY_B })).body as { balance_microcents: number })
        .balance_microcents;
    // Ordered by events, not timed: the client leaves while its request waits upstream in an
    // injected latency; then the same request, not aborted, waits out the same latency and is
    // answered. Waits of one length end in the order they began, so an upstream request left running
    // would have reached the model (and been billed) before the control. The latency only has to
    // outlast the abort's way through the gateway to the emulator (a hang-sized margin).
    const latencyMs = 3000;
    const { ctx } = s.emulator.emulator;
    const modelLookups = jest.spyOn(ctx.models, 'get');
    const charges = jest.spyOn(ctx.accounts, 'charge');
    try {
      const before = await balance();
      await call(s.emulator.url, 'POST', '/_emulator/faults', { body: { count: 1, latencyMs } });
      const abort = new AbortController();
      const pending = fetch(`${s.url}/v1beta/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY_B}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: abort.signal,
      });
      // The request took its fault: it went through the gateway, reached the emulator and waits there.
      await deadline(
        until(() => ctx.faults.list().length === 0, 10),
        10_000,
        'the request reaches the upstream',
      );
      abort.abort();
      await expect(pending).rejects.toThrow();

      // The control: the same request, not aborted, is answered and charged (so the checks can fail).
      await call(s.emulator.url, 'POST', '/_emulator/faults', { body: { count: 1, latencyMs } });
      expect((await call(s.url, 'POST', '/v1beta/chat/completions', { key: KEY_B, body })).status).toBe(200);
      expect(modelLookups).toHaveBeenCalledTimes(1);
      expect(charges).toHaveBeenCalledTimes(1);
      expect(await balance()).toBeLessThan(before);
    } finally {
      modelLookups.mockRestore();
      charges.mockRestore();
    }
    await call(s.url, 'DELETE', `/v1beta/streams/${id}`, { key: KEY_B });
  }, 30_000);
  test('an upstream 429 reaches the client unchanged: status, retry-after and body', async () => {
    const id = await streamWithFrames(s);
    const body = {
      model: 'local/analyzer',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=-1` } }] }],
    };
    await call(s.emulator.url, 'POST', '/_emulator/faults', {
      body: { model: '*', count: 2, status: 429, code: 'rate_limited', retryAfterSeconds: 2 },
    });
    const { direct, via } = await both(s, 'POST', '/v1beta/chat/completions', { body });
    expect(direct.status).toBe(429);
    expect(via.status).toBe(429);
    expect(via.headers.get('retry-after')).toBe('2');
    expect(via.headers.get('retry-after')).toBe(direct.headers.get('retry-after'));
    expect(via.body).toEqual(direct.body);
    await call(s.url, 'DELETE', `/v1beta/streams/${id}`);
  });
});

describe('passthrough of the upstream rate limit', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ emulator: { rateLimit: { completionsPerSecond: 2 } } });
  });
  afterAll(async () => {
    await s.close();
  });

  test('x-ratelimit-* headers on answers and the 429 with retry-after reach the client unchanged', async () => {
    const id = await streamWithFrames(s);
    const body = {
      model: 'local/analyzer',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=-1` } }] }],
    };
    // 8 completions back to back: at 2 a second some are refused wherever the windows turn (a window
    // may turn between two calls on a loaded machine, so the 429 is looked for, not placed).
    const answers = [];
    for (let i = 0; i < 8; i++) answers.push(await call(s.url, 'POST', '/v1beta/chat/completions', { body }));
    const ok = answers.find((a) => a.status === 200)!;
    expect(ok.headers.get('x-ratelimit-limit')).toBe('2');
    expect(ok.headers.get('x-ratelimit-remaining')).toMatch(/^[01]$/);
    expect(ok.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
    const limited = answers.find((a) => a.status === 429)!;
    expect(limited).toBeDefined();
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    await call(s.url, 'DELETE', `/v1beta/streams/${id}`);
  });
});

describe('passthrough against scripted upstreams', () => {
  let up: RawUpstream;
  /** A 1 s silence limit (the timeout tests). */
  let gw: RunningGateway;
  /**
   * A silence limit no test reaches: what closes an upstream request through it within the bounds
   * below is the client, never the timeout, whatever a loaded machine does to the timing.
   */
  let patient: RunningGateway;
  /**
   * A 2.5 s silence limit, for traffic that lasts longer than it with gaps far shorter (400–450 ms):
   * a loaded machine's pause of a second or two still leaves every gap under the limit.
   */
  let roomy: RunningGateway;
  let handler: http.RequestListener = () => undefined;
  beforeAll(async () => {
    up = await startRawUpstream((req, res) => handler(req, res));
    gw = await gatewayOn(up.url, { requestTimeoutMs: 1000 });
    patient = await gatewayOn(up.url, { requestTimeoutMs: 120_000 });
    roomy = await gatewayOn(up.url, { requestTimeoutMs: 2500 });
  });
  afterAll(async () => {
    await gw.close();
    await patient.close();
    await roomy.close();
    await up.close();
  });

  /** A passthrough outcome's count on `g` (`gateway_passthrough_requests_total`). */
  const outcomes = async (g: RunningGateway, outcome: string) =>
    Number(
      new RegExp(`^gateway_passthrough_requests_total\\{prefix="v1beta",outcome="${outcome}"\\} (\\d+)$`, 'm').exec(
        await g.gateway.metrics.text(),
      )?.[1] ?? 0,
    );

  test('method, raw path, query, end-to-end headers and body arrive unchanged; hop-by-hop headers do not', async () => {
    let seen: { method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string } | undefined;
    handler = (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen = { method: req.method, url: req.url, headers: req.headers, body };
        res.writeHead(207, {
          'content-type': 'application/json',
          'x-svc-region': 'us-west1',
          'x-upstream': 'yes',
          'keep-alive': 'timeout=99',
          connection: 'keep-alive, x-private',
          'x-private': 'hop',
        });
        res.end('{"ok":true}');
      });
    };
    const payload = '{"model":"local/analyzer","messages":[]}';
    const r = await rawRequest(gw.url, {
      method: 'PATCH',
      path: '/billing/pricing/local/analyzer/v2%2F1?a=1&a=2&b=%20x',
      headers: {
        authorization: 'Bearer svc-abc',
        'x-svc-region': 'us-central1',
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(payload)),
        'x-custom': 'kept',
        connection: 'keep-alive, x-drop-me',
        'x-drop-me': 'dropped',
        'keep-alive': 'timeout=5',
        te: 'trailers',
        'proxy-authorization': 'Basic Zm9vOmJhcg==',
      },
      body: payload,
    });
    expect(r.status).toBe(207);
    expect(r.body).toBe('{"ok":true}');
    expect(seen).toMatchObject({ method: 'PATCH', url: '/billing/pricing/local/analyzer/v2%2F1?a=1&a=2&b=%20x', body: payload });
    expect(seen!.headers).toMatchObject({
      authorization: 'Bearer svc-abc',
      'x-svc-region': 'us-central1',
      'content-type': 'application/json',
      'x-custom': 'kept',
    });
    for (const h of ['x-drop-me', 'te', 'proxy-authorization']) expect(seen!.headers[h]).toBeUndefined();
    expect(r.headers['x-svc-region']).toBe('us-west1');
    expect(r.headers['x-upstream']).toBe('yes');
    expect(r.headers['x-private']).toBeUndefined();
    expect(r.headers['keep-alive']).not.toBe('timeout=99');
    expect(r.headers['x-request-id']).toEqual(expect.any(String));
    // `base + path` clients produce double slashes: they are folded in the path, never in the query.
    await rawRequest(gw.url, { path: '//v1beta//models?q=a//b' });
    expect(seen!.url).toBe('/v1beta/models?q=a//b');
  });

  test('SSE streams chunk by chunk with the openai client: the first chunk arrives while the upstream holds the rest', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const chunk = (content: string, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;
    handler = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(chunk('first '));
      // The rest only after the client has shown it received the first chunk: a buffering proxy deadlocks here.
      void released.then(() => {
        res.write(chunk('second', 'stop'));
        res.end('data: [DONE]\n\n');
      });
    };
    const client = new OpenAI({ baseURL: `${gw.url}/v1beta`, apiKey: KEY, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const received: string[] = [];
    await deadline(
      (async () => {
        for await (const c of stream) {
          received.push(c.choices[0]!.delta.content ?? '');
          if (received.length === 1) release();
        }
      })(),
      10_000,
      'SSE stream',
    );
    expect(received).toEqual(['first ', 'second']);
  });

  test('a client leaving mid-stream aborts the upstream request', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    handler = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[]}\n\n');
      res.on('close', () => upstreamClosed());
    };
    const abort = new AbortController();
    const aborts = await outcomes(patient, 'client_abort');
    const res = await fetch(`${patient.url}/v1beta/chat/completions`, { method: 'POST', body: '{}', signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    await deadline(closed, 10_000, 'upstream close after client abort');
    expect(await outcomes(patient, 'client_abort')).toBe(aborts + 1);
  });

  test('a client leaving before the upstream answers aborts the upstream request', async () => {
    /** The upstream holds each request until the test answers it; it reports arrival and close. */
    const held = () => {
      let arrived!: (answer: () => void) => void;
      let upstreamClosed!: (answered: boolean) => void;
      const reached = new Promise<() => void>((r) => (arrived = r));
      const closed = new Promise<boolean>((r) => (upstreamClosed = r));
      handler = (req, res) => {
        req.resume();
        res.on('close', () => upstreamClosed(res.writableFinished));
        arrived(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
      };
      return { reached, closed };
    };
    const aborts = await outcomes(patient, 'client_abort');

    // The control: the same request, answered, completes; the upstream's side closes only after its answer.
    const control = held();
    const answered = fetch(`${patient.url}/v1beta/chat/completions`, { method: 'POST', body: '{"model":"m"}' });
    const answer = await deadline(control.reached, 10_000, 'the control reaches the upstream');
    answer();
    expect(await (await answered).json()).toEqual({ ok: true });
    expect(await deadline(control.closed, 10_000, 'the control ends upstream')).toBe(true);

    // Aborted once the request reached the upstream: the upstream sees it close unanswered.
    const aborted = held();
    const abort = new AbortController();
    const pending = fetch(`${patient.url}/v1beta/chat/completions`, { method: 'POST', body: '{"model":"m"}', signal: abort.signal });
    await deadline(aborted.reached, 10_000, 'the request reaches the upstream');
    abort.abort();
    await expect(pending).rejects.toThrow();
    expect(await deadline(aborted.closed, 10_000, 'upstream close after client abort')).toBe(false);
    expect(await outcomes(patient, 'client_abort')).toBe(aborts + 1);
  });

  test('an upstream failing mid-stream ends the client stream (an error, never a hang)', async () => {
    handler = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'partial' }, finish_reason: null }] })}\n\n`,
      );
      setTimeout(() => res.socket?.destroy(), 50);
    };
    const client = new OpenAI({ baseURL: `${gw.url}/v1beta`, apiKey: KEY, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const got: string[] = [];
    const outcome = await deadline(
      (async () => {
        try {
          for await (const c of stream) got.push(c.choices[0]!.delta.content ?? '');
          return 'ended';
        } catch {
          return 'error';
        }
      })(),
      10_000,
      'client stream after upstream failure',
    );
    expect(got).toEqual(['partial']);
    expect(outcome).toBe('error');
  });

  test('an upstream silent past the timeout → 504 {detail}, and the upstream request is dropped', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    handler = (req, res) => {
      req.resume();
      res.on('close', () => upstreamClosed());
    };
    const t0 = Date.now();
    const r = await deadline(rawRequest(gw.url, { path: '/v1beta/models' }), 10_000, 'timed-out request');
    expect(r.status).toBe(504);
    expect(JSON.parse(r.body)).toEqual({ detail: expect.stringMatching(/timed out/i) });
    expect(r.headers['x-request-id']).toEqual(expect.any(String));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    await deadline(closed, 10_000, 'upstream close after timeout');
    const metrics = await gw.gateway.metrics.text();
    expect(metrics).toMatch(/^gateway_passthrough_requests_total\{prefix="v1beta",outcome="upstream_timeout"\} 1$/m);
    expect(metrics).toMatch(/^gateway_http_requests_total\{method="GET",route="\/v1beta\/models",status="504"\} 1$/m);
  });

  test('the timeout is silence, not duration: a stream whose chunks come more often than it lasts past it', async () => {
    handler = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let n = 0;
      const beat = setInterval(() => {
        res.write(`data: ${n}\n\n`);
        if (++n === 10) {
          clearInterval(beat);
          res.end();
        }
      }, 400); // 10 × 400 ms = 4 s in all against a 2.5 s silence limit
      res.on('close', () => clearInterval(beat));
    };
    const res = await fetch(`${roomy.url}/v1beta/chat/completions`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(200);
    const text = await deadline(res.text(), 15_000, 'steady stream');
    expect(text.match(/^data: \d+$/gm)).toEqual(Array.from({ length: 10 }, (_, i) => `data: ${i}`));
  });

  test('a slow upload is activity too: a body sent in pieces over longer than the timeout arrives whole', async () => {
    handler = (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end(body));
    };
    const pieces = ['{"a":', '1,', '"b":', '2,', '"c":', '3,', '"d":', '4}'];
    const r = await deadline(
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const u = new URL(`${roomy.url}/v1beta/chat/completions`);
        const req = http.request(
          { hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'transfer-encoding': 'chunked' } },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        let i = 0;
        const next = () => {
          if (i === pieces.length) return void req.end();
          req.write(pieces[i++]);
          setTimeout(next, 450); // 8 pieces, 3.6 s in all against a 2.5 s silence limit
        };
        next();
      }),
      15_000,
      'slow upload',
    );
    expect(r).toEqual({ status: 200, body: '{"a":1,"b":2,"c":3,"d":4}' });
  });

  test('an upstream that goes silent mid-stream is cut after the timeout', async () => {
    handler = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {}\n\n');
    };
    const res = await fetch(`${gw.url}/v1beta/chat/completions`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(200);
    await expect(deadline(res.text(), 10_000, 'stalled stream')).rejects.toThrow(/terminated|aborted|socket/i);
  });
});

describe('passthrough with the upstream down', () => {
  test('unreachable upstream → 502 {detail} at once', async () => {
    const up = await startRawUpstream(() => undefined);
    const deadUrl = up.url;
    await closeServer(up.server);
    const gw = await gatewayOn(deadUrl);
    try {
      // "At once": one attempt per request (the error count below), no retries or waits; the
      // bound turns a hang into a failure without timing a loaded machine.
      await deadline(
        (async () => {
          for (const path of ['/v1beta/models', '/billing/pricing/local/analyzer']) {
            const r = await call(gw.url, 'GET', path);
            expect(r.status).toBe(502);
            expect(r.body).toEqual({ detail: 'Upstream unreachable' });
            expect(r.headers.get('x-request-id')).toEqual(expect.any(String));
          }
          const post = await call(gw.url, 'POST', '/v1beta/chat/completions', { body: { model: 'x', messages: [] } });
          expect(post.status).toBe(502);
        })(),
        10_000,
        'answers from an unreachable upstream',
      );
      const metrics = await gw.gateway.metrics.text();
      expect(metrics).toMatch(/^gateway_passthrough_requests_total\{prefix="v1beta",outcome="upstream_unreachable"\} 2$/m);
      expect(metrics).toMatch(/^gateway_upstream_errors_total\{source="passthrough",status="0"\} 3$/m);
    } finally {
      await gw.close();
    }
  });
});

describe('the Express app alone (supertest): the passthrough is mounted ahead of the body parsers there too', () => {
  test('billing and stream endpoints, the region echo, a JSON body streamed through, and /v0.2 next to them', async () => {
    const s = await startStack();
    const gw = createGateway(s.cfg, createLogger('silent'), { upstreamUrl: s.emulator.url });
    try {
      const pricing = await request(gw.app).get('/billing/pricing/local/analyzer-mini').expect(200);
      expect(pricing.body).toMatchObject({ model: 'local/analyzer-mini' });
      expect(pricing.headers['x-request-id']).toEqual(expect.any(String));
      const created = await request(gw.app)
        .post('/v1beta/streams')
        .set('authorization', `Bearer ${KEY}`)
        .set('X-Svc-Region', 'us-west1')
        .send({})
        .expect(201);
      expect(created.headers['x-svc-region']).toBe('us-west1');
      const id = (created.body as { id: string }).id;
      // A body the emulator must parse itself: a malformed reference gives its 422, not the gateway's.
      const bad = await request(gw.app)
        .post('/v1beta/chat/completions')
        .set('authorization', `Bearer ${KEY}`)
        .send({
          model: 'local/analyzer',
          messages: [
            { role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=1&frame_index=2` } }] },
          ],
        })
        .expect(422);
      expect(bad.body).toMatchObject({ error: 'validation_error' });
      await request(gw.app).delete(`/v1beta/streams/${id}`).set('authorization', `Bearer ${KEY}`).expect(200, { id, deleted: true });
      const legacy = await request(gw.app).get('/v0.2/models').expect(200);
      expect(legacy.headers.deprecation).toMatch(/^@\d+$/);
      expect(await request(gw.app).get('/nope').expect(404)).toMatchObject({ body: { detail: expect.any(String) } });
    } finally {
      await gw.close();
      await s.close();
    }
  });
});
