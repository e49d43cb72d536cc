/**
 * Reinfer (`POST /v0.2/chat/completions/clip`) and the health check under the legacy base, on real
 * sockets against the emulator: a re-run sees the frames of the original result (the emulator's
 * built-in model names the frame indices it was given: both ends agree within one frame), for clip
 * and frame results, with an output schema; another account's key and an unknown id get the same
 * 404; a result of a deleted stream, or one whose frames aged out, gets a 410 (not retried).
 */
import { costMicrocents } from '../../../src/lib/wire';
import type { ModelPricing, TokenUsage } from '../../../src/lib/wire';
import { KEY, http, KEY_B, clipBody, frameBody, reinfer, startStack, tail } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';
import { deadline, sleep } from '../../helpers/time';

const PATH = '/v0.2/chat/completions/clip';

async function createStream(url: string, body: unknown): Promise<string> {
  const created = await http(url, 'POST', '/v0.2/streams', { body });
  expect(created.status).toBe(201);
  return (created.body as { stream_id: string }).stream_id;
}

/** `n` ok results of a new stream (its socket closed after). */
async function resultsOf(url: string, id: string, n: number): Promise<Record<string, unknown>[]> {
  const sock = await openResults(url, id, KEY);
  try {
    const got = await deadline(sock.waitFor(n, 20_000), 25_000, `${n} results`);
    expect(got.every((m) => m.ok === true)).toBe(true);
    return got;
  } finally {
    sock.ws.close();
  }
}

const within1 = (a: number, b: number) => Math.abs(a - b) <= 1;

