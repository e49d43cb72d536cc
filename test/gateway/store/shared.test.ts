/**
 * Two gateway replicas on one real redis-server and one emulator, without fleet membership (no
 * secret): what the Redis store alone shares (docs/scaling.md). Slots are exact across replicas
 * and concurrent creates, a session created on A is readable on B (a results socket on B gets A's
 * results and A's end; feedback through B), and the deprecation report is the fleet's. Failover,
 * handover and any-replica calls are the fleet's suites (test/gateway/fleet).
 */
import { createLogger } from '../../../src/lib/logger';
import { keyHash } from '../../../src/lib/keys';
import { startGateway } from '../../../src/gateway/server';
import type { RunningGateway } from '../../../src/gateway/server';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import type { Store } from '../../../src/gateway/store/store';
import type { DeprecationReport } from '../../../src/gateway/telemetry/usage';
import { startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { KEY, frameBody, http, startStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import { FAST_RETRY } from '../../helpers/config';
import type { Stack } from '../../helpers/stack';
import { slotsInUse } from '../../helpers/store-ops';

const ADMIN = 'admin-token-for-the-replica-tests';
let redis: RedisServer;
let a: Stack;
let b: RunningGateway;
let storeA: Store;
let storeB: Store;

beforeAll(async () => {
  redis = await startRedis();
  storeA = await connectRedisStore(redis.url);
  storeB = await connectRedisStore(redis.url);
  a = await startStack({ admin: { token: ADMIN } }, { store: storeA });
  b = await startGateway(a.cfg, createLogger('silent'), a.emulator.url, { store: storeB, retry: FAST_RETRY });
}, 30_000);

afterAll(async () => {
  await b?.close();
  await a?.close();
  await Promise.all([storeA?.close(), storeB?.close()]);
  await redis?.stop();
});

test('60 concurrent acquires over 3 Redis store connections: exactly 5 slots, holders named, round after round', async () => {
  const conns = await Promise.all(Array.from({ length: 3 }, () => connectRedisStore(redis.url, { prefix: 'acq:' })));
  try {
    for (let round = 0; round < 20; round++) {
      const ids = Array.from({ length: 60 }, (_, i) => `r${round}-s${i}`);
      const granted = await Promise.all(ids.map((id, i) => conns[i % 3].acquireSlot('kh', id, 5, `gw-${i % 3}`)));
      const winners = ids.filter((_, i) => granted[i]);
      expect(winners).toHaveLength(5);
      const holders = await conns[(round + 1) % 3].slotHolders('kh');
      expect(holders.map((h) => h.slotId).sort()).toEqual([...winners].sort());
      expect(holders.every((h) => h.replica === `gw-${ids.indexOf(h.slotId) % 3}` && h.streamId === null)).toBe(true);
      const released = await Promise.all(winners.map((id, i) => conns[i % 3].releaseSlot('kh', id)));
      expect(released.every(Boolean)).toBe(true);
      expect(await slotsInUse(conns[round % 3], 'kh')).toBe(0);
    }
  } finally {
    await Promise.all(conns.map((c) => c.close()));
  }
});

const created = (r: { status: number; body: unknown }) => (r.status === 201 ? (r.body as { stream_id: string }).stream_id : null);

test('60 concurrent creates for one key over two replicas: exactly 5 streams, round after round', async () => {
  for (let round = 0; round < 3; round++) {
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        http(i % 2 ? b.url : a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) }),
      ),
    );
    const ids = answers.map(created);
    const made = ids.map((id, i) => ({ id, url: i % 2 ? b.url : a.url })).filter((x): x is { id: string; url: string } => x.id !== null);
    expect(made).toHaveLength(5);
    const refused = answers.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(55);
    expect(refused.every((r) => r.status === 429 && (r.body as { error: string }).error === 'concurrent_stream_limit')).toBe(true);
    expect(await slotsInUse(storeA, keyHash(KEY))).toBe(5);
    // Each deleted through the replica that created it.
    for (const { id, url } of made) expect((await http(url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
    expect(await slotsInUse(storeB, keyHash(KEY))).toBe(0);
  }
}, 60_000);

test("a results socket on B gets A's results and A's end; feedback through B; the report is the fleet's", async () => {
  const id = created(await http(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) }))!;
  expect(id).toEqual(expect.any(String));
  const sock = await openResults(b.url, id, KEY);
  const [first] = await sock.waitFor(1, 15_000);
  expect(first).toMatchObject({ stream_id: id, ok: true });

  const fb = await http(b.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 5, category: 'accuracy', feedback: 'via B' } });
  expect(fb.status).toBe(200);
  const list = await http(a.url, 'GET', '/v0.2/streams/feedback');
  expect(list.body).toEqual(expect.arrayContaining([expect.objectContaining({ stream_id: id, feedback: 'via B' })]));

  expect((await http(a.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  expect(await sock.closed).toEqual({ code: 1001, reason: 'client_requested' });

  await a.gateway.gateway.usage.flush();
  const report = (await http(b.url, 'GET', '/admin/deprecation', { key: ADMIN })).body as DeprecationReport;
  const row = report.keys.find((k) => k.key_hash === keyHash(KEY))!;
  // Creates went to A and B alike; B's report counts both replicas' requests.
  expect(row.requests['POST /v0.2/streams']).toBe(3 * 60 + 1);
}, 60_000);
