/**
 * A gray failure on real processes: replica C loses its path to the upstream (a fault proxy cuts
 * it) while A and B keep theirs. After a few ticks in a row without an answer, C marks itself
 * impaired, answers /readyz 503 (A and B reach the upstream) and hands its streams to them, where
 * they tick successfully again: nothing ends, no socket closes, no result id arrives twice. Healed:
 * once the probe answers and no tick has failed for the recovery time, C withdraws the mark, is a
 * target again and ready.
 */
import { proxyInFront } from '../../helpers/fault-proxy';
import type { FaultProxy } from '../../helpers/fault-proxy';
import { duplicateIds } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { KEY, deadline, frameBody, http, ownerOf, until, useFleet } from './fleet-test';

let proxy: FaultProxy | undefined;
const fleet = useFleet({
  env: { LEGACY_LEASE_TTL_SECONDS: '30' },
  // A probe every second: C counts as recovered 2 s after the heal.
  config: { telemetry: { upstreamProbeMs: 1000 } },
  replicaEnv: async (id, { upstreamUrl }): Promise<Record<string, string>> => {
    if (id !== 'C') return {};
    const through = await proxyInFront(upstreamUrl);
    proxy = through.proxy;
    return { UPSTREAM_URL: through.url };
  },
});
afterAll(() => proxy?.close());

const ids: string[] = [];
let sockets: ResultsSocket[] = [];

/** Resolves once `s` has `n` successful results that arrived after `t`. */
const okResultsAfter = (s: ResultsSocket, t: number, n: number) =>
  until(() => s.received.filter((r) => r.atMs > t && r.message.ok === true).length >= n);

beforeAll(async () => {
  const c = fleet().replica('C');
  for (let i = 0; i < 2; i++) {
    const res = await http(c.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(res.status).toBe(201);
    ids.push((res.body as { stream_id: string }).stream_id);
  }
  sockets = await Promise.all(ids.map((id) => openResults(fleet().replica('A').url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(sockets.map((s) => okResultsAfter(s, 0, 2))), 30_000, 'first results');
}, 120_000);

test('a replica cut from the upstream hands its streams to replicas that reach it, and takes streams again once healed', async () => {
  for (const id of ids) expect(await ownerOf(fleet(), id)).toBe('C');
  proxy!.set({ kind: 'cut' });
  const cutAt = Date.now();
  await deadline(
    until(async () => (await Promise.all(ids.map((id) => ownerOf(fleet(), id)))).every((o) => o !== 'C')),
    30_000,
    'C’s streams handed over',
  );
  const movedAfterMs = Date.now() - cutAt;
  expect(await fleet().redisCall('SMEMBERS', 'lg:impaired')).toEqual(['C']);
  const gauge = async (id: string) =>
    /^gateway_fleet_upstream_impaired (\S+)$/m.exec(String((await http(fleet().replica(id).url, 'GET', '/metrics')).body))?.[1];
  expect([await gauge('C'), await gauge('A')]).toEqual(['1', '0']);
  // The balancer is told to send C's new work (creates, keepalives) to A and B.
  const ready = async (id: string) => http(fleet().replica(id).url, 'GET', '/readyz');
  expect(await ready('C')).toMatchObject({ status: 503, body: { store: true, draining: false, upstream_impaired: true } });
  expect(await ready('A')).toMatchObject({ status: 200, body: { upstream_impaired: false } });
  const movedAt = Date.now();
  await deadline(Promise.all(sockets.map((s) => okResultsAfter(s, movedAt, 2))), 30_000, 'successful results from A or B');

  proxy!.set({ kind: 'pass' });
  const healedAt = Date.now();
  await deadline(
    until(async () => ((await fleet().redisCall('SMEMBERS', 'lg:impaired')) as string[]).length === 0),
    30_000,
    'C’s impaired mark withdrawn',
  );
  const recoveredAfterMs = Date.now() - healedAt;
  await deadline(
    until(async () => (await ready('C')).status === 200),
    10_000,
    'C ready again',
  );

  for (const s of sockets) {
    expect(s.isOpen()).toBe(true);
    expect(duplicateIds(s.received)).toEqual([]);
  }
  for (const id of ids) expect(await fleet().session(id)).toMatchObject({ state: 'active' });
  console.log(
    `upstream partition of C: streams handed over ${movedAfterMs} ms after the cut; mark withdrawn ${recoveredAfterMs} ms after the heal`,
  );
}, 180_000);
