/**
 * One replica cut from Redis while the rest of the fleet is not (a partition), on real processes:
 * replica C reaches Redis through a fault proxy. Cut: C answers /readyz 503 (the balancer stops
 * sending it work), its results sockets stay open (browser SDKs never reconnect), the streams it
 * owned go on under A or B, and nothing ends. Healed: C's sockets receive results again, with no
 * result id twice.
 */
import { proxyInFront } from '../../helpers/fault-proxy';
import type { FaultProxy } from '../../helpers/fault-proxy';
import { duplicateIds } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { KEY, deadline, frameBody, http, ownerOf, resultsAfter, slotsOfKey, until, useFleet } from './fleet-test';

let proxy: FaultProxy | undefined;
const fleet = useFleet({
  env: { LEGACY_LEASE_TTL_SECONDS: '10' },
  replicaEnv: async (id, { redisUrl }): Promise<Record<string, string>> => {
    if (id !== 'C' || !redisUrl) return {};
    const through = await proxyInFront(redisUrl);
    proxy = through.proxy;
    return { REDIS_URL: through.url };
  },
});
afterAll(() => proxy?.close());

const ids: string[] = [];
let onC: ResultsSocket[] = [];

beforeAll(async () => {
  for (const r of fleet().replicas) {
    const res = await http(r.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(res.status).toBe(201);
    ids.push((res.body as { stream_id: string }).stream_id);
  }
  onC = await Promise.all(ids.map((id) => openResults(fleet().replica('C').url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(onC.map((s) => s.waitFor(2))), 30_000, 'first results');
}, 120_000);

test('a replica cut from Redis stops being ready, keeps its sockets, loses its streams to the others, and delivers again once healed', async () => {
  const c = fleet().replica('C');
  const ownedByC = (await Promise.all(ids.map((id) => ownerOf(fleet(), id)))).filter((o) => o === 'C').length;
  expect(ownedByC).toBeGreaterThan(0);

  proxy!.set({ kind: 'blackhole' });
  const cutAt = Date.now();
  await deadline(
    until(async () => (await http(c.url, 'GET', '/readyz').catch(() => ({ status: 0 }))).status === 503),
    15_000,
    'C unready',
  );
  const unreadyAfterMs = Date.now() - cutAt;
  // The survivors take C's streams (it stops heartbeating); the records move off C.
  await deadline(
    until(async () => (await Promise.all(ids.map((id) => ownerOf(fleet(), id)))).every((o) => o !== 'C')),
    30_000,
    'C’s streams taken over',
  );
  for (const s of onC) expect(s.isOpen()).toBe(true);

  proxy!.set({ kind: 'pass' });
  const healedAt = Date.now();
  await deadline(Promise.all(onC.map((s) => resultsAfter(s, healedAt, 2))), 30_000, 'results on C after the partition healed');
  const deliveringAfterMs = Math.max(...onC.map((s) => s.received.find((r) => r.atMs > healedAt)!.atMs)) - healedAt;
  await deadline(
    until(async () => (await http(c.url, 'GET', '/readyz')).status === 200),
    15_000,
    'C ready again',
  );

  for (const s of onC) {
    expect(s.isOpen()).toBe(true);
    expect(duplicateIds(s.received)).toEqual([]);
  }
  for (const id of ids) expect(await fleet().session(id)).toMatchObject({ state: 'active' });
  expect(await slotsOfKey(fleet())).toBe(ids.length);
  console.log(
    `redis partition of C: unready after ${unreadyAfterMs} ms; its sockets delivering again ${deliveringAfterMs} ms after the heal`,
  );
}, 180_000);
