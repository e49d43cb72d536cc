/**
 * Create-body fuzz (deterministic seed): whatever a tenant POSTs to /v0.2/streams, the gateway
 * answers below 500 with a legacy-shaped error (or creates a stream), and /healthz keeps
 * answering while it does.
 */
import fc from 'fast-check';
import { bodyText, createBodies, FUZZ_SEED, rawBodies } from '../../helpers/create-fuzz';
import { http, KEY, startStack } from '../../helpers/stack';
import type { Http, Stack } from '../../helpers/stack';
import { keyHash } from '../../../src/lib/keys';
import { slotsInUse } from '../../helpers/store-ops';

const legacyError = { error: expect.any(String), message: expect.any(String), request_id: expect.any(String) };

describe('create-body fuzz', () => {
  let s: Stack;
  const statuses = new Map<number, number>();
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s.close();
  });

  async function check(send: () => Promise<Http>): Promise<void> {
    const [r, health] = await Promise.all([send(), http(s.url, 'GET', '/healthz', { key: null })]);
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    expect(health.status).toBe(200);
    expect(r.status).toBeLessThan(500);
    if (r.status === 201) {
      const id = (r.body as { stream_id: string }).stream_id;
      expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
      return;
    }
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.body).toMatchObject(legacyError);
  }

  test('JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(createBodies, (body) => check(() => http(s.url, 'POST', '/v0.2/streams', { raw: bodyText(body) }))),
      { seed: FUZZ_SEED, numRuns: 300 },
    );
    // The fuzz reached past validation, and everything it created was released.
    expect(statuses.get(422)).toBeGreaterThan(0);
    expect(statuses.get(201)).toBeGreaterThan(0);
    expect(await slotsInUse(s.gateway.gateway.store, keyHash(KEY))).toBe(0);
    expect(s.gateway.gateway.streams.activeCount).toBe(0);
  });

  test('raw bodies', async () => {
    await fc.assert(
      fc.asyncProperty(rawBodies, (raw) => check(() => http(s.url, 'POST', '/v0.2/streams', { raw }))),
      { seed: FUZZ_SEED, numRuns: 100 },
    );
  });
});
