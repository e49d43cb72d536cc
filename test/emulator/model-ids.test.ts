/**
 * Model ids without a slash (`gemini-3-flash-preview`), as the provider lists some, configured with
 * an explicit provider; checked at boot.
 */
import { ConfigError, loadConfig } from '../../src/config';
import { startHarness } from './harness';
import type { Harness } from './harness';

const PRICING = {
  input_microcents_per_token: 10,
  output_microcents_per_token: 40,
  cached_input_microcents_per_token: 2,
  version: '2026-06-01',
};
const BARE = { id: 'gemini-3-flash-preview', provider: 'google', backend: 'analyzer', pricing: PRICING };
type Json = Record<string, any>;

describe('a model id without a slash', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ emulator: { models: [BARE, { id: 'local/analyzer', pricing: PRICING }] } });
  });
  afterAll(() => h.close());

  const get = async (path: string) => (await (await fetch(`${h.url}${path}`)).json()) as Json;

  it('is listed, priced under its provider, and answers completions', async () => {
    expect((await get('/v1beta/models')).data[0]).toMatchObject({ id: 'gemini-3-flash-preview', owned_by: 'google', status: 'ready' });
    expect(await get('/billing/pricing/gemini-3-flash-preview')).toMatchObject({
      model: 'gemini-3-flash-preview',
      provider: 'google',
      version: '2026-06-01',
    });
    expect(await get('/billing/pricing/local/analyzer')).toMatchObject({ provider: 'local' });
    const res = await fetch(`${h.url}/v1beta/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer svc-local-dev' },
      body: JSON.stringify({ model: 'gemini-3-flash-preview', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Json).model).toBe('gemini-3-flash-preview');
  });
});

describe('model ids at boot', () => {
  const load = (model: Json) => () => loadConfig({ env: {}, overrides: { emulator: { models: [model] } } });

  it('a bare id needs a provider; the error names the key', () => {
    expect(load({ id: 'gemini-3-flash-preview', pricing: PRICING })).toThrow(ConfigError);
    expect(load({ id: 'gemini-3-flash-preview', pricing: PRICING })).toThrow(
      /emulator\.models\.0\.provider: a model id without a slash needs `provider`/,
    );
  });

  it.each(['/leading-slash', 'has space', ''])('%j is refused', (id) => {
    expect(load({ id, provider: 'x', pricing: PRICING })).toThrow(/emulator\.models\.0\.id/);
  });

  it('provider/model-name still needs no provider', () => {
    expect(load({ id: 'google/gemma-4-E4B-it', pricing: PRICING })().emulator.models[0]!.id).toBe('google/gemma-4-E4B-it');
  });
});
