/**
 * `image_url` parts with a `data:` URL (decoded in the request) or an http(s) URL (fetched only from
 * allowed hosts), answered by the built-in model from their pixels. Real sockets: the emulator's
 * harness and a local image server on 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { closeServer } from '../../src/lib/listen';
import { startHarness } from './harness';
import type { Harness } from './harness';

const DEV = 'svc-local-dev';
type Json = Record<string, any>;

const solid = (r: number, g: number, b: number, format: 'jpeg' | 'png', width = 64, height = 48) => {
  const image = sharp({ create: { width, height, channels: 3, background: { r, g, b } } });
  return (format === 'jpeg' ? image.jpeg() : image.png()).toBuffer();
};
const dataUrl = (mime: string, bytes: Buffer) => `data:${mime};base64,${bytes.toString('base64')}`;
const ask = (url: string, extra: Record<string, unknown> = {}) => ({
  model: 'local/analyzer',
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What colour is it?' },
        { type: 'image_url', image_url: { url } },
      ],
    },
  ],
  ...extra,
});
const LOC = ['body', 'messages', '0', 'content', '1', 'image_url', 'url'];

async function post(h: Harness, body: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${h.url}/v1beta/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${DEV}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}
const answer = (r: { body: Json }) => r.body.choices[0].message.content as string;

/** A local image server: path → handler; counts the requests it got. */
async function imageServer(routes: Record<string, (res: http.ServerResponse) => void>) {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    const route = routes[req.url ?? ''];
    if (route) route(res);
    else res.writeHead(404).end('not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, hits, close: () => closeServer(server) };
}

describe('data: images', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  it('a solid-colour JPEG is answered with its colour, billed as one frame', async () => {
    const jpeg = await solid(220, 30, 30, 'jpeg');
    const r = await post(h, ask(dataUrl('image/jpeg', jpeg)));
    expect(r.status).toBe(200);
    expect(answer(r)).toContain('Image sent with the request (64x48)');
    expect(answer(r)).toMatch(/mostly red \(#d[a-f0-9]1[a-f0-9]1[a-f0-9]\)/);
    expect(answer(r)).toContain('[frames=1 index=none span_ms=0 pattern=none]');
    expect(r.body.usage.prompt_tokens).toBe(Math.ceil('What colour is it?'.length / 4) + 256);
  });

  it('a PNG too, and its measurements fill a JSON answer', async () => {
    const png = await solid(20, 40, 210, 'png', 500, 300);
    const r = await post(h, ask(dataUrl('image/png', png), { response_format: { type: 'json_object' } }));
    expect(r.status).toBe(200);
    // stored as JPEG like stream frames: each channel within a few levels of rgb(20, 40, 210)
    expect(JSON.parse(answer(r))).toMatchObject({
      frames: 1,
      dominant_color: 'blue',
      dominant_color_hex: expect.stringMatching(/^#1[0-9a-f]2[0-9a-f]d[0-9a-f]$/),
    });
  });

  it('the same image under one thread_id is a prompt-cache hit', async () => {
    const url = dataUrl('image/jpeg', await solid(10, 200, 10, 'jpeg'));
    const first = await post(h, ask(url, { thread_id: 'img-thread' }));
    const second = await post(h, ask(url, { thread_id: 'img-thread' }));
    expect(first.body.svc.cache.cache_hit).toBe(false);
    expect(second.body.svc.cache).toMatchObject({ cache_hit: true, cached_input_tokens: first.body.usage.prompt_tokens });
  });

  it.each([
    ['a GIF', `data:image/gif;base64,${Buffer.from('GIF89a').toString('base64')}`, 'image_type'],
    ['no base64 marker', 'data:image/png,abc', 'url_parsing'],
    ['bad base64', 'data:image/png;base64,@@@@', 'url_parsing'],
    ['bytes that are no image', dataUrl('image/png', Buffer.from('definitely not a png')), 'image_decode'],
  ])('%s is a 422 validation error at the url', async (_what, url, type) => {
    const r = await post(h, ask(url));
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: 'validation_error', details: [{ loc: LOC, type }] });
  });
});

describe('http(s) images', () => {
  let h: Harness;
  let images: Awaited<ReturnType<typeof imageServer>>;
  let png: Buffer;
  beforeAll(async () => {
    png = await solid(30, 200, 40, 'png');
    const big = await solid(1, 2, 3, 'png', 2000, 2000);
    expect(big.length).toBeGreaterThan(20_000); // over the maxBytes below
    images = await imageServer({
      '/green.png': (res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png),
      '/big.png': (res) => res.writeHead(200, { 'content-type': 'image/png' }).end(big),
      '/moved': (res) => res.writeHead(302, { location: '/green.png' }).end(),
      '/text': (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('hello'),
      '/hang': () => undefined,
    });
    h = await startHarness({ emulator: { imageFetch: { allowedHosts: ['127.0.0.1'], maxBytes: 20_000, timeoutMs: 300 } } });
  });
  afterAll(async () => {
    await h.close();
    await images.close();
  });

  it('an allowed host is fetched and its image answered from its pixels', async () => {
    const r = await post(h, ask(`http://127.0.0.1:${images.port}/green.png`));
    expect(r.status).toBe(200);
    expect(answer(r)).toContain('mostly green');
  });

  it('a host not on the list is refused before anything is fetched', async () => {
    const before = images.hits.length;
    const r = await post(h, ask(`http://localhost:${images.port}/green.png`));
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: 'validation_error', details: [{ loc: LOC, type: 'url_not_allowed' }] });
    expect(images.hits.length).toBe(before);
  });

  it.each([
    ['a 404', '/missing.png', 'url_fetch'],
    ['a redirect (not followed)', '/moved', 'url_fetch'],
    ['a body over maxBytes', '/big.png', 'image_too_large'],
    ['not an image', '/text', 'image_decode'],
    ['no answer within timeoutMs', '/hang', 'url_fetch'],
  ])('%s is a 422 validation error at the url', async (_what, path, type) => {
    const r = await post(h, ask(`http://127.0.0.1:${images.port}${path}`));
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: 'validation_error', details: [{ loc: LOC, type }] });
  });

  it('the redirect target was never requested', () => {
    expect(images.hits.filter((p) => p === '/moved')).toHaveLength(1);
    expect(images.hits.filter((p) => p === '/green.png')).toHaveLength(1); // only the allowed fetch above
  });
});
