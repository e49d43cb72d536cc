/**
 * The store contract: the same behaviour from the memory store (one process), the Redis store on a real
 * redis-server and the Redis store on a real 3-node Redis Cluster (both started for this file), so the
 * gateway cannot tell them apart and every script keeps its keys on one hash tag.
 */
import { memoryStore } from '../../../src/gateway/store/memory';
import { measuredStore } from '../../../src/gateway/store/measured';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import { buildStreamRecord } from '../../../src/gateway/legacy/streams/stream-record';
import type { FeedbackRecord, StreamRecord, Store, TickCommit } from '../../../src/gateway/store/store';
import { serverCommandCalls, startRedis, startRedisCluster } from '../../helpers/redis';
import type { RedisCluster, RedisServer } from '../../helpers/redis';
import { deadline, sleep } from '../../helpers/time';
import { hincr, hsetMax, hsetMin, slotsInUse } from '../../helpers/store-ops';

let redis: RedisServer;
let cluster: RedisCluster;
let seq = 0;
beforeAll(async () => {
  [redis, cluster] = await Promise.all([startRedis(), startRedisCluster(3)]);
}, 60_000);
afterAll(async () => Promise.all([redis?.stop(), cluster?.stop()]));

/**
 * `make` builds a fresh store; `peer` another connection onto the same data (a second replica):
 * the memory store's peer is the same instance, Redis's a new connection with the same prefix.
 */
interface Fleet {
  store: Store;
  peer(): Promise<Store>;
}
const factories: [string, () => Promise<Fleet>][] = [
  [
    'memory store',
    async () => {
      const store = memoryStore();
      return { store, peer: async () => store };
    },
  ],
  [
    'Redis store',
    async () => {
      // A prefix per store: tests on one server never see each other's keys.
      const prefix = `t${++seq}:`;
      return { store: await connectRedisStore(redis.url, { prefix }), peer: () => connectRedisStore(redis.url, { prefix }) };
    },
  ],
  [
    'Redis store on a 3-node Cluster',
    async () => {
      const prefix = `t${++seq}:`;
      return { store: await connectRedisStore(cluster.url, { prefix }), peer: () => connectRedisStore(cluster.url, { prefix }) };
    },
  ],
];

function session(streamId: string, over: Partial<StreamRecord> = {}): StreamRecord {
  return {
    ...buildStreamRecord<unknown>({
      streamId,
      keyHash: 'kh1',
      slotId: streamId,
      accountId: 'acct-1',
      nowMs: 1_000,
      leaseExpiresAtMs: 61_000,
      prompt: 'describe {x}',
      spec: { mode: 'frame', nested: { list: [1, 'two', null] } },
      owner: null,
    }),
    ...over,
  };
}

