import type { ServerResponse } from 'node:http';
import { deadline, until } from '../helpers/time';
import Ajv from 'ajv';
import { randomUUID } from 'node:crypto';
import type { EmulatedStream } from '../../src/emulator/streams';
import { startHarness } from './harness';
import type { Harness } from './harness';

const DEV = 'svc-local-dev';
const DEV2 = 'svc-local-dev2';
const BROKE = 'svc-local-broke';
const REVOKED = 'svc-local-revoked';
const TAIL_RE = /\[frames=(\d+) index=(\d+)\.\.(\d+) span_ms=(\d+) pattern=(\d+)\.\.(\d+)\]/g;

type Json = Record<string, any>;

interface Reply {
  status: number;
  headers: Headers;
  body: Json;
}

let h: Harness;
let stream: EmulatedStream;

beforeAll(async () => {
  h = await startHarness();
  stream = h.addStream(DEV);
  await h.publish(stream, 50, { fps: 10 });
});
afterAll(async () => {
  await h.close();
});

async function post(body: unknown, key: string | null = DEV, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(`${h.url}/v1beta/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}

async function balance(key = DEV): Promise<number> {
  const res = await fetch(`${h.url}/billing/accounts/me/balance`, { headers: { authorization: `Bearer ${key}` } });
  return ((await res.json()) as Json).balance_microcents as number;
}

const text = (t: string) => ({ type: 'text', text: t });
const image = (id: string, q: string) => ({ type: 'image_url', image_url: { url: `svc://streams/${id}?${q}` } });
const video = (id: string, q: string) => ({ type: 'video_url', video_url: { url: `svc://streams/${id}?${q}` } });
const ask = (parts: unknown[], extra: Json = {}) => ({ model: 'local/analyzer', messages: [{ role: 'user', content: parts }], ...extra });
const tails = (content: string) => [...content.matchAll(TAIL_RE)].map((m) => m.slice(1, 7).map(Number));

describe('authentication', () => {
  it.each([
    ['missing', null],
    ['unknown', 'svc-nope'],
    ['revoked', REVOKED],
  ])('401 for a %s key, in the {detail} shape', async (_name, key) => {
    const r = await post(ask([text('hi')]), key);
    expect(r.status).toBe(401);
    expect(typeof r.body.detail).toBe('string');
  });
});

describe('request validation (422, validation shape)', () => {
  const cases: [string, unknown, string[]][] = [
    ['missing model', { messages: [{ role: 'user', content: 'hi' }] }, ['body', 'model']],
    ['empty model', { model: '', messages: [{ role: 'user', content: 'hi' }] }, ['body', 'model']],
    ['missing messages', { model: 'local/analyzer' }, ['body', 'messages']],
    ['empty messages', { model: 'local/analyzer', messages: [] }, ['body', 'messages']],
    ['bad role', { model: 'local/analyzer', messages: [{ role: 'robot', content: 'hi' }] }, ['body', 'messages', '0', 'role']],
    ['missing content', { model: 'local/analyzer', messages: [{ role: 'user' }] }, ['body', 'messages', '0', 'content']],
    ['numeric content', { model: 'local/analyzer', messages: [{ role: 'user', content: 5 }] }, ['body', 'messages', '0', 'content']],
    ['unknown part type', ask([{ type: 'input_audio', input_audio: {} }]), ['body', 'messages', '0', 'content', '0', 'type']],
    ['image part without url', ask([{ type: 'image_url', image_url: {} }]), ['body', 'messages', '0', 'content', '0', 'image_url', 'url']],
    ['max_completion_tokens 0', ask([text('hi')], { max_completion_tokens: 0 }), ['body', 'max_completion_tokens']],
    ['max_completion_tokens fractional', ask([text('hi')], { max_completion_tokens: 1.5 }), ['body', 'max_completion_tokens']],
    ['max_tokens as string', ask([text('hi')], { max_tokens: '5' }), ['body', 'max_tokens']],
    ['stream not boolean', ask([text('hi')], { stream: 'yes' }), ['body', 'stream']],
    ['bad response_format type', ask([text('hi')], { response_format: { type: 'xml' } }), ['body', 'response_format', 'type']],
    [
      'json_schema without schema',
      ask([text('hi')], { response_format: { type: 'json_schema', json_schema: { name: 'x' } } }),
      ['body', 'response_format', 'json_schema', 'schema'],
    ],
    ['per-frame budget 0', ask([text('hi')], { tokens_per_frame: 0 }), ['body', 'tokens_per_frame']],
    ['empty thread_id', ask([text('hi')], { thread_id: '' }), ['body', 'thread_id']],
    [
      'video reference under image_url',
      ask([text('hi'), image(randomUUID(), 'start_offset_ms=-1000')]),
      ['body', 'messages', '0', 'content', '1', 'image_url', 'url'],
    ],
    [
      'image reference under video_url',
      ask([text('hi'), video(randomUUID(), 'frame_index=-1')]),
      ['body', 'messages', '0', 'content', '1', 'video_url', 'url'],
    ],
    [
      'repeated key',
      ask([text('hi'), image(randomUUID(), 'frame_index=1&frame_index=2')]),
      ['body', 'messages', '0', 'content', '1', 'image_url', 'url'],
    ],
    [
      'two start anchors',
      ask([video(randomUUID(), 'start_offset_ms=-1&start_frame_index=2')]),
      ['body', 'messages', '0', 'content', '0', 'video_url', 'url'],
    ],
    ['non-UUID stream', ask([image('abc', 'frame_index=1')]), ['body', 'messages', '0', 'content', '0', 'image_url', 'url']],
    [
      'wrong scheme',
      ask([{ type: 'image_url', image_url: { url: 'https://example.com/a.jpg' } }]),
      ['body', 'messages', '0', 'content', '0', 'image_url', 'url'],
    ],
    ['body is an array', [1, 2], ['body']],
  ];

  it.each(cases)('%s', async (_name, body, loc) => {
    const r = await post(body);
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: 'validation_error', message: expect.any(String) });
    expect(r.body.details.map((d: Json) => d.loc)).toContainEqual(loc);
    for (const d of r.body.details) expect(d).toEqual({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
  });

  it('accepts unknown fields and OpenAI extras', async () => {
    const r = await post(
      ask([text('hi'), image(stream.id, 'frame_index=-1&')], {
        temperature: 0.2,
        seed: 7,
        user: 'u1',
        metadata: { a: 1 },
        n: 1,
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
        tool_choice: 'auto',
        parallel_tool_calls: false,
        max_tokens: null,
        future_field: { nested: [1, 2] },
      }),
    );
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.tool_calls).toEqual([]);
  });

  it('400 for a body that is not JSON', async () => {
    const r = await post('{"model": ');
    expect(r.status).toBe(400);
  });
});

describe('models', () => {
  it('404 model_not_found for an unknown model, in the stream error shape', async () => {
    const r = await post({ ...ask([text('hi')]), model: 'local/nope' });
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ detail: { error: { message: expect.any(String), type: 'stream_error', code: 'model_not_found' } } });
  });

  it('503 model_unavailable for a listed model that is not ready, until it is', async () => {
    const r = await post({ ...ask([text('hi')]), model: 'local/offline' });
    expect(r.status).toBe(503);
    expect(r.body.detail.error.code).toBe('model_unavailable');
    h.ctx.models.setStatus('local/analyzer-mini', 'unavailable');
    expect((await post({ ...ask([text('hi')]), model: 'local/analyzer-mini' })).status).toBe(503);
    h.ctx.models.setStatus('local/analyzer-mini', 'ready');
    expect((await post({ ...ask([text('hi')]), model: 'local/analyzer-mini' })).status).toBe(200);
  });
});

