/**
 * The Redis store through Sentinel (`redis+sentinel://…/<name>`): the boot checks run on the
 * primary the sentinels name, and after a failover (the primary SIGKILLed, a replica promoted) the
 * same store writes to the new primary without a restart; the old primary rejoins as a replica.
 */
import { RedisStore } from '../../../src/gateway/store/redis';
import { startSentinelSet } from '../../helpers/sentinel';
import type { SentinelSet } from '../../helpers/sentinel';
import { StoreUnavailableError } from '../../../src/gateway/store/store';
import { sleep } from '../../helpers/time';

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
    await expect(RedisStore.connect(set.url)).rejects.toThrow(/maxmemory-policy is allkeys-lru/);
  } finally {
    await primary.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
  }
});

test('a failover moves the store to the promoted replica; the old primary comes back as a replica', async () => {
  const store = await RedisStore.connect(set.url, { commandTimeoutMs: 500 });
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