function feedback(id: string, streamId: string, accountId = 'acct-1'): FeedbackRecord {
  return {
    id,
    stream_id: streamId,
    accountId,
    rating: 4,
    category: 'accuracy',
    feedback: `fb ${id}`,
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
  };
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
  let fleet: Fleet;
  const peers: Store[] = [];
  beforeEach(async () => {
    fleet = await make();
    store = fleet.store;
  });
  afterEach(async () => {
    await Promise.all([store, ...peers.splice(0)].map((s) => s.close()));
  });
  /** `n` stores onto the same data, the first being `store`. */
  async function replicas(n: number): Promise<Store[]> {
    const more = await Promise.all(Array.from({ length: n - 1 }, () => fleet.peer()));
    peers.push(...more);
    return [store, ...more];
  }

  test('60 concurrent acquires of one key grant exactly 5, round after round; each slot is released once', async () => {
    for (let round = 0; round < 8; round++) {
      const ids = Array.from({ length: 60 }, (_, i) => `r${round}-s${i}`);
      const granted = await Promise.all(ids.map((id) => store.acquireSlot('key-a', id, 5)));
      const winners = ids.filter((_, i) => granted[i]);
      expect(winners).toHaveLength(5);
      expect(await slotsInUse(store, 'key-a')).toBe(5);
      // Holding a slot already is not a second one.
      expect(await store.acquireSlot('key-a', winners[0], 5)).toBe(true);
      expect(await slotsInUse(store, 'key-a')).toBe(5);
      // Another key is counted apart.
      expect(await store.acquireSlot('key-b', `r${round}-other`, 5)).toBe(true);
      const releases = await Promise.all([...winners, ...winners].map((id) => store.releaseSlot('key-a', id)));
      expect(releases.filter(Boolean)).toHaveLength(5);
      expect(await store.releaseSlot('key-a', 'never-held')).toBe(false);
      expect(await slotsInUse(store, 'key-a')).toBe(0);
      expect(await store.releaseSlot('key-b', `r${round}-other`)).toBe(true);
    }
  });

  test('streams: put, get (a copy), update returns the new record, absent stays absent', async () => {
    const rec = session('s-1');
    await store.putRecord(rec);
    expect(await store.getRecord('s-1')).toEqual(rec);
    const got = (await store.getRecord('s-1'))!;
    got.prompt = 'changed locally';
    expect((await store.getRecord('s-1'))!.prompt).toBe('describe {x}');
    const updated = await store.updateRecord('s-1', { state: 'ended', endReason: 'client_requested', endedAtMs: 5_000 });
    expect(updated).toEqual({ ...rec, state: 'ended', endReason: 'client_requested', endedAtMs: 5_000 });
    expect(await store.getRecord('s-1')).toEqual(updated);
    expect(await store.updateRecord('absent', { prompt: 'x' })).toBeUndefined();
    expect(await store.getRecord('absent')).toBeUndefined();
    await store.putRecord(session('s-1', { prompt: 'replaced' }));
    expect((await store.getRecord('s-1'))!.prompt).toBe('replaced');
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
    await store.putRecord(session('gone'));
    await store.putRecord(session('kept'));
    for (const id of ['g1', 'g2']) expect(await store.addFeedback(feedback(id, 'gone'), limits)).toBe('ok');
    for (const id of ['k1', 'k2']) expect(await store.addFeedback(feedback(id, 'kept'), limits)).toBe('ok');
    expect(await store.addFeedback(feedback('x', 'kept'), limits)).toBe('account_full');
    await store.expireRecord('gone', 30);
    await until(async () => (await store.getRecord('gone')) === undefined, 'tombstone expiry');
    expect((await store.feedbackOf('acct-1', { limit: 10 })).items.map((f) => f.id)).toEqual(['k1', 'k2']);
    expect(await store.getRecord('kept')).toBeDefined();
    expect(await store.addFeedback(feedback('k3', 'kept'), limits)).toBe('ok');
    await store.expireRecord('absent', 10);
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
    await Promise.all([...messages, 'end'].map((m) => store.publish('chan', m, 'chan')));
    await deadline(gotAllA, 10_000, 'all messages');
    expect(a).toEqual([...messages, 'end']);
    await until(async () => b.length === 101, 'second subscriber');
    expect(b).toEqual([...messages, 'end']);

    unsubB();
    unsubB();
    let third!: () => void;
    const gotThird = new Promise<void>((resolve) => (third = resolve));
    await store.subscribe('chan', (m) => m === 'after' && third());
    await store.publish('chan', 'after', 'chan');
    await deadline(gotThird, 10_000, 'delivery after an unsubscribe');
    // Same connection, in order: once a later subscriber saw it, the first one has too.
    await until(async () => a.length === 102, 'first subscriber');
    expect(a[101]).toBe('after');
    expect(b).toHaveLength(101);
  });

  test('telemetry hashes: increments, min/max, delete fields, keys by prefix', async () => {
    await Promise.all([
      hincr(store, 'usage:key:k1', 'req'),
      hincr(store, 'usage:key:k1', 'req', 4),
      hincr(store, 'usage:key:k1', 'tokens', 2.5),
    ]);
    await Promise.all([10, 3, 7].map((v) => hsetMin(store, 'usage:key:k1', 'first', v)));
    await Promise.all([10, 3, 17, 7].map((v) => hsetMax(store, 'usage:key:k1', 'last', v)));
    await hincr(store, 'usage:key:k*2', 'req');
    await hincr(store, 'usage:day:2026-01-01', 'req');
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
  describe('fleet', () => {
    const owned = (id: string, owner: string, over: Partial<StreamRecord> = {}) => session(id, { owner, epoch: 1, ...over });

    test('slot holders: who acquired each slot, which stream it is bound to; release drops both; slotKeys lists held keys', async () => {
      expect(await store.acquireSlot('kh-h', 'slot-1', 5, 'gw-a')).toBe(true);
      expect(await store.acquireSlot('kh-h', 'slot-2', 5)).toBe(true);
      // Held already: not a second slot, and the holder stays who it was.
      expect(await store.acquireSlot('kh-h', 'slot-1', 5, 'gw-b')).toBe(true);
      await store.bindSlot('kh-h', 'slot-1', 'stream-1');
      // Binding a slot that is not held creates nothing.
      await store.bindSlot('kh-h', 'slot-x', 'stream-x');
      await store.bindSlot('kh-none', 'slot-x', 'stream-x');
      const holders = (await store.slotHolders('kh-h')).sort((x, y) => x.slotId.localeCompare(y.slotId));
      expect(holders).toEqual([
        { slotId: 'slot-1', replica: 'gw-a', streamId: 'stream-1', acquiredAtMs: expect.any(Number) },
        { slotId: 'slot-2', replica: null, streamId: null, acquiredAtMs: expect.any(Number) },
      ]);
      expect(holders[0].acquiredAtMs).toBeGreaterThan(0);
      expect(await store.acquireSlot('kh-other', 'slot-9', 5, 'gw-b')).toBe(true);
      expect((await store.slotKeys()).sort()).toEqual(['kh-h', 'kh-other']);
      expect(await store.releaseSlot('kh-h', 'slot-1')).toBe(true);
      // A slot acquired again under the same id starts unbound.
      expect(await store.acquireSlot('kh-h', 'slot-1', 5, 'gw-c')).toBe(true);
      expect((await store.slotHolders('kh-h')).find((h) => h.slotId === 'slot-1')).toMatchObject({ replica: 'gw-c', streamId: null });
      for (const id of ['slot-1', 'slot-2']) expect(await store.releaseSlot('kh-h', id)).toBe(true);
      // A live stream's slot lost by the store comes back bound, even over the limit; a held one is left as it is.
      for (let i = 0; i < 5; i++) expect(await store.acquireSlot('kh-r', `full-${i}`, 5)).toBe(true);
      expect(await store.restoreSlot('kh-r', 'lost', 'stream-lost', 'gw-a')).toBe(true);
      expect(await store.restoreSlot('kh-r', 'lost', 'stream-lost', 'gw-b')).toBe(false);
      expect(await store.restoreSlot('kh-r', 'full-0', 'stream-0', 'gw-b')).toBe(false);
      const restored = await store.slotHolders('kh-r');
      expect(restored).toHaveLength(6);
      expect(restored.find((h) => h.slotId === 'lost')).toMatchObject({ replica: 'gw-a', streamId: 'stream-lost' });
      expect(restored.find((h) => h.slotId === 'full-0')).toMatchObject({ replica: null, streamId: null });
      expect(await store.acquireSlot('kh-r', 'seventh', 5)).toBe(false);
      for (const h of restored) expect(await store.releaseSlot('kh-r', h.slotId)).toBe(true);
      expect(await store.slotHolders('kh-h')).toEqual([]);
      expect(await store.slotKeys()).toEqual(['kh-other']);
      expect(await store.slotHolders('kh-none')).toEqual([]);
    });

    test('endStream: 20 concurrent enders on 3 connections, exactly one gets the record as it was', async () => {
      const fleetStores = await replicas(3);
      await store.putRecord(owned('e-1', 'gw-a', { sealedKey: 'sealed' }));
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => fleetStores[i % 3].endStream('e-1', `reason-${i}`, 5_000 + i)),
      );
      const winners = answers.filter((a) => a !== undefined);
      expect(winners).toHaveLength(1);
      expect(winners[0]).toMatchObject({ state: 'active', owner: 'gw-a', sealedKey: 'sealed', endReason: null });
      const i = answers.findIndex((a) => a !== undefined);
      expect(await store.getRecord('e-1')).toEqual({
        ...owned('e-1', 'gw-a'),
        state: 'ended',
        endReason: `reason-${i}`,
        endedAtMs: 5_000 + i,
        owner: null,
        sealedKey: '',
      });
      expect(await store.streamsOf('gw-a')).toEqual([]);
      expect(await store.endStream('e-1', 'again', 9_000)).toBeUndefined();
      expect(await store.endStream('absent', 'x', 9_000)).toBeUndefined();
    });

    test('endStream with a fence: refused (undefined, record untouched) unless the record names that owner and epoch', async () => {
      await store.putRecord(owned('f-1', 'gw-a'));
      const rec = (await store.getRecord('f-1'))!;
      expect(await store.endStream('f-1', 'lease_expired', 1, { owner: 'gw-b', epoch: rec.epoch })).toBeUndefined();
      expect(await store.endStream('f-1', 'lease_expired', 1, { owner: 'gw-a', epoch: rec.epoch - 1 })).toBeUndefined();
      expect(await store.getRecord('f-1')).toMatchObject({ state: 'active', owner: 'gw-a' });
      expect(await store.endStream('f-1', 'lease_expired', 2, { owner: 'gw-a', epoch: rec.epoch })).toMatchObject({
        state: 'active',
        owner: 'gw-a',
      });
      expect(await store.getRecord('f-1')).toMatchObject({ state: 'ended', endReason: 'lease_expired', owner: null });
    });

    test('indexedStreams: the streams in the owner indexes of the replicas asked, with no record read', async () => {
      await store.putRecord(owned('i-1', 'gw-a'));
      await store.putRecord(owned('i-2', 'gw-b'));
      await store.putRecord(owned('i-3', 'gw-c'));
      await store.putRecord(session('i-4'));
      expect([...(await store.indexedStreams(['gw-a', 'gw-b', 'gw-none']))].sort()).toEqual(['i-1', 'i-2']);
      expect(await store.indexedStreams([])).toEqual(new Set());
    });

    test('claimStream: a compare-and-set; of 20 concurrent claimers on 3 connections exactly one wins, epoch + 1', async () => {
      const fleetStores = await replicas(3);
      await store.putRecord(owned('c-1', 'gw-dead'));
      expect(await store.streamsOf('gw-dead')).toEqual(['c-1']);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => fleetStores[i % 3].claimStream('c-1', { owner: 'gw-dead', epoch: 1 }, `gw-${i}`)),
      );
      const winners = answers.filter((a) => a !== undefined);
      expect(winners).toHaveLength(1);
      const winner = winners[0]!.owner!;
      expect(winners[0]).toMatchObject({ owner: winner, epoch: 2, state: 'active' });
      expect(await store.getRecord('c-1')).toMatchObject({ owner: winner, epoch: 2 });
      expect(await store.streamsOf(winner)).toEqual(['c-1']);
      expect(await store.streamsOf('gw-dead')).toEqual([]);
      // A stale expectation (owner or epoch) loses; an unowned record is claimed from null.
      expect(await store.claimStream('c-1', { owner: winner, epoch: 1 }, 'gw-x')).toBeUndefined();
      expect(await store.claimStream('c-1', { owner: 'gw-dead', epoch: 2 }, 'gw-x')).toBeUndefined();
      await store.putRecord(session('c-2'));
      expect(await store.claimStream('c-2', { owner: null, epoch: 0 }, 'gw-x')).toMatchObject({ owner: 'gw-x', epoch: 1 });
      // Ended or absent: nothing to claim.
      await store.endStream('c-1', 'client_requested', 1);
      expect(await store.claimStream('c-1', { owner: null, epoch: 2 }, 'gw-x')).toBeUndefined();
      expect(await store.claimStream('absent', { owner: null, epoch: 0 }, 'gw-x')).toBeUndefined();
      expect(await store.streamsOf('gw-x')).toEqual(['c-2']);
      // Ids the asking replica vouches for (it runs them) come back with the ones it does not, which are read.
      await store.putRecord(owned('c-3', 'gw-x'));
      await store.putRecord(owned('c-4', 'gw-x'));
      await store.endStream('c-4', 'client_requested', 1);
      expect((await store.streamsOf('gw-x', new Set(['c-2']))).sort()).toEqual(['c-2', 'c-3']);
      expect((await store.streamsOf('gw-x', new Set(['c-2', 'c-3']))).sort()).toEqual(['c-2', 'c-3']);
      expect(await store.streamsOf('gw-x', new Set())).toEqual(expect.arrayContaining(['c-2', 'c-3']));
    });

    test('commitTick: fenced, duplicate, ended, missing; each committed result reaches a subscriber exactly once', async () => {
      const [, other, third] = await replicas(3);
      const got: string[] = [];
      let sawEnd!: () => void;
      const end = new Promise<void>((r) => (sawEnd = r));
      await other.subscribe('results:t-1', (m) => {
        got.push(m);
        if (m === 'sentinel') sawEnd();
      });
      await store.putRecord(owned('t-1', 'gw-a', { promptRev: 3 }));
      const tick = (s: Store, n: number, over: { owner?: string; epoch?: number } = {}) =>
        s.commitTick('t-1', {
          owner: 'gw-a',
          epoch: 1,
          tick: n,
          costMicrocents: 100,
          channel: 'results:t-1',
          message: `tick-${n}`,
          ...over,
        });
      const lease = (await store.getRecord('t-1'))!.leaseExpiresAtMs;
      expect(await tick(store, 0)).toEqual({ ok: true, promptRev: 3, leaseExpiresAtMs: lease });
      expect(await tick(store, 0)).toEqual({ ok: false, reason: 'duplicate' });
      // A keepalive served by another replica shows in the owner's next commit.
      expect(await third.renewLease('t-1', lease + 60_000, lease - 1000)).toBeDefined();
      // 20 concurrent commits of one tick (a paused owner and itself, over 3 connections): one wins.
      const same = await Promise.all(Array.from({ length: 20 }, (_, i) => tick([store, other, third][i % 3], 1)));
      expect(same.filter((r) => r.ok)).toHaveLength(1);
      expect(same.filter((r) => !r.ok).every((r) => !r.ok && r.reason === 'duplicate')).toBe(true);
      // Ticks may skip (a missed one) but never go back.
      expect(await tick(store, 3)).toEqual({ ok: true, promptRev: 3, leaseExpiresAtMs: lease + 60_000 });
      expect(await tick(store, 2)).toEqual({ ok: false, reason: 'duplicate' });
      expect(await tick(store, 4, { owner: 'gw-b' })).toEqual({ ok: false, reason: 'fenced' });
      expect(await tick(store, 4, { epoch: 2 })).toEqual({ ok: false, reason: 'fenced' });
      // After a claim the old owner is fenced and the new one goes on from lastTick.
      expect(await other.claimStream('t-1', { owner: 'gw-a', epoch: 1 }, 'gw-b')).toBeDefined();
      expect(await tick(store, 4)).toEqual({ ok: false, reason: 'fenced' });
      expect(await tick(other, 3, { owner: 'gw-b', epoch: 2 })).toEqual({ ok: false, reason: 'duplicate' });
      expect(await tick(other, 4, { owner: 'gw-b', epoch: 2 })).toEqual({ ok: true, promptRev: 3, leaseExpiresAtMs: lease + 60_000 });
      // The keepalive took the cost so far (tick 0's); ticks 1, 3 and 4 count from it.
      expect(await store.getRecord('t-1')).toMatchObject({ lastTick: 4, costMicrocents: 300, owner: 'gw-b', epoch: 2 });
      await store.endStream('t-1', 'client_requested', 1);
      expect(await tick(other, 5, { owner: 'gw-b', epoch: 2 })).toEqual({ ok: false, reason: 'ended' });
      expect(
        await store.commitTick('absent', { owner: 'gw-a', epoch: 1, tick: 0, costMicrocents: 1, channel: 'results:t-1', message: 'nope' }),
      ).toEqual({ ok: false, reason: 'missing' });
      // Same connection, in order: once the sentinel arrived, every earlier publish has.
      await store.publish('results:t-1', 'sentinel', 't-1');
      await deadline(end, 10_000, 'sentinel');
      expect(got).toEqual(['tick-0', 'tick-1', 'tick-3', 'tick-4', 'sentinel']);
    });

    test('renewLease reads and zeroes the cost since the previous keepalive, whichever connection served it', async () => {
      const [, other] = await replicas(2);
      await store.putRecord(owned('k-1', 'gw-a', { lastKeepaliveAtMs: 1_000 }));
      const tick = (n: number, cost: number) =>
        store.commitTick('k-1', { owner: 'gw-a', epoch: 1, tick: n, costMicrocents: cost, channel: 'results:k-1', message: 'r' });
      await tick(0, 300);
      await tick(1, 200);
      expect(await other.renewLease('k-1', 90_000, 30_000)).toEqual({ costMicrocents: 500, sinceMs: 1_000 });
      expect(await store.getRecord('k-1')).toMatchObject({ leaseExpiresAtMs: 90_000, costMicrocents: 0, lastKeepaliveAtMs: 30_000 });
      await tick(2, 1_250);
      expect(await store.renewLease('k-1', 120_000, 60_000)).toMatchObject({ costMicrocents: 1_250, sinceMs: 30_000 });
      expect(await other.renewLease('k-1', 150_000, 90_000)).toMatchObject({ costMicrocents: 0, sinceMs: 60_000 });
      await store.endStream('k-1', 'client_requested', 1);
      expect(await other.renewLease('k-1', 200_000, 100_000)).toBeUndefined();
      expect(await other.renewLease('absent', 200_000, 100_000)).toBeUndefined();
    });

    test('a tick commit counts its outcome (ok / failed, the latest inference time); a refused commit counts nothing', async () => {
      const [, other] = await replicas(2);
      await store.putRecord(owned('o-1', 'gw-a'));
      const tick = (s: Store, n: number, ok: boolean, inferenceMs: number, epoch = 1) =>
        s.commitTick('o-1', {
          owner: 'gw-a',
          epoch,
          tick: n,
          costMicrocents: 1,
          channel: 'results:o-1',
          message: 'r',
          outcome: { ok, inferenceMs },
        });
      await tick(store, 0, true, 120);
      await tick(other, 1, false, 80.4);
      await tick(store, 2, true, 95);
      expect(await tick(other, 2, true, 1)).toEqual({ ok: false, reason: 'duplicate' });
      expect(await tick(other, 3, true, 1, 9)).toEqual({ ok: false, reason: 'fenced' });
      // A commit without an outcome publishes but counts nothing.
      await store.commitTick('o-1', { owner: 'gw-a', epoch: 1, tick: 4, costMicrocents: 1, channel: 'results:o-1', message: 'r' });
      expect(await other.getRecord('o-1')).toMatchObject({
        lastTick: 4,
        inferencesCompleted: 2,
        inferencesFailed: 1,
        lastInferenceMs: 95,
      });
      await store.endStream('o-1', 'client_requested', 1);
    });

    test('restoreRecord writes a record only where there is none, on any connection', async () => {
      const [, other] = await replicas(2);
      expect(await store.restoreRecord(owned('r-1', 'gw-a', { epoch: 2 }))).toBe(true);
      expect(await other.restoreRecord(owned('r-1', 'gw-b', { epoch: 3 }))).toBe(false);
      expect(await other.getRecord('r-1')).toMatchObject({ state: 'active', owner: 'gw-a', epoch: 2 });
      expect(await store.streamsOf('gw-a')).toContain('r-1');
      expect(await store.streamsOf('gw-b')).not.toContain('r-1');
      // An ended record (a tombstone) is a record too: a stale copy does not bring the stream back.
      await store.endStream('r-1', 'client_requested', 1);
      expect(await other.restoreRecord(owned('r-1', 'gw-b', { epoch: 4 }))).toBe(false);
      expect(await store.getRecord('r-1')).toMatchObject({ state: 'ended' });
    });

    test('addCost adds to the cost the next keepalive reports, next to the ticks’ cost, on any connection; not once ended', async () => {
      const [, other] = await replicas(2);
      await store.putRecord(owned('c-1', 'gw-a', { lastKeepaliveAtMs: 1_000 }));
      await store.commitTick('c-1', { owner: 'gw-a', epoch: 1, tick: 0, costMicrocents: 300, channel: 'results:c-1', message: 'r' });
      expect(await other.addCost('c-1', 1_250)).toBe(true);
      expect(await store.addCost('c-1', 0.5)).toBe(true);
      expect(
        await store.commitTick('c-1', { owner: 'gw-a', epoch: 1, tick: 1, costMicrocents: 200, channel: 'results:c-1', message: 'r' }),
      ).toMatchObject({ ok: true });
      expect(await store.renewLease('c-1', 90_000, 30_000)).toMatchObject({ costMicrocents: 1_750.5 });
      expect(await other.addCost('c-1', 40)).toBe(true);
      expect(await other.renewLease('c-1', 120_000, 60_000)).toMatchObject({ costMicrocents: 40 });
      await store.endStream('c-1', 'client_requested', 1);
      expect(await other.addCost('c-1', 40)).toBe(false);
      expect(await store.addCost('absent', 40)).toBe(false);
      expect(await store.getRecord('c-1')).toMatchObject({ state: 'ended' });
      expect(await store.getRecord('absent')).toBeUndefined();
    });

    test('setPrompt bumps promptRev, and the next commitTick answers it', async () => {
      const [, other] = await replicas(2);
      await store.putRecord(owned('p-1', 'gw-a'));
      expect(await other.setPrompt('p-1', 'new {x}', 7_000)).toMatchObject({ prompt: 'new {x}', promptUpdatedAtMs: 7_000, promptRev: 1 });
      expect(await other.setPrompt('p-1', 'newer "quoted" \\ {x}', 8_000)).toMatchObject({ promptRev: 2 });
      expect(
        await store.commitTick('p-1', { owner: 'gw-a', epoch: 1, tick: 0, costMicrocents: 0, channel: 'c', message: 'm' }),
      ).toMatchObject({
        ok: true,
        promptRev: 2,
      });
      expect((await store.getRecord('p-1'))!.prompt).toBe('newer "quoted" \\ {x}');
      await store.endStream('p-1', 'client_requested', 1);
      expect(await other.setPrompt('p-1', 'late', 9_000)).toBeUndefined();
      expect(await other.setPrompt('absent', 'late', 9_000)).toBeUndefined();
    });

    test('streamsOf: the active streams a replica owns, by put, claim and end', async () => {
      await store.putRecord(owned('o-1', 'gw-a'));
      await store.putRecord(owned('o-2', 'gw-a'));
      await store.putRecord(owned('o-3', 'gw-b'));
      await store.putRecord(owned('o-4', 'gw-a', { state: 'ended', owner: null }));
      expect((await store.streamsOf('gw-a')).sort()).toEqual(['o-1', 'o-2']);
      await store.claimStream('o-2', { owner: 'gw-a', epoch: 1 }, 'gw-b');
      await store.endStream('o-1', 'client_requested', 1);
      expect(await store.streamsOf('gw-a')).toEqual([]);
      expect((await store.streamsOf('gw-b')).sort()).toEqual(['o-2', 'o-3']);
      expect(await store.streamsOf('nobody')).toEqual([]);
    });

    test('membership: alive or dead by heartbeat age on the store clock; forgetReplica drops one', async () => {
      const [, other] = await replicas(2);
      const oldAt = await store.heartbeat('gw-old');
      // Order of events, not a window: heartbeat gw-new until the store clock is 200 ms past gw-old's.
      let m!: Awaited<ReturnType<Store['membership']>>;
      let newAt = oldAt;
      const deadAfter = 199;
      await until(async () => {
        newAt = await other.heartbeat('gw-new');
        if (newAt - oldAt <= deadAfter) return false;
        m = await store.membership(deadAfter);
        // The read's time is a lower bound of the store's (dated from this connection's last beat):
        // it must be past gw-old's beat by more than deadAfter, and within deadAfter of gw-new's
        // (else beat again), so gw-old is dead and gw-new alive by definition.
        return m.nowMs - oldAt > deadAfter && m.nowMs - newAt <= deadAfter;
      }, 'store clock advancing');
      // Dated from this connection's own last heartbeat (gw-old's) or read: never before it.
      expect(m.nowMs).toBeGreaterThanOrEqual(oldAt);
      expect(m.alive).toEqual(['gw-new']);
      expect(m.dead).toEqual(['gw-old']);
      const wide = await other.membership(60_000);
      expect(wide.alive.sort()).toEqual(['gw-new', 'gw-old']);
      expect(wide.dead).toEqual([]);
      await store.forgetReplica('gw-old');
      expect(await other.membership(0)).toMatchObject({
        alive: expect.not.arrayContaining(['gw-old']),
        dead: expect.not.arrayContaining(['gw-old']),
      });
      await store.forgetReplica('never-seen');
    });

    test('markDraining: a draining replica stays a member, is listed as draining on every connection, and leaves the list when forgotten', async () => {
      const [, other] = await replicas(2);
      await store.heartbeat('gw-d');
      await store.heartbeat('gw-e');
      expect((await other.membership(60_000)).draining).toEqual([]);
      await store.markDraining('gw-d');
      await store.markDraining('never-seen'); // not a member: never listed
      const m = await other.membership(60_000);
      expect(m.alive).toEqual(expect.arrayContaining(['gw-d', 'gw-e']));
      expect(m.draining).toEqual(['gw-d']);
      await store.forgetReplica('gw-d');
      await store.heartbeat('gw-d'); // a new process under the same id is not draining
      expect((await other.membership(60_000)).draining).toEqual([]);
    });

    test('markImpaired: listed on every connection while marked, withdrawn on request and when forgotten', async () => {
      const [, other] = await replicas(2);
      await store.heartbeat('gw-i');
      await store.heartbeat('gw-j');
      expect((await other.membership(60_000)).impaired).toEqual([]);
      await store.markImpaired('gw-i', true);
      await store.markImpaired('never-seen', true); // not a member: never listed
      expect((await other.membership(60_000)).impaired).toEqual(['gw-i']);
      await store.markImpaired('gw-i', false);
      expect((await other.membership(60_000)).impaired).toEqual([]);
      await store.markImpaired('gw-j', true);
      await store.forgetReplica('gw-j');
      await store.heartbeat('gw-j');
      expect((await other.membership(60_000)).impaired).toEqual([]);
    });

    test('claimOnce: exactly one of 30 callers on 3 connections per key and TTL; free again after it', async () => {
      const fleetStores = await replicas(3);
      const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => fleetStores[i % 3].claimOnce('rollup:2026-01-01', 60_000)));
      expect(answers.filter(Boolean)).toHaveLength(1);
      expect(await store.claimOnce('rollup:2026-01-02', 60_000)).toBe(true);
      expect(await store.claimOnce('short', 30)).toBe(true);
      await until(() => fleetStores[1].claimOnce('short', 60_000), 'claimOnce after its TTL');
      expect(await fleetStores[2].claimOnce('short', 60_000)).toBe(false);
    });
  });
});