describe('references resolved by the built-in model', () => {
  it('names the right frames of a start_offset_ms=-2000 window (1 fps source)', async () => {
    const s = h.addStream(DEV);
    const frames = await h.publish(s, 6, { fps: 1 });
    const last = frames.at(-1)!.index;
    const r = await post(ask([text('What happens?'), video(s.id, 'start_offset_ms=-2000')]));
    expect(r.status).toBe(200);
    expect(tails(r.body.choices[0].message.content)).toEqual([[2, last - 1, last, 1000, last - 1, last]]);
  });

  it('names the right frames of a start_offset_ms=-2000 window at max_fps=2 (2 fps source)', async () => {
    const s = h.addStream(DEV);
    const frames = await h.publish(s, 12, { fps: 2 });
    const last = frames.at(-1)!.index;
    const r = await post(ask([text('What happens?'), video(s.id, 'start_offset_ms=-2000&max_fps=2')]));
    expect(tails(r.body.choices[0].message.content)).toEqual([[4, last - 3, last, 1500, last - 3, last]]);
  });

  it('keeps several streams as separate visual contexts in one request', async () => {
    const a = h.addStream(DEV);
    const b = h.addStream(DEV);
    await h.publish(a, 20, { fps: 10 });
    await h.publish(b, 5, { fps: 10 });
    const r = await post(
      ask([text('Compare.'), image(a.id, 'frame_index=7'), video(b.id, 'start_frame_index=0&max_fps=10'), image(a.id, 'frame_index=-1')]),
    );
    expect(r.status).toBe(200);
    expect(tails(r.body.choices[0].message.content)).toEqual([
      [1, 7, 7, 0, 7, 7],
      [5, 0, 4, 400, 0, 4],
      [1, 19, 19, 0, 19, 19],
    ]);
    expect(r.body.usage.prompt_tokens).toBe(Math.ceil('Compare.'.length / 4) + 7 * 256);
  });

  it('404 stream_not_found for an unknown, a deleted and an expired stream; 403 for another account', async () => {
    const gone = h.addStream(DEV);
    await h.publish(gone, 3);
    h.ctx.streams.end(gone, 'deleted');
    const expired = h.addStream(DEV);
    await h.publish(expired, 3);
    h.ctx.streams.end(expired, 'expired');
    for (const id of [randomUUID(), gone.id, expired.id]) {
      const r = await post(ask([text('hi'), image(id, 'frame_index=-1')]));
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ detail: { error: { message: expect.any(String), type: 'stream_error', code: 'stream_not_found' } } });
    }
    const other = h.addStream(DEV2);
    await h.publish(other, 3);
    expect((await post(ask([image(other.id, 'frame_index=-1')]))).status).toBe(403);
    expect((await post(ask([image(other.id, 'frame_index=-1')]), DEV2)).status).toBe(200);
  });

  it('422 frame errors in the stream shape: future index, no frame yet (rule 6)', async () => {
    const fresh = h.addStream(DEV);
    const before = await balance();
    for (const [s, q, code] of [
      [stream, 'frame_index=100000', 'frame_not_yet_produced'],
      [fresh, 'frame_index=-1', 'frame_not_yet_produced'],
      [stream, 'timestamp_ms=50&tolerance_ms=1', 'frame_not_yet_produced'],
    ] as const) {
      const r = await post(ask([image(s.id, q)]));
      expect(r.status).toBe(422);
      expect(r.body.detail.error).toMatchObject({ type: 'stream_error', code });
    }
    const r = await post(ask([video(fresh.id, 'start_offset_ms=-5000')]));
    expect([r.status, r.body.detail.error.code]).toEqual([422, 'frame_not_yet_produced']);
    expect(await balance()).toBe(before);
  });

  it('clamps indices older than the buffer after eviction', async () => {
    const small = await startHarness({ emulator: { frameRetentionSeconds: 2 } });
    try {
      const s = small.addStream(DEV);
      await small.publish(s, 40, { fps: 10 }); // 4 s published, ~2 s retained
      const res = await fetch(`${small.url}/v1beta/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${DEV}` },
        body: JSON.stringify(ask([image(s.id, 'frame_index=0'), video(s.id, 'start_frame_index=0&end_frame_index=5')])),
      });
      const body = (await res.json()) as Json;
      const got = tails(body.choices[0].message.content);
      expect(got).toHaveLength(2);
      const [imageIndex, videoStart, videoEnd] = [got[0]![1]!, got[1]![1]!, got[1]![2]!];
      // both clamp up to the oldest frame retained at request time
      expect([videoStart, videoEnd]).toEqual([imageIndex, imageIndex]);
      expect(imageIndex).toBeGreaterThan(10);
      expect(imageIndex).toBeLessThanOrEqual(s.frames.oldestFrame!.index);
    } finally {
      await small.close();
    }
  });
});

