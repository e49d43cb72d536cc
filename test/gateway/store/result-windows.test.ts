/**
 * The result-window role of the store (reinfer): what one connection writes, another reads by the
 * result id alone (a second replica); each entry goes after its TTL; a later put replaces; an
 * unreadable stored value is no window. The same from MemoryStore and RedisStore.
 */
import { MemoryStore } from '../../../src/gateway/store/memory';
import { RedisStore } from '../../../src/gateway/store/redis';
import { parseResultWindow } from '../../../src/gateway/store/result-windows';
import type { ResultWindow } from '../../../src/gateway/store/result-windows';
import type { Store } from '../../../src/gateway/store/store';
import { FakeClock } from '../../helpers/fake-clock';
import { startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { deadline, sleep } from '../../helpers/time';

const clip: ResultWindow = { streamId: 's-1', accountId: 'acct-a', mode: 'clip', startMs: 1500, endMs: 2500, maxFps: 2 };
const frame: ResultWindow = { streamId: 's-2', accountId: 'acct-a', mode: 'frame', startMs: 900, endMs: 900, maxFps: 0 };

test('MemoryStore: a UUID result id and any other id stay apart; windows of one stream share one shape until the last goes', async () => {
  const clock = new FakeClock();
  const store = new MemoryStore({ clock });
  const uuid = '0a1b2c3d-4e5f-8a6b-9c7d-8e9f0a1b2c3d';
  // The UUID's 16 bytes as latin1 text: what a packed key looks like, as a plain id.
  const lookalike = Buffer.from(uuid.replace(/-/g, ''), 'hex').toString('latin1');
  await store.putResultWindow(uuid, clip, 10_000);
  await store.putResultWindow(uuid.toUpperCase(), frame, 10_000);
  expect(await store.getResultWindow(uuid)).toEqual(clip);
  expect(await store.getResultWindow(lookalike)).toBeUndefined();
  expect(await store.getResultWindow(uuid.toUpperCase())).toEqual(frame);
  await store.putResultWindow('r-2', { ...clip, startMs: 2500, endMs: 3500 }, 10_000);
  const shapes = (store as unknown as { windowShapes: Map<string, unknown> }).windowShapes;
  expect(shapes.size).toBe(2);
  clock.advance(10_000);
  await store.putResultWindow('r-3', frame, 10_000);
  expect(shapes.size).toBe(1);
  await store.close();
});

test('MemoryStore: read back as written, not the same object; gone after its TTL (and swept on a later put)', async () => {
  const clock = new FakeClock();
  const store = new MemoryStore({ clock });
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
  await store.close();
});

describe('RedisStore', () => {
  let redis: RedisServer;
  let a: Store;
  let b: Store;
  beforeAll(async () => {
    redis = await startRedis();
    [a, b] = await Promise.all([RedisStore.connect(redis.url, { prefix: 'rw:' }), RedisStore.connect(redis.url, { prefix: 'rw:' })]);
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