describe('Redis store with Redis gone', () => {
  test('calls fail fast with StoreUnavailableError (no queueing, no hang) and observers see it; ready() is false, close() returns', async () => {
    const own = await startRedis();
    // ioredis keeps a refused command's timeout timer until it fires: short, so jest exits at once.
    const raw = await connectRedisStore(own.url, { prefix: 'gone:', commandTimeoutMs: 1_000 });
    const seen: [string, boolean][] = [];
    // Observed as the gateway observes its store (metrics, outage tracking).
    const store = measuredStore(raw, { call: (op, _s, failed) => seen.push([op, failed]) });
    expect(await store.acquireSlot('k', 's1', 5)).toBe(true);
    await own.stop();
    const unavailable = (op: string) =>
      expect.objectContaining({ name: 'StoreUnavailableError', status: 503, code: 'store_unavailable', op });
    await deadline(expect(store.acquireSlot('k', 's2', 5)).rejects.toEqual(unavailable('acquireSlot')), 10_000, 'acquire with Redis gone');
    const tick = { owner: 'gw', epoch: 1, tick: 0, costMicrocents: 0, channel: 'c', message: 'm' };
    await deadline(expect(store.commitTick('s1', tick)).rejects.toEqual(unavailable('commitTick')), 10_000, 'commitTick with Redis gone');
    await deadline(expect(store.heartbeat('gw')).rejects.toEqual(unavailable('heartbeat')), 10_000, 'heartbeat with Redis gone');
    await deadline(
      expect(store.subscribe('c', () => undefined)).rejects.toEqual(unavailable('subscribe')),
      10_000,
      'subscribe with Redis gone',
    );
    expect(seen).toEqual([
      ['acquireSlot', false],
      ['acquireSlot', true],
      ['commitTick', true],
      ['heartbeat', true],
      ['subscribe', true],
    ]);
    expect(await deadline(store.ready(), 10_000, 'ready')).toBe(false);
    await deadline(store.close(), 10_000, 'close');
  });
});

