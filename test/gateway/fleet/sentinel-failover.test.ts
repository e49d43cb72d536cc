/**
 * A fleet on Redis behind Sentinel (`redis+sentinel://`), on real processes: the primary is
 * SIGKILLed, the sentinels promote a replica, the replicas follow it without a restart, and the
 * old primary comes back as a replica. Every stream goes on (none ends), no socket receives a
 * result id twice (a tick whose commit the failover lost runs again under the same id, and the
 * sockets drop the repeat), the stream limit stays exact, and the gap in results is printed.
 */
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { duplicateIds, longestGap } from '../../helpers/fleet';
import { KEY, deadline, frameBody, http, resultsAfter, slotsOfKey, useFleet } from './fleet-test';

const fleet = useFleet({ store: 'sentinel', env: { LEGACY_LEASE_TTL_SECONDS: '10' } });

const ids: string[] = [];
let sockets: ResultsSocket[] = [];
let keepalives: NodeJS.Timeout | undefined;

beforeAll(async () => {
  const [a, b, c] = fleet().replicas;
  for (const r of [a!, b!, c!, a!]) {
    const res = await http(r.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(res.status).toBe(201);
    ids.push((res.body as { stream_id: string }).stream_id);
  }
  // A client's keepalive every 2 s, failures (the store away) ignored as a retrying client would.
  let n = 0;
  keepalives = setInterval(() => {
    for (const id of ids) void http(fleet().replicas[n++ % 3]!.url, 'POST', `/v0.2/streams/${id}/keepalive`).catch(() => undefined);
  }, 2000);
  // Each stream's socket on another replica than the one that created it.
  sockets = await Promise.all(ids.map((id, i) => openResults(fleet().replicas[(i + 1) % 3]!.url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(sockets.map((s) => s.waitFor(2))), 30_000, 'first results');
}, 120_000);

afterAll(() => clearInterval(keepalives));

test('the primary dies: streams go on through the promoted replica, no result id twice, the limit exact', async () => {
  const set = fleet().sentinel!;
  const t = Date.now();
  const { old } = await set.failover();
  const promotedAfterMs = Date.now() - t;
  await deadline(Promise.all(sockets.map((s) => resultsAfter(s, Date.now(), 3))), 60_000, 'results through the promoted primary');
  await set.rejoin(old);
  const rejoined = Date.now();
  await deadline(Promise.all(sockets.map((s) => resultsAfter(s, rejoined, 2))), 30_000, 'results with the old primary a replica');

  for (const s of sockets) {
    expect(s.isOpen()).toBe(true);
    expect(duplicateIds(s.received)).toEqual([]);
  }
  for (const id of ids) expect(await fleet().session(id)).toMatchObject({ state: 'active' });
  expect(await slotsOfKey(fleet())).toBe(ids.length);
  const gaps = sockets.map((s) => longestGap(s.received, t - 2000));
  console.log(
    `sentinel failover: promoted after ${promotedAfterMs} ms; longest result gap per stream ${gaps.join(', ')} ms (1 s interval)`,
  );
}, 180_000);
