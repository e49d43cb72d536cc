/**
 * Redis trouble on real processes. Restarted with its data: streams go on. Restarted empty: the
 * owners re-register their streams (record back with a new epoch, slot held again) and results
 * resume. Paused 5 s (SIGSTOP): creates answer 503 `store_unavailable` in the legacy body, live
 * streams keep running on their owners, and none ends as `lease_expired` because of the outage
 * (the lease is short here and keepalives fail while Redis is away).
 */
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { KEY, deadline, frameBody, http, resultsAfter, sleep, slotsOfKey, until, useFleet } from './fleet-test';

const LEASE_S = 4;
const fleet = useFleet({ env: { LEGACY_LEASE_TTL_SECONDS: String(LEASE_S) } });

const ids: string[] = [];
let sockets: ResultsSocket[] = [];
let keepalives: NodeJS.Timeout | undefined;

/** The client's keepalive every second through each replica in turn; failures (Redis away) are ignored as a retrying client would. */
function keepAlive(): void {
  let n = 0;
  keepalives = setInterval(() => {
    for (const id of ids) void http(fleet().replicas[n++ % 3]!.url, 'POST', `/v0.2/streams/${id}/keepalive`).catch(() => undefined);
  }, 1000);
}

const allResultsAfter = (t: number, n: number) => Promise.all(sockets.map((s) => resultsAfter(s, t, n)));

beforeAll(async () => {
  const [a, b, c] = fleet().replicas;
  for (const r of [a!, b!]) {
    const res = await http(r.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(res.status).toBe(201);
    ids.push((res.body as { stream_id: string }).stream_id);
  }
  keepAlive();
  sockets = await Promise.all(ids.map((id) => openResults(c!.url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(sockets.map((s) => s.waitFor(2))), 30_000, 'first results');
}, 120_000);

afterAll(() => clearInterval(keepalives));

afterEach(() => {
  for (const s of sockets) expect(s.isOpen()).toBe(true);
});

test('Redis restarted with its data: streams go on', async () => {
  const records = await Promise.all(ids.map((id) => fleet().session(id)));
  await fleet().redis!.restart({ keepData: true });
  const t = Date.now();
  await deadline(allResultsAfter(t, 3), 30_000, 'results after the restart');
  for (const [i, id] of ids.entries()) expect(await fleet().session(id)).toMatchObject({ state: 'active', owner: records[i]!.owner });
}, 120_000);

test('Redis restarted empty: owners re-register their streams, results resume', async () => {
  const before = await Promise.all(ids.map((id) => fleet().session(id)));
  await fleet().redis!.restart({ keepData: false });
  const t = Date.now();
  await deadline(
    until(async () => (await Promise.all(ids.map((id) => fleet().session(id)))).every(Boolean)),
    30_000,
    'records re-registered',
  );
  for (const [i, id] of ids.entries()) {
    const rec = (await fleet().session(id))!;
    expect(rec).toMatchObject({ state: 'active', owner: before[i]!.owner });
    expect(Number(rec.epoch)).toBeGreaterThan(Number(before[i]!.epoch));
  }
  expect(await slotsOfKey(fleet())).toBe(ids.length);
  await deadline(allResultsAfter(t, 3), 30_000, 'results after the empty restart');
}, 120_000);

test('Redis paused 5 s: creates answer 503 store_unavailable; no stream ends as lease_expired', async () => {
  const redis = fleet().redis!;
  redis.pause();
  const pausedAt = Date.now();
  try {
    const create = await deadline(
      http(fleet().replica('A').url, 'POST', '/v0.2/streams', { body: frameBody() }),
      15_000,
      'a create during the pause',
    );
    // On failure, what A logged at error level says why.
    const errors = fleet()
      .replica('A')
      .lines.filter((l) => Date.parse(String(l.time)) >= pausedAt && Number(l.level) >= 40);
    expect({ status: create.status, body: create.body, errors: create.status === 503 ? [] : errors }).toMatchObject({
      status: 503,
      body: { error: 'store_unavailable' },
      errors: [],
    });
    // The outage lasts 5 s, longer than the lease: the scenario, not an assertion.
    await sleep(Math.max(0, 5000 - (Date.now() - pausedAt)));
  } finally {
    redis.resume();
  }
  const t = Date.now();
  await deadline(allResultsAfter(t, 3), 30_000, 'results after the pause').catch(async (err: Error) => {
    // Say how each stream ended up, not only that results stopped.
    const states = await Promise.all(
      ids.map(async (id, i) => ({ record: await fleet().session(id), open: sockets[i]!.isOpen(), got: sockets[i]!.received.length })),
    );
    throw new Error(
      `${err.message}: ${JSON.stringify(states.map((x) => ({ open: x.open, got: x.got, state: x.record?.state, endReason: x.record?.endReason, owner: x.record?.owner })))}`,
    );
  });
  // Past a whole lease after recovery, with keepalives flowing again: still active.
  await sleep(LEASE_S * 1000 + 1000);
  for (const id of ids) expect(await fleet().session(id)).toMatchObject({ state: 'active' });
  for (const id of ids) expect((await http(fleet().replica('B').url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  const closes = await deadline(Promise.all(sockets.map((s) => s.closed)), 10_000, 'closed by DELETE');
  expect(closes.every((c) => c.reason === 'client_requested')).toBe(true);
  sockets = [];
}, 120_000);