test('Redis store: a subscription comes back after Redis restarts (ioredis resubscribes)', async () => {
  const first = await startRedis();
  const store = await connectRedisStore(first.url, { prefix: 'restart:' });
  const got: string[] = [];
  await store.subscribe('chan', (m) => got.push(m));
  await first.stop();
  const second = await startRedis([], first.port);
  try {
    // Publish until the resubscribed connection hears one (bounded): the restart is an event, not a window.
    await until(async () => {
      await store.publish('chan', 'back', 'chan').catch(() => undefined);
      return got.includes('back');
    }, 'delivery after the restart');
    expect(got.every((m) => m === 'back')).toBe(true);
  } finally {
    await store.close();
    await second.stop();
  }
});

test('the Cluster run is a real one: streams spread over its 3 primaries, each script on its own slot', async () => {
  const store = await connectRedisStore(cluster.url, { prefix: 'spread:' });
  try {
    await Promise.all(Array.from({ length: 30 }, (_, i) => store.putRecord(session(`spread-${i}`, { owner: 'gw-a', epoch: 1 }))));
    const sizes = await Promise.all(cluster.nodes.map(async (n) => Number(/:(\d+)/.exec(await n.command('DBSIZE'))?.[1] ?? 0)));
    expect(sizes.filter((n) => n > 0).length).toBe(3);
    expect((await store.streamsOf('gw-a')).length).toBe(30);
    const ticks = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        store.commitTick(`spread-${i}`, { owner: 'gw-a', epoch: 1, tick: 0, costMicrocents: 1, channel: 'c', message: 'm' }),
      ),
    );
    expect(ticks.every((t) => t.ok)).toBe(true);
  } finally {
    await store.close();
  }
});

