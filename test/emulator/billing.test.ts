import { costMicrocents } from '../../src/emulator/billing';
import { uuidV5 } from '../../src/emulator/models/registry';
import { startHarness } from './harness';
import type { Harness } from './harness';

type Json = Record<string, any>;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

async function get(path: string, key?: string): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${h.url}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, body: (await res.json()) as Json };
}

describe('GET /v1beta/models (no auth)', () => {
  it('lists every model with its status', async () => {
    const r = await get('/v1beta/models');
    expect(r.status).toBe(200);
    expect(r.body.object).toBe('list');
    expect(r.body.data).toEqual([
      { id: 'local/analyzer', object: 'model', created: Date.parse('2026-01-01') / 1000, owned_by: 'local', status: 'ready' },
      { id: 'local/analyzer-mini', object: 'model', created: expect.any(Number), owned_by: 'local', status: 'ready' },
      { id: 'local/offline', object: 'model', created: expect.any(Number), owned_by: 'local', status: 'unavailable' },
    ]);
  });

  it('reflects status changes (control API)', async () => {
    expect(h.ctx.models.setStatus('local/analyzer-mini', 'unavailable')).toBe(true);
    expect(h.ctx.models.setStatus('local/missing', 'ready')).toBe(false);
    const r = await get('/v1beta/models');
    expect(r.body.data.find((m: Json) => m.id === 'local/analyzer-mini').status).toBe('unavailable');
    h.ctx.models.setStatus('local/analyzer-mini', 'ready');
  });
});

describe('/billing/pricing (no auth)', () => {
  it('lists all pricing objects', async () => {
    const r = await get('/billing/pricing');
    expect(r.status).toBe(200);
    expect(r.body.map((p: Json) => p.model)).toEqual(['local/analyzer', 'local/analyzer-mini', 'local/offline']);
    for (const p of r.body as unknown as Json[]) expect(p.id).toMatch(UUID_RE);
  });

  it('serves one model whose id holds a slash, with a stable UUID', async () => {
    const r = await get('/billing/pricing/local/analyzer');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      id: uuidV5('local/analyzer'),
      model: 'local/analyzer',
      provider: 'local',
      version: '2026-01-01',
      input_microcents_per_token: 10,
      output_microcents_per_token: 40,
      cached_input_microcents_per_token: 2,
      public: true,
    });
    const other = await startHarness();
    try {
      const again = (await (await fetch(`${other.url}/billing/pricing/local/analyzer`)).json()) as Json;
      expect(again.id).toBe(r.body.id);
    } finally {
      await other.close();
    }
    expect((await get('/billing/pricing/local%2Fanalyzer-mini')).body.model).toBe('local/analyzer-mini');
  });

  it('404 {detail} for an unknown model', async () => {
    for (const path of ['/billing/pricing/local/nope', '/billing/pricing/nope', '/billing/pricing/local/analyzer/extra']) {
      const r = await get(path);
      expect(r.status).toBe(404);
      expect(typeof r.body.detail).toBe('string');
    }
  });
});

describe('GET /billing/accounts/me/balance', () => {
  it('returns the balance of the key’s account', async () => {
    const r = await get('/billing/accounts/me/balance', 'svc-local-dev');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ user_id: '0f5b8a8e-3d2c-4a47-9a61-6f1f2b9c0a01', balance_microcents: 1_000_000_000, balance_cents: 1000 });
    const broke = await get('/billing/accounts/me/balance', 'svc-local-broke');
    expect(broke.body).toMatchObject({ balance_microcents: 0, balance_cents: 0 });
  });

  it('401 without a valid key', async () => {
    expect((await get('/billing/accounts/me/balance')).status).toBe(401);
    expect((await get('/billing/accounts/me/balance', 'svc-unknown')).status).toBe(401);
    expect((await get('/billing/accounts/me/balance', 'svc-local-revoked')).status).toBe(401);
  });
});

describe('costMicrocents', () => {
  const p = { input_microcents_per_token: 10, output_microcents_per_token: 40, cached_input_microcents_per_token: 2 };
  it('bills uncached input, cached input and output at their prices', () => {
    expect(costMicrocents(p, { prompt_tokens: 100, completion_tokens: 7 })).toBe(1000 + 280);
    expect(costMicrocents(p, { prompt_tokens: 100, completion_tokens: 7 }, 60)).toBe(400 + 120 + 280);
    expect(costMicrocents(p, { prompt_tokens: 100, completion_tokens: 0 }, 500)).toBe(200); // capped at the prompt
    expect(costMicrocents(p, { prompt_tokens: 0, completion_tokens: 0 })).toBe(0);
  });
});