describe('usage and billing', () => {
  it('bills prompt and completion tokens exactly, with a new id and a new charge per call', async () => {
    const prompt = 'Describe the scene in one sentence please.'; // 42 chars → 11 tokens
    const body = ask([text(prompt), video(stream.id, 'start_frame_index=0&end_frame_index=29&max_fps=1')]);
    const ids = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const before = await balance();
      const r = await post(body);
      expect(r.status).toBe(200);
      const content: string = r.body.choices[0].message.content;
      const usage = { prompt_tokens: 11 + 3 * 256, completion_tokens: Math.ceil(content.length / 4) };
      expect(r.body.usage).toEqual({ ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens });
      expect(r.body).not.toHaveProperty('svc');
      expect(before - (await balance())).toBe(usage.prompt_tokens * 10 + usage.completion_tokens * 40);
      expect(r.body).toMatchObject({ object: 'chat.completion', model: 'local/analyzer', created: expect.any(Number) });
      expect(r.body.choices[0]).toMatchObject({ index: 0, finish_reason: 'stop', message: { role: 'assistant' } });
      ids.add(r.body.id);
      expect(r.body.id).toMatch(/^chatcmpl-/);
    }
    expect(ids.size).toBe(2);
  });

  it('takes the per-frame token budget from the configured request field', async () => {
    const r = await post(ask([text('abcd'), video(stream.id, 'start_frame_index=0&end_frame_index=29')], { tokens_per_frame: 70 }));
    expect(r.body.usage.prompt_tokens).toBe(1 + 3 * 70);
  });

  it('402 billing_denied for a broke account, and mid-use once the balance is spent', async () => {
    const r = await post(ask([text('hi')]), BROKE);
    expect(r.status).toBe(402);
    expect(r.body).toEqual({ detail: { error: { message: expect.any(String), type: 'stream_error', code: 'billing_denied' } } });

    const acct = h.ctx.accounts.authenticate(`Bearer ${DEV2}`);
    const s = h.addStream(DEV2);
    await h.publish(s, 5);
    const req = ask([text('hi'), image(s.id, 'frame_index=-1')]);
    expect((await post(req, DEV2)).status).toBe(200);
    h.ctx.accounts.setBalance(acct.id, 0);
    expect((await post(req, DEV2)).status).toBe(402);
    // 1 + 256 input tokens at 10 µ¢ = 2570 µ¢: a balance of 2000 cannot pay the input
    h.ctx.accounts.setBalance(acct.id, 2000);
    const denied = await post(req, DEV2);
    expect([denied.status, denied.body.detail.error.code]).toEqual([402, 'billing_denied']);
    expect(await balance(DEV2)).toBe(2000);
    h.ctx.accounts.setBalance(acct.id, 2570);
    expect((await post(req, DEV2)).status).toBe(200);
    expect(await balance(DEV2)).toBe(0); // the output cost takes it to zero, never below
    h.ctx.accounts.setBalance(acct.id, 1_000_000_000);
  });
});