test('one server: the tick commits of one turn of the event loop are one script call, each answered and published on its own', async () => {
  const store = await connectRedisStore(redis.url, { prefix: 'ticks:' });
  try {
    for (let i = 0; i < 20; i++) await store.putRecord(session(`b-${i}`, { owner: 'gw-a', epoch: 1 }));
    await store.commitTick('b-0', { owner: 'gw-a', epoch: 1, tick: 0, costMicrocents: 0, channel: 'c', message: 'm' }); // loads the script
    const heard: string[] = [];
    await store.subscribe('results:b-3', (m) => heard.push(m));
    await redis.command('CONFIG', 'RESETSTAT');
    const commits = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.commitTick(`b-${i}`, {
          owner: i === 1 ? 'gw-b' : 'gw-a',
          epoch: 1,
          tick: i === 0 ? 0 : 5,
          costMicrocents: 10,
          channel: `results:b-${i}`,
          message: `r-${i}`,
          outcome: { ok: true, inferenceMs: 7 },
        }),
      ),
    );
    const stats = await serverCommandCalls(redis);
    const calls = (name: string) => stats.get(name) ?? 0;
    expect(calls('evalsha') + calls('eval')).toBe(1);
    expect([calls('hmget'), calls('hset'), calls('publish')]).toEqual([20, 18, 18]);
    expect(commits[0]).toEqual({ ok: false, reason: 'duplicate' });
    expect(commits[1]).toEqual({ ok: false, reason: 'fenced' });
    expect(commits.slice(2).every((c) => c.ok)).toBe(true);
    expect(await store.getRecord('b-7')).toMatchObject({ lastTick: 5, costMicrocents: 10, inferencesCompleted: 1 });
    await deadline(
      (async () => {
        while (!heard.length) await sleep(10);
      })(),
      5_000,
      'the batched commit published',
    );
    expect(heard).toEqual(['r-3']);
  } finally {
    await store.close();
  }
});

