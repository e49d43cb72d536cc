/**
 * The Redis store through Sentinel (`redis+sentinel://…/<name>`): the boot checks run on the
 * primary the sentinels name, and after a failover (the primary SIGKILLed, a replica promoted) the
 * same store writes to the new primary without a restart; the old primary rejoins as a replica; a
 * reconnect asked for while the client is looking the primary up does not leave the store without
 * a connection.
 */
import { connect, connectRedisStore, redisStore } from '../../../src/gateway/store/redis';
import { startSentinelSet } from '../../helpers/sentinel';
import type { SentinelSet } from '../../helpers/sentinel';
import { StoreUnavailableError } from '../../../src/gateway/store/store';
import { deadline, sleep, until } from '../../helpers/time';

let set: SentinelSet;

/** `op`'s answer once the store takes calls again: it refuses them (StoreUnavailableError) while the client finds the primary. */
async function eventually<T>(op: () => Promise<T>, ms = 20_000): Promise<T> {
  const giveUpAt = Date.now() + ms;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      if (!(err instanceof StoreUnavailableError) || Date.now() > giveUpAt) throw err;
      await sleep(100);
    }
  }
}

beforeAll(async () => {
  set = await startSentinelSet({ replicas: 2 });
}, 60_000);
afterAll(async () => {
  await set?.stop();
});

test('an evicting maxmemory-policy on the primary the sentinels name refuses the boot', async () => {
  const primary = await set.primary();
  await primary.command('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    await expect(connectRedisStore(set.url)).rejects.toThrow(/maxmemory-policy is allkeys-lru/);
  } finally {
    await primary.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
  }
});

test('a failover moves the store to the promoted replica; the old primary comes back as a replica', async () => {
  const store = await connectRedisStore(set.url, { commandTimeoutMs: 500 });
  try {
    expect(await store.acquireSlot('k1', 'slot-a', 5)).toBe(true);
    // Replicated before the failover (WAIT: the write reached a replica), so it must survive it.
    const before = await set.primary();
    expect(await before.command('WAIT', '2', '2000')).toMatch(/^:2/);

    const { old, primary } = await set.failover();
    expect(primary).not.toBe(old);
    // Commands fail fast (503 upstream of here) while the client finds the new primary, then succeed there.
    expect(await eventually(() => store.acquireSlot('k1', 'slot-b', 5))).toBe(true);
    expect((await eventually(() => store.slotHolders('k1'))).map((h) => h.slotId).sort()).toEqual(['slot-a', 'slot-b']);
    // On whichever node the sentinels name primary now (under load they may promote twice).
    expect(await (await set.primary()).command('ZCARD', 'lg:slots:{k1}')).toMatch(/^:2/);

    await set.rejoin(old);
    expect(await old.command('ROLE')).toMatch(/slave/);
    expect(await eventually(() => store.acquireSlot('k1', 'slot-c', 5))).toBe(true);
    expect((await eventually(() => store.slotHolders('k1'))).map((h) => h.slotId).sort()).toEqual(['slot-a', 'slot-b', 'slot-c']);
    expect(await (await set.primary()).command('ZCARD', 'lg:slots:{k1}')).toMatch(/^:3/);
  } finally {
    await store.close();
  }
}, 90_000);

test('a reconnect asked for while the client looks the primary up (a failover announced meanwhile) does not end the connection for good', async () => {
  const connections = await connect(set.url, { commandTimeoutMs: 500 });
  const store = redisStore(connections);
  const conn = connections.redis;
  try {
    expect(await store.acquireSlot('k2', 'slot-a', 5)).toBe(true);
    // The sentinels stop answering, and the store's connections to the primary are dropped: the
    // client goes back to the sentinels and waits on them for the primary's address.
    set.pauseSentinels();
    await (await primaryNode()).command('CLIENT', 'KILL', 'TYPE', 'normal');
    await deadline(
      until(() => conn.status === 'connecting', 10),
      10_000,
      'the client looking the primary up',
    );
    // What the failover detector does on +switch-master: reconnect, while the lookup is in flight.
    conn.disconnect(true);
    set.resumeSentinels();
    // The interrupted lookup fails ("Connection is closed."); the store connects again on its own.
    expect(await eventually(() => store.acquireSlot('k2', 'slot-b', 5))).toBe(true);
    expect(conn.status).toBe('ready');
  } finally {
    set.resumeSentinels();
    await store.close();
  }
}, 60_000);

/** The node currently primary, read from the nodes themselves (the sentinels may be paused). */
async function primaryNode() {
  for (const n of set.nodes) {
    const role = await n.command('ROLE').catch(() => '');
    if (role.includes('master')) return n;
  }
  throw new Error('no primary among the nodes');
}