describe('prompt cache (thread_id)', () => {
  it('hits on the second call of a thread with the same leading content, billed at the cached price', async () => {
    const thread = `t-${randomUUID()}`;
    const lead = 'You watch a test pattern. Answer briefly.'; // 41 chars
    const first = await post(ask([text(lead), image(stream.id, 'frame_index=10')], { thread_id: thread }));
    expect(first.body.svc).toEqual({ cache: { thread_id: thread, cache_hit: false, cached_input_tokens: 0 } });

    const before = await balance();
    const second = await post(ask([text(lead), image(stream.id, 'frame_index=10'), text('And now?')], { thread_id: thread }));
    const cached = Math.ceil(41 / 4) + 256;
    const promptTokens = Math.ceil(49 / 4) + 256;
    expect(second.body.usage.prompt_tokens).toBe(promptTokens);
    expect(second.body.svc).toEqual({ cache: { thread_id: thread, cache_hit: true, cached_input_tokens: cached } });
    const out = second.body.usage.completion_tokens as number;
    expect(before - (await balance())).toBe((promptTokens - cached) * 10 + cached * 2 + out * 40);
  });

  it('misses across threads, models, accounts, and when the leading content changes', async () => {
    const thread = `t-${randomUUID()}`;
    const body = ask([text('Same lead text here.'), image(stream.id, 'frame_index=3')], { thread_id: thread });
    expect((await post(body)).body.svc.cache.cache_hit).toBe(false);
    expect((await post(body)).body.svc.cache.cache_hit).toBe(true);
    expect((await post({ ...body, thread_id: `${thread}-x` })).body.svc.cache.cache_hit).toBe(false);
    expect((await post({ ...body, model: 'local/analyzer-mini' })).body.svc.cache.cache_hit).toBe(false);
    const textOnly = ask([text('A text-only lead.')], { thread_id: thread });
    expect((await post(textOnly)).body.svc.cache.cache_hit).toBe(false);
    expect((await post(textOnly)).body.svc.cache.cache_hit).toBe(true);
    expect((await post(textOnly, DEV2)).body.svc.cache.cache_hit).toBe(false);
    const changed = await post(ask([text('Other lead text.'), image(stream.id, 'frame_index=3')], { thread_id: thread }));
    expect(changed.body.svc.cache).toEqual({ thread_id: thread, cache_hit: false, cached_input_tokens: 0 });
    // same text, other frame: only the text is cached
    const otherFrame = await post(ask([text('Other lead text.'), image(stream.id, 'frame_index=4')], { thread_id: thread }));
    expect(otherFrame.body.svc.cache.cached_input_tokens).toBe(Math.ceil('Other lead text.'.length / 4));
  });
});

