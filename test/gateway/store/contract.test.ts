/**
 * The store contract: the same behaviour from MemoryStore (one process) and RedisStore (a real
 * redis-server started for this file), so the gateway cannot tell them apart.
 */
import { MemoryStore } from '../../../src/gateway/store/memory';
import { RedisStore } from '../../../src/gateway/store/redis';
import { FLEET_DEFAULTS } from '../../../src/gateway/store/store';
import type { FeedbackRecord, SessionRecord, Store } from '../../../src/gateway/store/store';
import { startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { deadline, sleep } from '../../helpers/time';

let redis: RedisServer;
let seq = 0;
beforeAll(async () => {
  redis = await startRedis();
}, 30_000);
afterAll(async () => redis?.stop());

const factories: [string, () => Promise<Store>][] = [
  ['MemoryStore', async () => new MemoryStore()],
  // A prefix per store: tests on one server never see each other's keys.
  ['RedisStore', () => RedisStore.connect(redis.url, { prefix: `t${++seq}:` })],
];

function session(streamId: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    streamId,
    keyHash: 'kh1',
    slotId: streamId,
    accountId: 'acct-1',
    state: 'active',
    endReason: null,
    createdAtMs: 1_000,
    endedAtMs: null,
    leaseExpiresAtMs: 61_000,
    prompt: 'describe {x}',
    promptUpdatedAtMs: 1_000,
    spec: { mode: 'frame', nested: { list: [1, 'two', null] } },
    ...FLEET_DEFAULTS,
    fallbackModels: [],
    ...over,
  };
}

