/**
 * Telemetry of a fleet: the deprecation report is the fleet's on every replica and survives
 * restarts (two gateways and an emulator on one real redis-server), and the daily roll-up is
 * logged once per day by the whole fleet (three replicas' roll-ups on one store).
 */
import { createLogger } from '../../../src/lib/logger';
import { keyHash } from '../../../src/lib/keys';
import { startGateway } from '../../../src/gateway/server';
import type { RunningGateway } from '../../../src/gateway/server';
import { memoryStore } from '../../../src/gateway/store/memory';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import type { Store } from '../../../src/gateway/store/store';
import { DeprecationRollup } from '../../../src/gateway/telemetry/rollup';
import type { RollupSummary } from '../../../src/gateway/telemetry/rollup';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import type { DeprecationReport } from '../../../src/gateway/telemetry/usage';
import { FakeClock, settle } from '../../helpers/fake-clock';
import { startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { KEY, KEY_B, frameBody, http, startStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import { FAST_RETRY } from '../../helpers/config';
import type { Stack } from '../../helpers/stack';
import { sleep } from '../../helpers/time';

const ADMIN = 'admin-token-for-the-fleet-telemetry-tests';
const DEPRECATION = { date: '2026-01-01T00:00:00Z', sunset: '2026-12-31T00:00:00Z', link: '/docs/migration' };

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
}, 30_000);
afterAll(async () => redis?.stop());

/** The report as any replica serves it, less the instant it was generated. */
async function report(url: string): Promise<Omit<DeprecationReport, 'generated_at'>> {
  const r = await http(url, 'GET', '/admin/deprecation', { key: ADMIN });
  expect(r.status).toBe(200);
  const { generated_at: _at, ...rest } = r.body as DeprecationReport;
  return rest;
}