describe('output controls', () => {
  it('max_completion_tokens (and max_tokens) truncate with finish_reason length', async () => {
    for (const field of ['max_completion_tokens', 'max_tokens']) {
      const r = await post(ask([text('Describe.'), video(stream.id, 'start_offset_ms=0')], { [field]: 5 }));
      expect(r.status).toBe(200);
      expect(r.body.choices[0].finish_reason).toBe('length');
      expect(r.body.choices[0].message.content.length).toBeLessThanOrEqual(20);
      expect(r.body.usage.completion_tokens).toBe(5);
    }
    const roomy = await post(ask([text('Describe.')], { max_completion_tokens: 10_000 }));
    expect(roomy.body.choices[0].finish_reason).toBe('stop');
  });

  it('json_schema output validates against the schema (ajv); json_object is JSON', async () => {
    const schema = {
      type: 'object',
      properties: {
        frame_count: { type: 'integer', minimum: 0 },
        dominant_colour: { type: 'string' },
        moving: { type: 'boolean' },
        summary: { type: 'string' },
      },
      required: ['frame_count', 'dominant_colour', 'moving', 'summary'],
      additionalProperties: false,
    };
    const r = await post(
      ask([text('Report.'), video(stream.id, 'start_offset_ms=-3000')], {
        response_format: { type: 'json_schema', json_schema: { name: 'report', schema, strict: true } },
      }),
    );
    expect(r.status).toBe(200);
    const validate = new Ajv().compile(schema);
    const parsed: unknown = JSON.parse(r.body.choices[0].message.content);
    expect(validate.errors ?? validate(parsed)).toBe(true);

    const o = await post(ask([text('Report.'), image(stream.id, 'frame_index=-1')], { response_format: { type: 'json_object' } }));
    expect(typeof JSON.parse(o.body.choices[0].message.content)).toBe('object');
    const t = await post(ask([text('Report.')], { response_format: { type: 'text' } }));
    expect(t.status).toBe(200);
  });
});

