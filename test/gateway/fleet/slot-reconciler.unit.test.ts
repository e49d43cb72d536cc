import { UNBOUND_SLOT_GRACE_MS, reconcileSlots } from '../../../src/gateway/fleet/slot-reconciler';
import { MemoryStore } from '../../../src/gateway/store/memory';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock } from '../../helpers/fake-clock';
import { sessionRecord } from '../../helpers/stack';

const logger = createLogger('silent');

test('frees slots of ended or vanished streams and old unbound slots of dead replicas; keeps the rest', async () => {
  const clock = new FakeClock();
  const store = new MemoryStore({ clock });
  await store.heartbeat('alive');
  await store.heartbeat('dead');
  // Bound to an active stream: kept. Bound to an ended one, or to a stream without a record: freed.
  await store.putSession({ ...sessionRecord('live'), keyHash: 'k' });
  await store.putSession({ ...sessionRecord('over'), keyHash: 'k' });
  await store.endSession('over', 'client_requested', clock.now());
  for (const [slot, stream] of [
    ['s-live', 'live'],
    ['s-over', 'over'],
    ['s-gone', 'gone'],
  ] as const) {
    await store.acquireSlot('k', slot, 10, 'alive');
    await store.bindSlot('k', slot, stream);
  }
  // Unbound (a create in flight): of an alive replica kept; of a dead one freed once old enough.
  await store.acquireSlot('k', 'u-alive', 10, 'alive');
  await store.acquireSlot('k', 'u-dead', 10, 'dead');
  await store.acquireSlot('k', 'u-none', 10);

  clock.advance(5_000);
  await store.heartbeat('alive');
  expect(await reconcileSlots(store, 3000, logger)).toBe(2); // s-over, s-gone: the dead replica's are still young
  clock.advance(UNBOUND_SLOT_GRACE_MS);
  await store.heartbeat('alive');
  expect(await reconcileSlots(store, 3000, logger)).toBe(2); // u-dead, u-none
  expect((await store.slotHolders('k')).map((h) => h.slotId).sort()).toEqual(['s-live', 'u-alive']);
  expect(await reconcileSlots(store, 3000, logger)).toBe(0);
  await store.close();
});