test('one server: commits of later turns of the event loop join the batch while its window is open; without a window each turn is its own call', async () => {
  const commitsOverTurns = async (commitBatchMs: number) => {
    const store = await connectRedisStore(redis.url, { prefix: `turns-${commitBatchMs}:`, commitBatchMs });
    try {
      for (let i = 0; i < 3; i++) await store.putRecord(session(`w-${i}`, { owner: 'gw-a', epoch: 1 }));
      const tick = (i: number, n: number) =>
        store.commitTick(`w-${i}`, { owner: 'gw-a', epoch: 1, tick: n, costMicrocents: 0, channel: 'c', message: 'm' });
      await tick(0, 0); // loads the script
      await redis.command('CONFIG', 'RESETSTAT');
      // Three commits, each in its own turn (a check phase apart, well inside any timer's window).
      const pending: Promise<TickCommit>[] = [];
      for (let i = 0; i < 3; i++) {
        pending.push(tick(i, 1));
        await new Promise((r) => setImmediate(r));
      }
      expect((await Promise.all(pending)).every((c) => c.ok)).toBe(true);
      const stats = await serverCommandCalls(redis);
      return (stats.get('evalsha') ?? 0) + (stats.get('eval') ?? 0);
    } finally {
      await store.close();
    }
  };
  expect(await commitsOverTurns(50)).toBe(1);
  expect(await commitsOverTurns(0)).toBe(3);
});

