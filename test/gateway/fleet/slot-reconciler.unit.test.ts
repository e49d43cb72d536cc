import { UNBOUND_SLOT_GRACE_MS, reconcileSlots } from '../../../src/gateway/fleet/slot-reconciler';
import { memoryStore } from '../../../src/gateway/store/memory';
import type { Store } from '../../../src/gateway/store/store';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock } from '../../helpers/fake-clock';
import { streamRecord } from '../../helpers/stack';

const logger = createLogger('silent');

test('frees slots of ended or vanished streams and old unbound slots of dead replicas; keeps the rest', async () => {
  const clock = new FakeClock();
  const store = memoryStore({ clock });
  await store.heartbeat('alive');
  await store.heartbeat('dead');
  // Bound to an active stream: kept. Bound to an ended one, or to a stream without a record: freed.
  await store.putRecord({ ...streamRecord('live'), keyHash: 'k' });
  await store.putRecord({ ...streamRecord('over'), keyHash: 'k' });
  await store.endStream('over', 'client_requested', clock.now());
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

test('a slot whose stream is in an owner index is kept without reading its record; once the index drops an ended one, its slot is freed', async () => {
  const clock = new FakeClock();
  const memory = memoryStore({ clock });
  const index = new Set(['live', 'over']);
  const reads: string[] = [];
  const store = Object.assign(Object.create(memory) as Store, {
    indexedStreams: async () => new Set(index),
    getRecord: async (id: string) => {
      reads.push(id);
      return memory.getRecord(id);
    },
  });
  await memory.heartbeat('alive');
  await memory.putRecord({ ...streamRecord('live'), keyHash: 'k' });
  await memory.putRecord({ ...streamRecord('over'), keyHash: 'k' });
  // Ended, but its owner has not dropped it from its index yet.
  await memory.endStream('over', 'client_requested', clock.now());
  for (const stream of ['live', 'over', 'gone']) {
    await memory.acquireSlot('k', `s-${stream}`, 10, 'alive');
    await memory.bindSlot('k', `s-${stream}`, stream);
  }
  expect(await reconcileSlots(store, 3000, logger)).toBe(1);
  expect(reads).toEqual(['gone']);
  expect((await memory.slotHolders('k')).map((h) => h.slotId).sort()).toEqual(['s-live', 's-over']);
  index.delete('over');
  expect(await reconcileSlots(store, 3000, logger)).toBe(1);
  expect((await memory.slotHolders('k')).map((h) => h.slotId)).toEqual(['s-live']);
  await memory.close();
});