describe('reinfer on one gateway', () => {
  let s: Stack;
  beforeAll(async () => {
    // 4 fps: one frame is 250 ms, so "within one frame" holds however late a loaded machine
    // lets the upstream resolve a tick's window after it was sent.
    s = await startStack({ emulator: { autoPublish: { fps: 4 } } });
  });
  afterAll(() => s.close());

  test('clip results: the re-run sees the same window (first and last frame index within one frame)', async () => {
    const id = await createStream(s.url, clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }));
    const results = await resultsOf(s.url, id, 4);
    for (const r of results) {
      // A longer answer than the stream's 64-token cap: the prose echoes the prompt.
      const res = await reinfer(s.url, { result_id: r.id, prompt: 'What moved?', model: 'local/analyzer', max_tokens: 400 });
      expect(res.status).toBe(200);
      const body = res.body as {
        id: string;
        model: string;
        content: string;
        finish_reason: string | null;
        usage: Record<string, number> | null;
      };
      expect(body).toEqual({
        id: expect.any(String),
        model: 'local/analyzer',
        content: expect.any(String),
        finish_reason: 'stop',
        usage: expect.any(Object),
      });
      expect(body.id).not.toBe(r.id);
      expect(body.content).toContain('What moved?');
      expect(body.usage!.total_tokens).toBeGreaterThan(0);
      const [was, now] = [tail(r.result as string), tail(body.content)];
      if (process.env.REINFER_LOG)
        process.stdout.write(`clip ${was.first}..${was.last} (${was.frames}) → ${now.first}..${now.last} (${now.frames})\n`);
      expect({ first: within1(was.first, now.first), last: within1(was.last, now.last) }).toEqual({ first: true, last: true });
    }
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  }, 60_000);

  test('frame results: the re-run sees the same frame (within one)', async () => {
    const id = await createStream(s.url, frameBody({ interval_seconds: 0.5 }));
    const results = await resultsOf(s.url, id, 3);
    for (const r of results) {
      const res = await reinfer(s.url, { result_id: r.id, prompt: 'And now?', model: 'local/analyzer' });
      expect(res.status).toBe(200);
      const [was, now] = [tail(r.result as string), tail((res.body as { content: string }).content)];
      if (process.env.REINFER_LOG) process.stdout.write(`frame ${was.last} → ${now.last}\n`);
      expect(now.frames).toBe(1);
      expect(within1(was.last, now.last)).toBe(true);
    }
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  }, 60_000);

  test('output schema: the content is JSON of that schema, about the same frames; max_tokens and temperature accepted', async () => {
    const id = await createStream(s.url, clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }));
    const [r] = await resultsOf(s.url, id, 1);
    const schema = {
      type: 'object',
      properties: { first_index: { type: 'integer' }, last_index: { type: 'integer' }, frames: { type: 'integer' } },
      required: ['first_index', 'last_index', 'frames'],
      additionalProperties: false,
    };
    const res = await reinfer(s.url, {
      result_id: r!.id,
      prompt: 'Which frames?',
      model: 'local/analyzer',
      output_schema: schema,
      max_tokens: 200,
      temperature: 0.2,
    });
    expect(res.status).toBe(200);
    const answer = JSON.parse((res.body as { content: string }).content) as { first_index: number; last_index: number; frames: number };
    expect(Object.keys(answer).sort()).toEqual(['first_index', 'frames', 'last_index']);
    const was = tail(r!.result as string);
    expect(within1(answer.first_index, was.first) && within1(answer.last_index, was.last)).toBe(true);

    // An unusable schema is the caller's 422, at its own field.
    const bad = await http(s.url, 'POST', PATH, {
      body: { result_id: r!.id, prompt: 'x', model: 'local/analyzer', output_schema: { type: 'nope' } },
    });
    expect(bad.status).toBe(422);
    expect((bad.body as { details: { loc: string[] }[] }).details[0]!.loc).toEqual(['body', 'output_schema']);
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  }, 60_000);

  test("another account's key gets the 404 of an unknown id; bad bodies 422; unknown model 422", async () => {
    const id = await createStream(s.url, frameBody({ interval_seconds: 0.5 }));
    const [r] = await resultsOf(s.url, id, 1);
    expect((await reinfer(s.url, { result_id: r!.id, prompt: 'p', model: 'local/analyzer' })).status).toBe(200);

    const other = await http(s.url, 'POST', PATH, { key: KEY_B, body: { result_id: r!.id, prompt: 'p', model: 'local/analyzer' } });
    const unknown = await http(s.url, 'POST', PATH, {
      body: { result_id: '00000000-0000-8000-8000-000000000000', prompt: 'p', model: 'local/analyzer' },
    });
    expect(other.status).toBe(404);
    expect(unknown.status).toBe(404);
    const strip = (b: unknown) => ({ ...(b as Record<string, unknown>), request_id: null });
    expect(strip(other.body)).toEqual(strip(unknown.body));
    expect(other.body).toMatchObject({ error: 'result_not_found' });

    const missing = await http(s.url, 'POST', PATH, { body: { result_id: r!.id, model: 'local/analyzer' } });
    expect(missing.status).toBe(422);
    expect((missing.body as { details: { loc: string[] }[] }).details[0]!.loc).toEqual(['body', 'prompt']);
    const model = await http(s.url, 'POST', PATH, { body: { result_id: r!.id, prompt: 'p', model: 'nobody/none' } });
    expect(model.status).toBe(422);
    expect((model.body as { details: { loc: string[] }[] }).details[0]!.loc).toEqual(['body', 'model']);
    expect((await http(s.url, 'POST', PATH, { key: null, body: { result_id: r!.id, prompt: 'p', model: 'local/analyzer' } })).status).toBe(
      401,
    );

    // Counted as /v0.2 use.
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/gateway_legacy_requests_total\{endpoint="POST \/v0\.2\/chat\/completions\/clip"\} [1-9]/);
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  }, 60_000);

  test("it costs what a completion costs: the balance drops by its usage at the model's prices, and the stream's next keepalive reports it", async () => {
    // One result, then a minute without ticks: only the reinfer is billed in between.
    const id = await createStream(s.url, frameBody({ interval_seconds: 60 }));
    const [r] = await resultsOf(s.url, id, 1);
    const balance = async () =>
      ((await http(s.url, 'GET', '/billing/accounts/me/balance')).body as { balance_microcents: number }).balance_microcents;
    const keepaliveCost = async () =>
      ((await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`)).body as { cost_cents: number }).cost_cents;
    const price = (await http(s.url, 'GET', '/billing/pricing/local/analyzer', { key: null })).body as ModelPricing;
    expect(await keepaliveCost()).toBeGreaterThan(0); // the first tick's
    const before = await balance();
    const res = await reinfer(s.url, { result_id: r!.id, prompt: 'How much?', model: 'local/analyzer' });
    expect(res.status).toBe(200);
    const usage = (res.body as { usage: TokenUsage }).usage;
    expect(costMicrocents(price, usage)).toBeGreaterThan(0);
    expect(before - (await balance())).toBe(costMicrocents(price, usage));
    expect(await keepaliveCost()).toBeCloseTo(costMicrocents(price, usage) / 1_000_000, 9);
    expect(await keepaliveCost()).toBe(0);
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  }, 60_000);

  test('a result of a deleted stream: 410 clip_dropped, at once (no 404 for the client to retry)', async () => {
    const id = await createStream(s.url, clipBody());
    const [r] = await resultsOf(s.url, id, 1);
    expect((await reinfer(s.url, { result_id: r!.id, prompt: 'p', model: 'local/analyzer' })).status).toBe(200);
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
    const gone = await http(s.url, 'POST', PATH, { body: { result_id: r!.id, prompt: 'p', model: 'local/analyzer' } });
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({ error: 'clip_dropped', details: { reason: 'stream_ended' } });
    expect((gone.body as { message: string }).message).toMatch(/ended \(client_requested\) and its frames were dropped/);
  }, 60_000);

  test('/v0.2/healthz (and HEAD) answers as /healthz, with the same CORS', async () => {
    const origin = 'https://app.example.com';
    const [root, legacy] = await Promise.all(['/healthz', '/v0.2/healthz'].map((p) => fetch(`${s.url}${p}`, { headers: { origin } })));
    expect(legacy.status).toBe(200);
    expect(await legacy.text()).toBe(await root.text());
    for (const h of ['content-type', 'access-control-allow-origin', 'access-control-allow-credentials'])
      expect(legacy.headers.get(h)).toBe(root.headers.get(h));
    expect(legacy.headers.get('access-control-allow-origin')).toBe(origin);
    expect((await fetch(`${s.url}/v0.2/healthz`, { method: 'HEAD' })).status).toBe(200);
    const pre = await fetch(`${s.url}/v0.2/healthz`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe(origin);
  });
});

describe('reinfer once the frames aged out', () => {
  let s: Stack;
  beforeAll(async () => {
    // The emulator keeps 2 s of frames: a result's window is evicted soon after it is delivered.
    s = await startStack({ emulator: { frameRetentionSeconds: 2 } });
  });
  afterAll(() => s.close());

  test('410 clip_evicted, not a re-run on whatever frames are left', async () => {
    const id = await createStream(s.url, clipBody({ target_fps: 2, clip_length_seconds: 0.5, delay_seconds: 0.5 }));
    const [r] = await resultsOf(s.url, id, 1);
    const body = { result_id: r!.id, prompt: 'p', model: 'local/analyzer' };
    expect((await reinfer(s.url, body)).status).toBe(200);
    let res = await http(s.url, 'POST', PATH, { body });
    await deadline(
      (async () => {
        while (res.status === 200) {
          await sleep(200);
          res = await http(s.url, 'POST', PATH, { body });
        }
      })(),
      15_000,
      'the window evicted',
    );
    expect(res.status).toBe(410);
    expect(res.body).toMatchObject({ error: 'clip_evicted', details: { reason: 'window_evicted' } });
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  }, 60_000);
});