test('one server: a membership read dated by a recent heartbeat reads no clock; without one it reads Redis TIME in a script', async () => {
  const store = await connectRedisStore(redis.url, { prefix: 'members:' });
  try {
    const callsOf = async (read: () => Promise<unknown>) => {
      await redis.command('CONFIG', 'RESETSTAT');
      await read();
      const stats = await serverCommandCalls(redis);
      return ['evalsha', 'time', 'zrange', 'smembers'].map((c) => stats.get(c) ?? 0);
    };
    // No heartbeat yet on this connection: Redis's clock is read with the members (the first call may EVAL).
    await store.membership(3000);
    expect(await callsOf(() => store.membership(3000))).toEqual([1, 1, 1, 2]);
    const beatAt = await store.heartbeat('gw-a');
    const m = await store.membership(3000);
    expect(m.alive).toEqual(['gw-a']);
    expect(m.nowMs).toBeGreaterThanOrEqual(beatAt);
    expect(await callsOf(() => store.membership(3000))).toEqual([0, 0, 1, 2]);
  } finally {
    await store.close();
  }
});

test('one server: a keepalive renews with one HMGET and one HSET and restores a slot without reading the clock when it is held', async () => {
  const store = await connectRedisStore(redis.url, { prefix: 'renew:' });
  try {
    await store.putRecord(session('ka-1', { owner: 'gw-a', epoch: 1 }));
    expect(await store.acquireSlot('kh', 'slot-1', 5, 'gw-a')).toBe(true);
    await store.renewLease('ka-1', 90_000, 30_000); // loads the scripts
    await store.restoreSlot('kh', 'slot-1', 'ka-1', 'gw-a');
    await redis.command('CONFIG', 'RESETSTAT');
    expect(await store.renewLease('ka-1', 120_000, 60_000)).toEqual({ costMicrocents: 0, sinceMs: 30_000 });
    expect(await store.restoreSlot('kh', 'slot-1', 'ka-1', 'gw-a')).toBe(false);
    const stats = await serverCommandCalls(redis);
    const counted = [...stats].filter(([c, n]) => n > 0 && !c.startsWith('config')).sort(([a], [b]) => a.localeCompare(b));
    expect(counted).toEqual([
      ['evalsha', 2],
      ['hmget', 1],
      ['hset', 1],
      ['zscore', 1],
    ]);
  } finally {
    await store.close();
  }
});