/** Sum of one counter over replicas' /metrics (their own shares). */
async function metricSum(urls: string[], series: RegExp): Promise<number> {
  let n = 0;
  for (const url of urls) {
    const text = (await http(url, 'GET', '/metrics')).body as string;
    for (const line of text.split('\n')) if (series.test(line)) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

describe('the report of two replicas on one Redis', () => {
  let a: Stack;
  let b: RunningGateway;
  const stores: Store[] = [];
  const connect = async () => {
    const s = await connectRedisStore(redis.url, { prefix: 'fleet-report:' });
    stores.push(s);
    return s;
  };
  beforeAll(async () => {
    a = await startStack({ admin: { token: ADMIN } }, { store: await connect() });
    b = await startGateway(a.cfg, createLogger('silent'), a.emulator.url, { store: await connect(), retry: FAST_RETRY });
  }, 30_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await Promise.all(stores.map((s) => s.close()));
  });

  test('traffic on both: either replica reports the sum (own buffer flushed, the other within its flush second); a new replica on the same Redis still does', async () => {
    const urls = [a.url, b.url];
    // Each replica: model lists, a stream with a results socket and a few results, its delete.
    for (const [i, url] of urls.entries()) {
      for (let n = 0; n <= i; n++) expect((await http(url, 'GET', '/v0.2/models', { key: KEY_B })).status).toBe(200);
      const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
      expect(created.status).toBe(201);
      const id = (created.body as { stream_id: string }).stream_id;
      const sock = await openResults(url, id, KEY);
      await sock.waitFor(2, 15_000);
      expect((await http(url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
      await sock.closed;
    }
    // B's report: B's own counters are written first; A's come with A's next flush (≤ 1 s), no
    // flush forced here: poll (bounded at ~20 s, for a loaded machine) until A's share is in.
    // Inferences: the sum of both replicas' own metrics (re-read: an inference in flight at the
    // delete may still land).
    const expected = async () => ({
      requests: 3 + 2 * 3,
      streams: 2,
      websocket_connections: 2,
      inferences: await metricSum(urls, /^gateway_legacy_inferences_total\{/),
    });
    // A's first uses of each route were written through at once; the rest of its share (the end
    // reasons among them) comes with its flush: wait for that too.
    const ended = (r: Omit<DeprecationReport, 'generated_at'>) =>
      r.keys.find((k) => k.key_hash === keyHash(KEY))?.end_reasons.client_requested === 2;
    let want = await expected();
    let fromB = await report(b.url);
    for (let i = 0; i < 400 && !(matches(fromB, want) && ended(fromB)); i++) {
      await sleep(50);
      [want, fromB] = [await expected(), await report(b.url)];
    }
    expect(want.inferences).toBeGreaterThanOrEqual(4);
    expect(fromB.totals).toMatchObject({ keys: 2, ...want });
    const row = fromB.keys.find((k) => k.key_hash === keyHash(KEY))!;
    expect(row.requests).toEqual({ 'POST /v0.2/streams': 2, 'DELETE /v0.2/streams/:id': 2, 'WS /v0.2/ws/streams/:id': 2 });
    expect(row.end_reasons).toEqual({ client_requested: 2 });
    expect(fromB.keys.find((k) => k.key_hash === keyHash(KEY_B))!.requests).toEqual({ 'GET /v0.2/models': 3 });
    expect(await report(a.url)).toEqual(fromB);

    // Both replicas gone (a deploy, a crash after their last flush): a new one on the same Redis.
    await b.close();
    await a.gateway.close();
    const c = await startGateway(a.cfg, createLogger('silent'), a.emulator.url, { store: await connect() });
    try {
      expect(await report(c.url)).toEqual(fromB);
    } finally {
      await c.close();
    }
  }, 60_000);
});

function matches(r: Omit<DeprecationReport, 'generated_at'>, expected: Partial<DeprecationReport['totals']>): boolean {
  return Object.entries(expected).every(([k, v]) => r.totals[k as keyof DeprecationReport['totals']] === v);
}

const fleets: [string, () => Promise<{ stores: Store[]; close(): Promise<void> }>][] = [
  [
    'one memory store',
    async () => {
      const one = memoryStore();
      return { stores: [one, one, one], close: () => one.close() };
    },
  ],
  [
    'one redis-server',
    async () => {
      const prefix = `fleet-rollup-${Math.random().toString(36).slice(2)}:`;
      const stores = await Promise.all([0, 1, 2].map(() => connectRedisStore(redis.url, { prefix })));
      return { stores, close: async () => void (await Promise.all(stores.map((s) => s.close()))) };
    },
  ],
];

describe.each(fleets)('the daily roll-up of three replicas on %s', (_name, makeFleet) => {
  test('exactly one replica logs each day; the summary has every replica’s usage; the shutdown summary does not take the day', async () => {
    const fleet = await makeFleet();
    const clock = new FakeClock(Date.parse('2026-03-02T00:05:00Z'));
    // One list for the fleet, in the order lines were written: which replica logs a day is a race.
    const lines: string[] = [];
    const replicas = fleet.stores.map((store, i) => {
      const usage = new DeprecationUsage(store, createLogger('silent'), clock);
      const logger = createLogger('info', `replica-${i}`, { write: (s: string) => void lines.push(s) });
      return {
        usage,
        rollup: new DeprecationRollup({ usage, store, logger, deprecation: DEPRECATION, cron: '5 0 * * *', timezone: 'UTC', clock }),
      };
    });
    const summaries = () =>
      lines
        .map((s) => JSON.parse(s) as { rollup?: RollupSummary })
        .filter((x) => x.rollup)
        .map((x) => x.rollup!);
    try {
      // Yesterday's traffic, one key per replica, counters written by each replica's flush.
      clock.set(Date.parse('2026-03-01T12:00:00Z'));
      replicas.forEach((r, i) => r.usage.request(`key-${i}`, 'GET /v0.2/models'));
      await Promise.all(replicas.map((r) => r.usage.flush()));

      // Every replica's cron fires at 00:05 for 2026-03-01, at once.
      clock.set(Date.parse('2026-03-02T00:05:00Z'));
      const ran = await Promise.all(replicas.map((r) => r.rollup.run()));
      expect(ran.filter((s) => s !== undefined)).toHaveLength(1);
      expect(summaries()).toHaveLength(1);
      const [summary] = summaries();
      expect(summary.day).toMatchObject({ date: '2026-03-01', active_keys: 3, requests: 3 });
      expect(summary.totals.keys).toBe(3);

      // A replica shutting down on 2026-03-02 logs the day so far, once for the fleet; the day's
      // own run on 2026-03-03 still happens (once).
      clock.set(Date.parse('2026-03-02T18:00:00Z'));
      const partial = await Promise.all(replicas.map((r) => r.rollup.run('2026-03-02', { partial: true })));
      expect(partial.filter((s) => s !== undefined)).toHaveLength(1);
      clock.set(Date.parse('2026-03-03T00:05:00Z'));
      const next = await Promise.all(replicas.map((r) => r.rollup.run()));
      expect(next.filter((s) => s !== undefined)).toHaveLength(1);
      expect(summaries().map((s) => s.day.date)).toEqual(['2026-03-01', '2026-03-02', '2026-03-02']);
      // A late or repeated run of a day already logged (a cron firing twice, a restart) logs nothing.
      expect(await replicas[2].rollup.run('2026-03-01')).toBeUndefined();
      expect(summaries()).toHaveLength(3);
    } finally {
      await Promise.all(replicas.map((r) => r.rollup.stop()));
      await fleet.close();
    }
  });
});

test('Redis away: counters are kept in the replica and land once Redis is back (own redis-server, stopped and restarted)', async () => {
  const own = await startRedis();
  const store = await connectRedisStore(own.url, { prefix: 'outage:', commandTimeoutMs: 500 });
  const usage = new DeprecationUsage(store, createLogger('silent'), new FakeClock(Date.parse('2026-03-01T12:00:00Z')));
  let running: RedisServer | undefined = own;
  try {
    usage.request('kh', 'GET /v0.2/models');
    await usage.flush();
    await own.stop();
    running = undefined;
    for (let i = 0; i < 5; i++) {
      usage.inference('kh', true, 10);
      await usage.flush(); // refused: kept
    }
    running = await startRedis([], own.port); // empty: what was written before the outage is gone with it
    const landed = async () => (await store.hgetall('depr:key:kh').catch(() => ({}) as Record<string, number>))['inferences:ok'] === 5;
    // Until the reconnected store takes a flush (bounded at ~20 s: reconnecting is slower on a loaded machine).
    for (let i = 0; i < 800 && !(await landed()); i++) {
      await usage.flush();
      await sleep(25);
    }
    expect(await store.hgetall('depr:key:kh')).toEqual({ 'inferences:ok': 5, output_tokens: 50 });
  } finally {
    await usage.close();
    await store.close();
    await running?.stop();
  }
}, 60_000);

test('the daily run retries every minute while the store cannot be reached to claim the day, then logs it once', async () => {
  const clock = new FakeClock(Date.parse('2026-03-02T00:05:00Z'));
  const store = memoryStore();
  const claimOnce = store.claimOnce.bind(store);
  let refusals = 2;
  store.claimOnce = (key, ttl) => (refusals-- > 0 ? Promise.reject(new Error('store down')) : claimOnce(key, ttl));
  const lines: string[] = [];
  const usage = new DeprecationUsage(store, createLogger('silent'), clock);
  const rollup = new DeprecationRollup({
    usage,
    store,
    logger: createLogger('info', 'replica', { write: (s: string) => void lines.push(s) }),
    deprecation: DEPRECATION,
    cron: '5 0 * * *',
    timezone: 'UTC',
    clock,
  });
  const logged = () => lines.map((l) => JSON.parse(l) as { msg: string; rollup?: RollupSummary; day?: string });
  try {
    await rollup.runDaily();
    expect(logged().map((l) => l.msg)).toEqual([expect.stringMatching(/could not be reached to claim/)]);
    clock.advance(60_000);
    await settle();
    expect(logged().filter((l) => l.rollup)).toHaveLength(0);
    // Past midnight's minute and its first retry: the same day (2026-03-01) is still the one summarised.
    clock.advance(60_000);
    await settle();
    expect(
      logged()
        .filter((l) => l.rollup)
        .map((l) => l.rollup!.day.date),
    ).toEqual(['2026-03-01']);
    clock.advance(10 * 60_000);
    await settle();
    expect(logged().filter((l) => l.rollup)).toHaveLength(1);
    expect(logged().filter((l) => /could not be reached/.test(l.msg))).toHaveLength(2);
  } finally {
    await rollup.stop();
    await store.close();
  }
});
