import OpenAI from 'openai';
import type { EmulatedStream } from '../../src/emulator/streams';
import { startHarness } from './harness';
import type { Harness } from './harness';

const DEV = 'svc-local-dev';
type Json = Record<string, any>;

let h: Harness;
let stream: EmulatedStream;

beforeAll(async () => {
  h = await startHarness();
  stream = h.addStream(DEV);
  await h.publish(stream, 30, { fps: 10 });
});
afterAll(async () => {
  await h.close();
});

// The end anchor is exclusive: end_frame_index=30 ends after frame 29, the newest.
const messages = (id: string) => [
  {
    role: 'user',
    content: [
      { type: 'text', text: 'What do you see?' },
      { type: 'video_url', video_url: { url: `svc://streams/${id}?start_frame_index=0&end_frame_index=30&max_fps=2` } },
    ],
  },
];

function post(body: Json): Promise<Response> {
  return fetch(`${h.url}/v1beta/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${DEV}` },
    body: JSON.stringify(body),
  });
}

/** Reads the raw body as it arrives; returns each network read and the `data:` payloads. */
async function readSse(res: Response): Promise<{ reads: number; events: string[]; raw: string }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let raw = '';
  let reads = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    reads++;
    raw += decoder.decode(value, { stream: true });
  }
  const events = raw
    .split('\n\n')
    .filter((e) => e.trim() !== '')
    .map((e) => {
      expect(e.startsWith('data: ')).toBe(true);
      return e.slice('data: '.length);
    });
  return { reads, events, raw };
}

describe('SSE (raw stream)', () => {
  it('streams role, content and finish chunks, then [DONE]; no usage chunk unless asked', async () => {
    const plain = (await (await post({ model: 'local/analyzer', messages: messages(stream.id) })).json()) as Json;
    const res = await post({ model: 'local/analyzer', messages: messages(stream.id), stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('content-length')).toBeNull();
    const { events, raw, reads } = await readSse(res);
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(reads).toBeGreaterThan(1); // written as it goes, not in one buffer
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as Json);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect(chunks[0]!.choices[0].delta.role).toBe('assistant');
    const contentChunks = chunks.filter((c) => typeof c.choices[0]?.delta?.content === 'string' && c.choices[0].delta.content !== '');
    expect(contentChunks.length).toBeGreaterThan(3);
    for (const c of chunks) expect(c).toMatchObject({ object: 'chat.completion.chunk', model: 'local/analyzer' });
    expect(contentChunks.map((c) => c.choices[0].delta.content).join('')).toBe(plain.choices[0].message.content);
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('stop');
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
  });

  it('adds a usage chunk (choices: []) before [DONE] with stream_options.include_usage', async () => {
    const res = await post({
      model: 'local/analyzer',
      messages: messages(stream.id),
      stream: true,
      stream_options: { include_usage: true },
      thread_id: 'sse-1',
    });
    const { events } = await readSse(res);
    expect(events.at(-1)).toBe('[DONE]');
    const usageChunk = JSON.parse(events.at(-2)!) as Json;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage.prompt_tokens).toBe(Math.ceil('What do you see?'.length / 4) + 6 * 256);
    expect(usageChunk.usage.total_tokens).toBe(usageChunk.usage.prompt_tokens + usageChunk.usage.completion_tokens);
    const finish = JSON.parse(events.at(-3)!) as Json;
    expect(finish.choices[0].finish_reason).toBe('stop');
    expect(finish.svc.cache).toMatchObject({ thread_id: 'sse-1', cache_hit: false });
  });

  it('truncation ends the stream with finish_reason length', async () => {
    const res = await post({ model: 'local/analyzer', messages: messages(stream.id), stream: true, max_completion_tokens: 3 });
    const chunks = (await readSse(res)).events.slice(0, -1).map((e) => JSON.parse(e) as Json);
    expect(chunks.map((c) => c.choices[0].delta.content ?? '').join('').length).toBeLessThanOrEqual(12);
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('length');
  });

  it('errors before the first byte are plain JSON error responses', async () => {
    const res = await post({
      model: 'local/analyzer',
      stream: true,
      messages: [
        {
          role: 'user',
          content: [{ type: 'image_url', image_url: { url: 'svc://streams/00000000-0000-4000-8000-000000000000?frame_index=-1' } }],
        },
      ],
    });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await res.json()) as Json).detail.error.code).toBe('stream_not_found');
  });
});

describe('official openai client', () => {
  const client = () => new OpenAI({ baseURL: `${h.url}/v1beta`, apiKey: DEV, maxRetries: 0 });

  it('non-streaming', async () => {
    const r = await client().chat.completions.create({
      model: 'local/analyzer',
      messages: messages(stream.id) as unknown as OpenAI.ChatCompletionMessageParam[],
      max_completion_tokens: 200,
    });
    expect(r.object).toBe('chat.completion');
    expect(r.choices[0]!.message.content).toMatch(/\[frames=6 index=4\.\.29 span_ms=2500 pattern=4\.\.29\]/);
    expect(r.usage!.prompt_tokens).toBe(4 + 6 * 256);
  });

  it('streaming, with usage', async () => {
    const s = await client().chat.completions.create({
      model: 'local/analyzer-mini',
      messages: messages(stream.id) as unknown as OpenAI.ChatCompletionMessageParam[],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finish: string | null | undefined;
    for await (const chunk of s) {
      chunks++;
      content += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(3);
    expect(content).toMatch(/\[frames=6 index=4\.\.29 span_ms=2500 pattern=4\.\.29\]$/);
    expect(finish).toBe('stop');
    expect(usage!.completion_tokens).toBe(Math.ceil(content.length / 4));
  });

  it('surfaces contract errors as APIError with status', async () => {
    await expect(
      client().chat.completions.create({ model: 'local/offline', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({ status: 503 });
  });
});
