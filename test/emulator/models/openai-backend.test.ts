import http from 'node:http';
import sharp from 'sharp';
import { closeServer, listen } from '../../../src/lib/listen';
import { startHarness } from '../harness';
import type { Harness } from '../harness';

type Json = Record<string, any>;

interface Seen {
  headers: http.IncomingHttpHeaders;
  body: Json;
}

/** A tiny OpenAI-compatible server: records requests and answers with the queued behaviour. */
async function fakeOpenAI() {
  const seen: Seen[] = [];
  type Behaviour = (res: http.ServerResponse) => void;
  const queue: Behaviour[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: JSON.parse(raw) as Json });
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const next = queue.shift();
      if (next) return next(res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Two frames of a blue test pattern.' }, finish_reason: 'stop' }],
        }),
      );
    });
  });
  const port = await listen(server, 0, '127.0.0.1');
  return { url: `http://127.0.0.1:${port}`, seen, queue, close: () => closeServer(server) };
}

const pricing = {
  input_microcents_per_token: 5,
  output_microcents_per_token: 20,
  cached_input_microcents_per_token: 1,
  version: '2026-02-01',
};

let fake: Awaited<ReturnType<typeof fakeOpenAI>>;
let h: Harness;

beforeAll(async () => {
  fake = await fakeOpenAI();
  h = await startHarness({
    emulator: {
      models: [
        {
          id: 'ollama/llava',
          backend: 'openai',
          baseUrl: `${fake.url}/v1`,
          remoteModel: 'llava:7b',
          apiKey: 'sk-upstream',
          timeoutMs: 500,
          pricing,
        },
        { id: 'vllm/down', backend: 'openai', baseUrl: 'http://127.0.0.1:9/v1', remoteModel: 'qwen', pricing },
      ],
    },
  });
});
afterAll(async () => {
  await h.close();
  await fake.close();
});

async function post(body: Json): Promise<{ status: number; headers: Headers; body: Json }> {
  const res = await fetch(`${h.url}/v1beta/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer svc-local-dev' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}

async function balance(): Promise<number> {
  const res = await fetch(`${h.url}/billing/accounts/me/balance`, { headers: { authorization: 'Bearer svc-local-dev' } });
  return ((await res.json()) as Json).balance_microcents as number;
}

describe('OpenAI-compatible forwarding backend', () => {
  it('forwards text and the resolved frames as base64 JPEG data URLs', async () => {
    const s = h.addStream('svc-local-dev');
    await h.publish(s, 10, { fps: 1 });
    const before = fake.seen.length;
    const r = await post({
      model: 'ollama/llava',
      max_completion_tokens: 50,
      response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object' } } },
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What changed?' },
            { type: 'video_url', video_url: { url: `svc://streams/${s.id}?start_frame_index=2&end_frame_index=6` } }, // frames 2..5: the end is exclusive
            { type: 'image_url', image_url: { url: `svc://streams/${s.id}?frame_index=-1` } },
          ],
        },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe('Two frames of a blue test pattern.');
    expect(r.body.usage.prompt_tokens).toBe(Math.ceil('Be brief.What changed?'.length / 4) + 5 * 256);

    expect(fake.seen.length).toBe(before + 1);
    const { headers, body } = fake.seen.at(-1)!;
    expect(headers.authorization).toBe('Bearer sk-upstream');
    expect(body).toMatchObject({
      model: 'llava:7b',
      max_tokens: 50,
      stream: false,
      response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object' } } },
    });
    expect(body.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    const parts = body.messages[1].content as Json[];
    expect(parts[0]).toEqual({ type: 'text', text: 'What changed?' });
    const images = parts.filter((p) => p.type === 'image_url');
    expect(images).toHaveLength(5); // frames 2, 3, 4, 5 and the latest
    for (const p of images) {
      const m = /^data:image\/jpeg;base64,(.+)$/.exec(p.image_url.url as string);
      expect(m).not.toBeNull();
      const jpeg = Buffer.from(m![1]!, 'base64');
      expect(jpeg.subarray(0, 2).toString('hex')).toBe('ffd8');
      const meta = await sharp(jpeg).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 64, 48]);
    }
  });

  it('maps an upstream HTTP failure to 503 upstream_http_<status> with the upstream object; no charge', async () => {
    fake.queue.push((res) => {
      res.writeHead(429, {
        'content-type': 'application/json',
        'retry-after': '3',
        'x-ratelimit-remaining-requests': '0',
        'x-ratelimit-reset-requests': '1s',
      });
      res.end(JSON.stringify({ error: { message: 'slow down' } }));
    });
    const before = await balance();
    const r = await post({ model: 'ollama/llava', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('3');
    expect(r.body).toEqual({
      detail: {
        error: {
          message: expect.any(String),
          type: 'stream_error',
          code: 'upstream_http_429',
          upstream: {
            provider: 'ollama',
            status: 429,
            body: { error: { message: 'slow down' } },
            rate_limits: { remaining_requests: 0, reset_requests: '1s' },
          },
        },
      },
    });
    expect(await balance()).toBe(before);

    fake.queue.push((res) => res.writeHead(500).end('boom'));
    const e500 = await post({ model: 'ollama/llava', messages: [{ role: 'user', content: 'hi' }] });
    expect([e500.status, e500.body.detail.error.code, e500.body.detail.error.upstream.body]).toEqual([
      503,
      'upstream_http_500',
      { text: 'boom' },
    ]);
  });

  it('stops streaming a long answer when the client goes away, and keeps serving', async () => {
    const long = 'word '.repeat(60_000); // ~19k SSE chunks
    fake.queue.push((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: long }, finish_reason: 'stop' }] }));
    });
    const res = await fetch(`${h.url}/v1beta/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer svc-local-dev' },
      body: JSON.stringify({ model: 'ollama/llava', stream: true, messages: [{ role: 'user', content: 'talk' }] }),
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toMatch(/^data: /);
    await reader.cancel();
    const after = await post({ model: 'ollama/llava', messages: [{ role: 'user', content: 'hi' }] });
    expect(after.status).toBe(200);
  });

  it('503 model_unavailable when the server is unreachable, too slow, or answers nonsense', async () => {
    const down = await post({ model: 'vllm/down', messages: [{ role: 'user', content: 'hi' }] });
    expect([down.status, down.body.detail.error.code]).toEqual([503, 'model_unavailable']);

    fake.queue.push((res) => {
      const t = setTimeout(() => res.writeHead(200).end('{}'), 1500);
      res.on('close', () => clearTimeout(t));
    });
    const slow = await post({ model: 'ollama/llava', messages: [{ role: 'user', content: 'hi' }] });
    expect([slow.status, slow.body.detail.error.code]).toEqual([503, 'model_unavailable']);
    expect(slow.body.detail.error.message).toMatch(/timed out/);

    fake.queue.push((res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices": []}'));
    const odd = await post({ model: 'ollama/llava', messages: [{ role: 'user', content: 'hi' }] });
    expect([odd.status, odd.body.detail.error.code, odd.body.detail.error.upstream.status]).toEqual([503, 'model_unavailable', 200]);
  });
});