describe('fault injection', () => {
  afterEach(() => h.ctx.faults.clear());

  it('answers an armed status with the stream shape and retry-after, then recovers; no charge', async () => {
    h.ctx.faults.add({ model: 'local/analyzer', count: 1, status: 503, retryAfterSeconds: 2 });
    const before = await balance();
    const r = await post(ask([text('hi')]));
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('2');
    expect(r.body.detail.error).toMatchObject({ type: 'stream_error', code: 'model_unavailable' });
    expect(await balance()).toBe(before);
    expect((await post(ask([text('hi')]))).status).toBe(200);
  });

  it('applies to the named model only, with a custom code', async () => {
    h.ctx.faults.add({ model: 'local/analyzer-mini', count: 1, status: 500, code: 'upstream_http_500' });
    expect((await post(ask([text('hi')]))).status).toBe(200);
    const r = await post({ ...ask([text('hi')]), model: 'local/analyzer-mini' });
    expect([r.status, r.body.detail.error.code]).toEqual([500, 'upstream_http_500']);
  });

  it('adds latency', async () => {
    h.ctx.faults.add({ model: '*', count: 1, latencyMs: 300 });
    const t = Date.now();
    expect((await post(ask([text('hi')]))).status).toBe(200);
    expect(Date.now() - t).toBeGreaterThanOrEqual(290);
  });

  it('resets the connection without an answer', async () => {
    h.ctx.faults.add({ model: '*', count: 1, reset: true });
    await expect(post(ask([text('hi')]))).rejects.toThrow();
    expect((await post(ask([text('hi')]))).status).toBe(200);
  });

  it('stops work and charges nothing when the client goes away', async () => {
    // Ordered by events, not timed: the client leaves while its request waits out an injected
    // latency; then the same request, not aborted, waits out the same latency and completes. Waits
    // of one length end in the order they began, so work resumed after the first wait would have
    // reached the model before the second's. The latency only has to outlast the close's way to
    // the emulator (a hang-sized margin).
    const latencyMs = 3000;
    const body = JSON.stringify(ask([text('hi'), image(stream.id, 'frame_index=-1')]));
    const modelLookups = jest.spyOn(h.ctx.models, 'get');
    const charges = jest.spyOn(h.ctx.accounts, 'charge');
    try {
      h.ctx.faults.add({ model: '*', count: 1, latencyMs });
      const before = await balance();
      let sawClose!: () => void;
      const emulatorSawClose = new Promise<void>((resolve) => (sawClose = resolve));
      h.server.once('request', (_req, res: ServerResponse) => res.once('close', () => sawClose()));
      const ac = new AbortController();
      const pending = fetch(`${h.url}/v1beta/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${DEV}` },
        body,
        signal: ac.signal,
      });
      // The request took its fault: it reached the emulator and is in its wait.
      await deadline(
        until(() => h.ctx.faults.list().length === 0, 10),
        10_000,
        'the request reaches the emulator',
      );
      ac.abort();
      await expect(pending).rejects.toThrow();
      await deadline(emulatorSawClose, 10_000, 'the emulator sees the client go');

      // The control: the same request, not aborted, is answered and charged.
      h.ctx.faults.add({ model: '*', count: 1, latencyMs });
      expect((await post(JSON.parse(body))).status).toBe(200);
      expect(modelLookups).toHaveBeenCalledTimes(1);
      expect(charges).toHaveBeenCalledTimes(1);
      expect(await balance()).toBeLessThan(before);
    } finally {
      modelLookups.mockRestore();
      charges.mockRestore();
    }
  }, 30_000);
});
