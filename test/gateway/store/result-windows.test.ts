/**
 * The result-window role of the store (reinfer): what one connection writes, another reads by the
 * result id alone (a second replica); each entry goes after its TTL; a later put replaces; an
 * unreadable stored value is no window. The same from the memory store and the Redis store; the Redis store writes
 * behind (a flush's windows in one command per shard), so its writer reads its own at once.
 */
import { MemoryResultWindows } from '../../../src/gateway/store/memory/result-windows';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import { EXPIRY_EVERY_WRITES } from '../../../src/gateway/store/redis/result-windows';
import { parseResultWindow } from '../../../src/gateway/store/result-windows';
import type { ResultWindow } from '../../../src/gateway/store/result-windows';
import type { Store } from '../../../src/gateway/store/store';
import { FakeClock } from '../../helpers/fake-clock';
import { serverCommandCalls, startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { deadline, sleep } from '../../helpers/time';
import { logLines } from '../../helpers/log-lines';
import { createLogger } from '../../../src/lib/logger';

const clip: ResultWindow = { streamId: 's-1', accountId: 'acct-a', mode: 'clip', startMs: 1500, endMs: 2500, maxFps: 2 };
const frame: ResultWindow = { streamId: 's-2', accountId: 'acct-a', mode: 'frame', startMs: 900, endMs: 900, maxFps: 0 };

test('memory store: a UUID result id and any other id stay apart; windows of one stream share one shape until the last goes', async () => {
  const clock = new FakeClock();
  const store = new MemoryResultWindows(clock);
  const uuid = '0a1b2c3d-4e5f-8a6b-9c7d-8e9f0a1b2c3d';
  // The UUID's 16 bytes as latin1 text: what a packed key looks like, as a plain id.
  const lookalike = Buffer.from(uuid.replace(/-/g, ''), 'hex').toString('latin1');
  await store.putResultWindow(uuid, clip, 10_000);
  await store.putResultWindow(uuid.toUpperCase(), frame, 10_000);
  expect(await store.getResultWindow(uuid)).toEqual(clip);
  expect(await store.getResultWindow(lookalike)).toBeUndefined();
  expect(await store.getResultWindow(uuid.toUpperCase())).toEqual(frame);
  await store.putResultWindow('r-2', { ...clip, startMs: 2500, endMs: 3500 }, 10_000);
  const shapes = (store as unknown as { shapes: Map<string, unknown> }).shapes;
  expect(shapes.size).toBe(2);
  clock.advance(10_000);
  await store.putResultWindow('r-3', frame, 10_000);
  expect(shapes.size).toBe(1);
  store.clear();
});

test('memory store: read back as written, not the same object; gone after its TTL (and swept on a later put)', async () => {
  const clock = new FakeClock();
  const store = new MemoryResultWindows(clock);
  await store.putResultWindow('r1', clip, 10_000);
  await store.putResultWindow('r2', frame, 20_000);
  const got = await store.getResultWindow('r1');
  expect(got).toEqual(clip);
  got!.endMs = 0;
  expect(await store.getResultWindow('r1')).toEqual(clip);
  expect(await store.getResultWindow('unknown')).toBeUndefined();
  clock.advance(10_000);
  expect(await store.getResultWindow('r1')).toBeUndefined();
  expect(await store.getResultWindow('r2')).toEqual(frame);
  // A later put replaces, with its own TTL.
  await store.putResultWindow('r2', clip, 5_000);
  expect(await store.getResultWindow('r2')).toEqual(clip);
  clock.advance(5_000);
  await store.putResultWindow('r3', frame, 1_000);
  expect((store as unknown as { windows: Map<string, unknown> }).windows.size).toBe(1);
  store.clear();
});

describe('Redis store', () => {
  let redis: RedisServer;
  let a: Store;
  let b: Store;
  const flushMs = 50;
  beforeAll(async () => {
    redis = await startRedis();
    [a, b] = await Promise.all([
      connectRedisStore(redis.url, { prefix: 'rw:', resultWindows: { flushMs } }),
      connectRedisStore(redis.url, { prefix: 'rw:', resultWindows: { flushMs } }),
    ]);
  }, 30_000);
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await redis?.stop();
  });

  test('written on one connection, read on another by the result id; a later put replaces; expires', async () => {
    await a.putResultWindow('r1', clip, 60_000);
    expect(await b.getResultWindow('r1')).toEqual(clip);
    await b.putResultWindow('r1', frame, 60_000);
    expect(await a.getResultWindow('r1')).toEqual(frame);
    expect(await b.getResultWindow('unknown')).toBeUndefined();
    await a.putResultWindow('short', clip, 50);
    await deadline(
      (async () => {
        while ((await b.getResultWindow('short')) !== undefined) await sleep(20);
      })(),
      10_000,
      'the window expired',
    );
  });

  test('a second of windows is one HSET per shard, not a command per result; each hash gets its expiry with the first write and every few after', async () => {
    const store = await connectRedisStore(redis.url, { prefix: 'rx:', resultWindows: { flushMs } });
    try {
      // Clear of a bucket's end (a new bucket is new hashes): the order of events below stays in one.
      const toEnd = 15_000 - (Date.now() % 15_000);
      if (toEnd < 5_000) await sleep(toEnd + 10);
      await redis.command('CONFIG', 'RESETSTAT');
      const ids = Array.from({ length: 200 }, (_, i) => `${(i % 16).toString(16)}${i}-result`);
      await Promise.all(ids.map((id, i) => store.putResultWindow(id, { ...clip, endMs: 2500 + i }, 60_000)));
      const first = await serverCommandCalls(redis);
      expect([first.get('hset'), first.get('pexpireat')]).toEqual([4, 4]);
      // Read back from Redis (nothing is pending once the flush is done).
      expect(await store.getResultWindow(ids[137]!)).toEqual({ ...clip, endMs: 2637 });
      // A hash that lost its expiry (as a failover that lost the first write would leave it) gets it back.
      const bucket = Math.floor(Date.now() / 15_000);
      const hash = `rx:rw:{rw${shardOfId(ids[0]!)}}:${bucket}`;
      expect(await redis.command('PERSIST', hash)).toMatch(/^:1/);
      await redis.command('CONFIG', 'RESETSTAT');
      for (let n = 1; n <= EXPIRY_EVERY_WRITES; n++) {
        await Promise.all(ids.map((id) => store.putResultWindow(id, clip, 60_000)));
        const stats = await serverCommandCalls(redis);
        expect([n, stats.get('hset'), stats.get('pexpireat') ?? 0]).toEqual([n, 4 * n, n < EXPIRY_EVERY_WRITES ? 0 : 4]);
      }
      expect(Number((await redis.command('PTTL', hash)).slice(1))).toBeGreaterThan(60_000);
    } finally {
      await store.close();
    }
  });

  test('the writing replica reads its windows before they are written; another replica once they are (at the latest when the writer closes)', async () => {
    const slow = await connectRedisStore(redis.url, { prefix: 'rw:', resultWindows: { flushMs: 600_000 } });
    const put = slow.putResultWindow('pending-1', clip, 60_000);
    expect(await slow.getResultWindow('pending-1')).toEqual(clip);
    expect(await b.getResultWindow('pending-1')).toBeUndefined();
    await slow.close();
    await expect(put).resolves.toBeUndefined();
    expect(await b.getResultWindow('pending-1')).toEqual(clip);
  });

  /** Resolves once Redis refused an HSET (out of memory): the order of events, not a wait. */
  async function refusedOnce(): Promise<void> {
    await deadline(
      (async () => {
        while (!/cmdstat_hset:.*(rejected|failed)_calls=[1-9]/.test(await redis.command('INFO', 'commandstats'))) await sleep(10);
      })(),
      10_000,
      'Redis refused a window write',
    );
  }

  test('a write Redis refuses is tried again with the next: the put resolves once its window is written', async () => {
    await redis.command('CONFIG', 'RESETSTAT');
    await redis.command('CONFIG', 'SET', 'maxmemory', '1');
    let put: Promise<void>;
    try {
      put = a.putResultWindow('refused-then-written', clip, 60_000);
      await refusedOnce();
      expect(await b.getResultWindow('refused-then-written')).toBeUndefined();
      expect(await a.getResultWindow('refused-then-written')).toEqual(clip);
    } finally {
      await redis.command('CONFIG', 'SET', 'maxmemory', '0');
    }
    await expect(put).resolves.toBeUndefined();
    expect(await b.getResultWindow('refused-then-written')).toEqual(clip);
  });

  test('refused past the retry time: dropped with one log line for the batch, and its puts reject', async () => {
    const { sink, lines } = logLines();
    const store = await connectRedisStore(redis.url, {
      prefix: 'rw:',
      logger: createLogger('warn', 'test', sink),
      resultWindows: { flushMs, retryMs: 0 },
    });
    await redis.command('CONFIG', 'RESETSTAT');
    await redis.command('CONFIG', 'SET', 'maxmemory', '1');
    try {
      const puts = ['d-1', 'd-2', 'd-3'].map((id) => store.putResultWindow(id, clip, 60_000));
      for (const p of puts) await expect(p).rejects.toThrow();
    } finally {
      await redis.command('CONFIG', 'SET', 'maxmemory', '0');
      await store.close();
    }
    const dropped = lines
      .map((l) => JSON.parse(l) as { msg: string; windows?: number })
      .filter((l) => l.msg.startsWith('result windows dropped'));
    expect(dropped).toEqual([expect.objectContaining({ windows: 3 })]);
    expect(await b.getResultWindow('d-1')).toBeUndefined();
  });
});

test('parseResultWindow: only a whole window is one', () => {
  expect(parseResultWindow(JSON.stringify(clip))).toEqual(clip);
  for (const bad of [
    null,
    '',
    'not json',
    '[]',
    '{}',
    JSON.stringify({ ...clip, mode: 'x' }),
    JSON.stringify({ ...clip, endMs: 'x' }),
    JSON.stringify({ ...clip, accountId: 1 }),
  ]) {
    expect(parseResultWindow(bad)).toBeUndefined();
  }
});

/** The shard the Redis store files a result id under (its first character, 4 shards). */
function shardOfId(resultId: string): number {
  return resultId.charCodeAt(0) % 4;
}