function feedback(id: string, streamId: string, accountId = 'acct-1'): FeedbackRecord {
  return { id, stream_id: streamId, accountId, rating: 4, category: 'accuracy', feedback: `fb ${id}`, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' };
}

/** Polls `check` until it holds (bounded): waits on an event, never on a time window. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!(await check())) await sleep(10);
    })(),
    10_000,
    what,
  );
}

describe.each(factories)('%s', (_name, make) => {
  let store: Store;
  beforeEach(async () => {
    store = await make();
  });
  afterEach(async () => store.close());

  test('60 concurrent acquires of one key grant exactly 5, round after round; each slot is released once', async () => {
    for (let round = 0; round < 8; round++) {
      const ids = Array.from({ length: 60 }, (_, i) => `r${round}-s${i}`);
      const granted = await Promise.all(ids.map((id) => store.acquireSlot('key-a', id, 5)));
      const winners = ids.filter((_, i) => granted[i]);
      expect(winners).toHaveLength(5);
      expect(await store.slotsInUse('key-a')).toBe(5);
      // Holding a slot already is not a second one.
      expect(await store.acquireSlot('key-a', winners[0], 5)).toBe(true);
      expect(await store.slotsInUse('key-a')).toBe(5);
      // Another key is counted apart.
      expect(await store.acquireSlot('key-b', `r${round}-other`, 5)).toBe(true);
      const releases = await Promise.all([...winners, ...winners].map((id) => store.releaseSlot('key-a', id)));
      expect(releases.filter(Boolean)).toHaveLength(5);
      expect(await store.releaseSlot('key-a', 'never-held')).toBe(false);
      expect(await store.slotsInUse('key-a')).toBe(0);
      expect(await store.releaseSlot('key-b', `r${round}-other`)).toBe(true);
    }
  });

  test('sessions: put, get (a copy), update returns the new record, absent stays absent', async () => {
    const rec = session('s-1');
    await store.putSession(rec);
    expect(await store.getSession('s-1')).toEqual(rec);
    const got = (await store.getSession('s-1'))!;
    got.prompt = 'changed locally';
    expect((await store.getSession('s-1'))!.prompt).toBe('describe {x}');
    const updated = await store.updateSession('s-1', { state: 'ended', endReason: 'client_requested', endedAtMs: 5_000 });
    expect(updated).toEqual({ ...rec, state: 'ended', endReason: 'client_requested', endedAtMs: 5_000 });
    expect(await store.getSession('s-1')).toEqual(updated);
    expect(await store.updateSession('absent', { prompt: 'x' })).toBeUndefined();
    expect(await store.getSession('absent')).toBeUndefined();
    await store.putSession(session('s-1', { prompt: 'replaced' }));
    expect((await store.getSession('s-1'))!.prompt).toBe('replaced');
  });

  test('feedback caps hold under concurrent adds; pages are oldest first with a cursor', async () => {
    const limits = { perStream: 3, perAccount: 7 };
    const first = await Promise.all(Array.from({ length: 20 }, (_, i) => store.addFeedback(feedback(`a${i}`, 'st-1'), limits)));
    expect(first.filter((r) => r === 'ok')).toHaveLength(3);
    expect(first.filter((r) => r === 'stream_full')).toHaveLength(17);
    const more = await Promise.all(Array.from({ length: 20 }, (_, i) => store.addFeedback(feedback(`b${i}`, `st-${2 + (i % 5)}`), limits)));
    expect(more.filter((r) => r === 'ok')).toHaveLength(4);
    expect(more.filter((r) => r !== 'ok').every((r) => r === 'account_full' || r === 'stream_full')).toBe(true);
    expect(more).toContain('account_full');
    // Another account is counted apart.
    expect(await store.addFeedback(feedback('c0', 'st-9', 'acct-2'), limits)).toBe('ok');

    const seen: FeedbackRecord[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const page = await store.feedbackOf('acct-1', { limit: 3, after });
      seen.push(...page.items);
      if (!page.next) break;
      expect(page.items).toHaveLength(3);
      after = page.next;
    }
    expect(seen).toHaveLength(7);
    expect(seen.slice(0, 3).map((f) => f.stream_id)).toEqual(['st-1', 'st-1', 'st-1']);
    expect(new Set(seen.map((f) => f.id)).size).toBe(7);
    expect(seen.every((f) => f.accountId === 'acct-1')).toBe(true);
    expect((await store.feedbackOf('acct-2', { limit: 10 })).items.map((f) => f.id)).toEqual(['c0']);
    expect(await store.feedbackOf('nobody', { limit: 10 })).toEqual({ items: [], next: null });
  });

  test('an expired session goes with its feedback; other streams keep theirs and the account has room again', async () => {
    const limits = { perStream: 5, perAccount: 4 };
    await store.putSession(session('gone'));
    await store.putSession(session('kept'));
    for (const id of ['g1', 'g2']) expect(await store.addFeedback(feedback(id, 'gone'), limits)).toBe('ok');
    for (const id of ['k1', 'k2']) expect(await store.addFeedback(feedback(id, 'kept'), limits)).toBe('ok');
    expect(await store.addFeedback(feedback('x', 'kept'), limits)).toBe('account_full');
    await store.expireSession('gone', 30);
    await until(async () => (await store.getSession('gone')) === undefined, 'tombstone expiry');
    expect((await store.feedbackOf('acct-1', { limit: 10 })).items.map((f) => f.id)).toEqual(['k1', 'k2']);
    expect(await store.getSession('kept')).toBeDefined();
    expect(await store.addFeedback(feedback('k3', 'kept'), limits)).toBe('ok');
    await store.expireSession('absent', 10);
  });

  test('fan-out: every subscriber gets every later message in publish order; unsubscribe stops it', async () => {
    const a: string[] = [];
    const b: string[] = [];
    let allA!: () => void;
    const gotAllA = new Promise<void>((resolve) => (allA = resolve));
    await store.subscribe('chan', (m) => {
      a.push(m);
      if (m === 'end') allA();
    });
    const unsubB = await store.subscribe('chan', (m) => b.push(m));
    await store.subscribe('other', () => a.push('wrong channel'));
    const messages = Array.from({ length: 100 }, (_, i) => `r${i}`);
    await Promise.all([...messages, 'end'].map((m) => store.publish('chan', m)));
    await deadline(gotAllA, 10_000, 'all messages');
    expect(a).toEqual([...messages, 'end']);
    await until(async () => b.length === 101, 'second subscriber');
    expect(b).toEqual([...messages, 'end']);

    unsubB();
    unsubB();
    let third!: () => void;
    const gotThird = new Promise<void>((resolve) => (third = resolve));
    await store.subscribe('chan', (m) => m === 'after' && third());
    await store.publish('chan', 'after');
    await deadline(gotThird, 10_000, 'delivery after an unsubscribe');
    // Same connection, in order: once a later subscriber saw it, the first one has too.
    await until(async () => a.length === 102, 'first subscriber');
    expect(a[101]).toBe('after');
    expect(b).toHaveLength(101);
  });

  test('telemetry hashes: increments, min/max, delete fields, keys by prefix', async () => {
    await Promise.all([store.hincr('usage:key:k1', 'req'), store.hincr('usage:key:k1', 'req', 4), store.hincr('usage:key:k1', 'tokens', 2.5)]);
    await Promise.all([10, 3, 7].map((v) => store.hsetMin('usage:key:k1', 'first', v)));
    await Promise.all([10, 3, 17, 7].map((v) => store.hsetMax('usage:key:k1', 'last', v)));
    await store.hincr('usage:key:k*2', 'req');
    await store.hincr('usage:day:2026-01-01', 'req');
    expect(await store.hgetall('usage:key:k1')).toEqual({ req: 5, tokens: 2.5, first: 3, last: 17 });
    await store.hdel('usage:key:k1', ['tokens', 'absent']);
    await store.hdel('usage:key:k1', []);
    expect(await store.hgetall('usage:key:k1')).toEqual({ req: 5, first: 3, last: 17 });
    expect((await store.keys('usage:key:')).sort()).toEqual(['usage:key:k*2', 'usage:key:k1']);
    expect(await store.keys('usage:key:k*')).toEqual(['usage:key:k*2']);
    await store.hdel('usage:key:k*2', ['req']);
    expect(await store.keys('usage:key:')).toEqual(['usage:key:k1']);
    expect(await store.hgetall('absent')).toEqual({});
    expect(await store.ready()).toBe(true);
  });
});

describe('RedisStore with Redis gone', () => {
  test('calls fail fast (no queueing, no hang), ready() is false, close() returns', async () => {
    const own = await startRedis();
    // ioredis keeps a refused command's timeout timer until it fires: short, so jest exits at once.
    const store = await RedisStore.connect(own.url, { prefix: 'gone:', commandTimeoutMs: 200 });
    expect(await store.acquireSlot('k', 's1', 5)).toBe(true);
    await own.stop();
    await deadline(expect(store.acquireSlot('k', 's2', 5)).rejects.toThrow(), 10_000, 'acquire with Redis gone');
    await deadline(expect(store.subscribe('c', () => undefined)).rejects.toThrow(), 10_000, 'subscribe with Redis gone');
    expect(await deadline(store.ready(), 10_000, 'ready')).toBe(false);
    await deadline(store.close(), 10_000, 'close');
  });
});

test('RedisStore: a subscription comes back after Redis restarts (ioredis resubscribes)', async () => {
  const first = await startRedis();
  const store = await RedisStore.connect(first.url, { prefix: 'restart:' });
  const got: string[] = [];
  await store.subscribe('chan', (m) => got.push(m));
  await first.stop();
  const second = await startRedis([], first.port);
  try {
    // Publish until the resubscribed connection hears one (bounded): the restart is an event, not a window.
    await until(async () => {
      await store.publish('chan', 'back').catch(() => undefined);
      return got.includes('back');
    }, 'delivery after the restart');
    expect(got.every((m) => m === 'back')).toBe(true);
  } finally {
    await store.close();
    await second.stop();
  }
});

// Batched telemetry (the fleet-telemetry lane): one call per flush, whatever the number of hashes.
describe.each(factories)('%s: hbatch (a replica flushing its buffered telemetry)', (_name, make) => {
  let store: Store;
  beforeEach(async () => {
    store = await make();
  });
  afterEach(async () => store.close());

  test('adds, lowers and raises fields of several hashes; absent fields take the value; other fields stay', async () => {
    await store.hincr('depr:key:a', 'kept', 7);
    await store.hsetMin('depr:key:a', 'first', 500);
    await store.hsetMax('depr:key:a', 'last', 500);
    await store.hbatch([
      { key: 'depr:key:a', incr: { req: 3, tokens: 2.5 }, min: { first: 400, fresh_min: 9 }, max: { last: 450, fresh_max: 8 } },
      { key: 'depr:day:2026-03-01', incr: { requests: 3, 'key:a': 3 } },
      { key: 'depr:key:empty' },
    ]);
    await store.hbatch([]);
    await store.hbatch([{ key: 'depr:key:a', incr: { req: 1, tokens: 0.25 }, min: { first: 600 }, max: { last: 900 } }]);
    expect(await store.hgetall('depr:key:a')).toEqual({ kept: 7, req: 4, tokens: 2.75, first: 400, last: 900, fresh_min: 9, fresh_max: 8 });
    expect(await store.hgetall('depr:day:2026-03-01')).toEqual({ requests: 3, 'key:a': 3 });
    // An update with no fields writes nothing (no empty hash appears).
    expect((await store.keys('depr:')).sort()).toEqual(['depr:day:2026-03-01', 'depr:key:a']);
  });

  test('concurrent flushes of several replicas sum exactly and keep the extremes (atomic per hash)', async () => {
    const replicas = 12;
    await Promise.all(
      Array.from({ length: replicas }, (_, r) =>
        store.hbatch([
          { key: 'depr:key:shared', incr: { req: r + 1, 'inferences:ok': 2 }, min: { first_seen_ms: 1_763_900_000_000 + r }, max: { last_seen_ms: 1_763_900_000_000 + r } },
          { key: `depr:key:own${r}`, incr: { req: 1 } },
        ]),
      ),
    );
    expect(await store.hgetall('depr:key:shared')).toEqual({
      req: (replicas * (replicas + 1)) / 2,
      'inferences:ok': 2 * replicas,
      first_seen_ms: 1_763_900_000_000,
      last_seen_ms: 1_763_900_000_000 + replicas - 1,
    });
    expect(await store.keys('depr:key:own')).toHaveLength(replicas);
  });

  test('large integers stay exact; thousands of fields in one hash (past the script chunk) all land', async () => {
    const big = 2 ** 52 + 1;
    await store.hbatch([{ key: 'depr:key:big', incr: { n: big }, max: { last_seen_ms: 1_763_900_000_123 } }]);
    await store.hbatch([{ key: 'depr:key:big', incr: { n: 2 } }]);
    expect(await store.hgetall('depr:key:big')).toEqual({ n: big + 2, last_seen_ms: 1_763_900_000_123 });
    const incr = Object.fromEntries(Array.from({ length: 2_500 }, (_, i) => [`key:k${i}`, i + 1]));
    await store.hbatch([{ key: 'depr:day:wide', incr }, { key: 'depr:day:wide', incr: { 'key:k0': 1 } }]);
    const wide = await store.hgetall('depr:day:wide');
    expect(Object.keys(wide)).toHaveLength(2_500);
    expect(wide['key:k0']).toBe(2);
    expect(wide['key:k2499']).toBe(2_500);
  });
});
