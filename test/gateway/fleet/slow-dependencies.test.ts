/**
 * Slow, not dead, on real processes: every replica reaches Redis through a proxy that holds each
 * packet 200 ms and the upstream through one that holds it 1.5 s (so no replica is a better home
 * than another). Ticks that find their stream's previous inference still running are skipped, not
 * queued; no stream ends, no socket closes, results keep coming, memory stays bounded, and after the
 * slowness the streams run at their interval again.
 */
import { proxyInFront } from '../../helpers/fault-proxy';
import type { FaultProxy } from '../../helpers/fault-proxy';
import { duplicateIds } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { KEY, deadline, frameBody, http, resultsAfter, sleep, useFleet } from './fleet-test';

const proxies: FaultProxy[] = [];
const fleet = useFleet({
  env: { LEGACY_LEASE_TTL_SECONDS: '30' },
  replicaEnv: async (_id, { redisUrl, upstreamUrl }): Promise<Record<string, string>> => {
    const via = async (url: string) => {
      const { proxy, url: through } = await proxyInFront(url);
      proxies.push(proxy);
      return through;
    };
    return { REDIS_URL: await via(redisUrl!), UPSTREAM_URL: await via(upstreamUrl) };
  },
});
afterAll(() => Promise.all(proxies.map((p) => p.close())));

/** The sum of one counter over the replicas' /metrics. */
async function counter(name: string): Promise<number> {
  let sum = 0;
  for (const r of fleet().replicas) {
    const text = String((await http(r.url, 'GET', '/metrics')).body);
    for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum += Number(m[1]);
  }
  return sum;
}

const ids: string[] = [];
let sockets: ResultsSocket[] = [];

beforeAll(async () => {
  for (const r of fleet().replicas) {
    const res = await http(r.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(res.status).toBe(201);
    ids.push((res.body as { stream_id: string }).stream_id);
  }
  sockets = await Promise.all(ids.map((id, i) => openResults(fleet().replicas[(i + 1) % 3]!.url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(sockets.map((s) => s.waitFor(2))), 30_000, 'first results');
}, 120_000);

test('slow Redis and a slow upstream: ticks skip instead of piling up, nothing ends, results go on, memory stays bounded', async () => {
  const rss = () => counter('process_resident_memory_bytes');
  const rssBefore = await rss();
  const skippedBefore = await counter('gateway_legacy_ticks_skipped_total');
  for (const [i, p] of proxies.entries()) p.set({ kind: 'delay', delayMs: i % 2 === 0 ? 200 : 1500 });
  const slowAt = Date.now();
  await sleep(15_000);
  await deadline(Promise.all(sockets.map((s) => resultsAfter(s, slowAt, 2))), 30_000, 'results while slow');
  const skipped = (await counter('gateway_legacy_ticks_skipped_total')) - skippedBefore;
  const rssSlow = await rss();
  for (const p of proxies) p.set({ kind: 'pass' });
  const fastAt = Date.now();
  await deadline(Promise.all(sockets.map((s) => resultsAfter(s, fastAt, 3))), 30_000, 'results at the interval again');

  expect(skipped).toBeGreaterThan(0);
  for (const s of sockets) {
    expect(s.isOpen()).toBe(true);
    expect(duplicateIds(s.received)).toEqual([]);
  }
  for (const id of ids) expect(await fleet().session(id)).toMatchObject({ state: 'active' });
  // Skipped, not queued: three replicas' memory grows by far less than a backlog would take.
  expect(rssSlow - rssBefore).toBeLessThan(3 * 64 * 1024 * 1024);
  console.log(
    `slow dependencies: ${skipped} ticks skipped in 15 s; RSS ${((rssSlow - rssBefore) / 1048576).toFixed(1)} MiB over three replicas`,
  );
}, 180_000);
