/**
 * `emulator.dialect`: where the contract and the provider's own reference disagree, the contract
 * is the default and the provider's behaviour is one setting away. On a real emulator.
 */
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { createLogger } from '../../src/lib/logger';
import { http, KEY_B } from '../helpers/stack';
import { testConfig } from '../helpers/config';

type Json = Record<string, any>;
const MISSING = '6b0f3a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b';

async function start(dialect?: 'contract' | 'provider'): Promise<RunningEmulator> {
  const cfg = testConfig({ emulator: dialect ? { dialect } : {} });
  return startEmulator(cfg, createLogger('silent'));
}

const textOnly = (extra: Json = {}) => ({ model: 'local/analyzer', messages: [{ role: 'user', content: 'hi' }], ...extra });

async function sseEvents(url: string, body: Json): Promise<Json[]> {
  const res = await fetch(`${url}/v1beta/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer svc-local-dev' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]')
    .map((e) => JSON.parse(e.slice(6)) as Json);
}

describe.each([
  ['contract', undefined],
  ['provider', 'provider' as const],
])('dialect %s', (name, dialect) => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    emu = await start(dialect);
  });
  afterAll(() => emu.close());
  const provider = name === 'provider';

  it(provider ? 'the cache block is always there, thread_id null without one' : 'no cache block without a thread_id', async () => {
    const r = await http(emu.url, 'POST', '/v1beta/chat/completions', { body: textOnly() });
    expect(r.status).toBe(200);
    if (provider) expect((r.body as Json).svc).toEqual({ cache: { thread_id: null, cache_hit: false, cached_input_tokens: 0 } });
    else expect(r.body).not.toHaveProperty('svc');
    const threaded = await http(emu.url, 'POST', '/v1beta/chat/completions', { body: textOnly({ thread_id: 't-1' }) });
    expect((threaded.body as Json).svc.cache.thread_id).toBe('t-1');
  });

  it('with include_usage, the final SSE chunk carries usage and the cache details', async () => {
    const events = await sseEvents(emu.url, textOnly({ stream: true, stream_options: { include_usage: true }, thread_id: 't-2' }));
    const last = events.at(-1)!;
    expect(last.usage).toMatchObject({ total_tokens: expect.any(Number) });
    expect(last.svc.cache).toMatchObject({ thread_id: 't-2' });
  });

  it(
    provider
      ? "lifecycle 404s are {detail: 'Stream not found'}, another user's stream included"
      : "lifecycle 404s are nested stream errors; another user's stream is 403",
    async () => {
      const { id } = (await http(emu.url, 'POST', '/v1beta/streams', { body: {} })).body as Json;
      const missing = await http(emu.url, 'GET', `/v1beta/streams/${MISSING}`);
      const foreign = await http(emu.url, 'GET', `/v1beta/streams/${id}`, { key: KEY_B });
      await http(emu.url, 'DELETE', `/v1beta/streams/${id}`);
      const ended = await http(emu.url, 'POST', `/v1beta/streams/${id}/keepalive`);
      if (provider) {
        for (const r of [missing, foreign, ended]) expect([r.status, r.body]).toEqual([404, { detail: 'Stream not found' }]);
      } else {
        for (const r of [missing, ended]) expect([r.status, (r.body as Json).detail.error.code]).toEqual([404, 'stream_not_found']);
        expect(foreign.status).toBe(403);
      }
    },
  );

  it(provider ? 'a frame not produced yet is 409' : 'a frame not produced yet is 422', async () => {
    const { id } = (await http(emu.url, 'POST', '/v1beta/streams', { body: {} })).body as Json;
    const r = await http(emu.url, 'POST', '/v1beta/chat/completions', {
      body: {
        model: 'local/analyzer',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=-1` } }] }],
      },
    });
    expect([r.status, (r.body as Json).detail.error.code]).toEqual([provider ? 409 : 422, 'frame_not_yet_produced']);
  });
});