test('one server: a telemetry flush of many hashes is one script call (one HMGET and one HSET per hash inside)', async () => {
  const store = await connectRedisStore(redis.url, { prefix: 'flush:' });
  try {
    await store.hbatch([{ key: 'depr:key:warm', incr: { n: 1 } }]); // the script is loaded (a first EVALSHA may miss)
    await redis.command('CONFIG', 'RESETSTAT');
    await store.hbatch(
      Array.from({ length: 40 }, (_, i) => ({ key: `depr:key:k${i}`, incr: { 'inferences:ok': i + 1 }, max: { last: i } })),
    );
    const stats = await serverCommandCalls(redis);
    const calls = (name: string) => stats.get(name) ?? 0;
    expect([calls('evalsha') + calls('eval'), calls('hmget'), calls('hset')]).toEqual([1, 40, 40]);
    expect(await store.hgetall('depr:key:k39')).toEqual({ 'inferences:ok': 40, last: 39 });
  } finally {
    await store.close();
  }
});

test('a Cluster with one evicting primary is refused at connect, naming the setting', async () => {
  const node = cluster.nodes[2];
  expect(await node.command('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru')).toMatch(/^\+OK/);
  try {
    await expect(connectRedisStore(cluster.url, { prefix: 'evict:' })).rejects.toThrow(/maxmemory-policy is allkeys-lru.*noeviction/);
  } finally {
    await node.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
  }
});

// Batched telemetry (the fleet-telemetry lane): one call per flush, whatever the number of hashes.
describe.each(factories)('%s: hbatch (a replica flushing its buffered telemetry)', (_name, make) => {
  let store: Store;
  beforeEach(async () => {
    store = (await make()).store;
  });
  afterEach(async () => store.close());

  test('adds, lowers and raises fields of several hashes; absent fields take the value; other fields stay', async () => {
    await hincr(store, 'depr:key:a', 'kept', 7);
    await hsetMin(store, 'depr:key:a', 'first', 500);
    await hsetMax(store, 'depr:key:a', 'last', 500);
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
          {
            key: 'depr:key:shared',
            incr: { req: r + 1, 'inferences:ok': 2 },
            min: { first_seen_ms: 1_763_900_000_000 + r },
            max: { last_seen_ms: 1_763_900_000_000 + r },
          },
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
    await store.hbatch([
      { key: 'depr:day:wide', incr },
      { key: 'depr:day:wide', incr: { 'key:k0': 1 } },
    ]);
    const wide = await store.hgetall('depr:day:wide');
    expect(Object.keys(wide)).toHaveLength(2_500);
    expect(wide['key:k0']).toBe(2);
    expect(wide['key:k2499']).toBe(2_500);
  });
});
