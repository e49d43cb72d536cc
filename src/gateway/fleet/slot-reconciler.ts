/**
 * Frees concurrency slots nobody will release: a slot bound to a stream whose record is gone or
 * ended (its end did not finish), and an unbound slot (a create in flight) of a dead or unknown
 * replica older than `UNBOUND_SLOT_GRACE_MS`. Run fleet-wide once per period (`claimOnce`).
 *
 * A slot whose stream is in a replica's owner index is taken as live without reading its record:
 * a pass then costs one read per replica, not one per stream. An ended stream leaves its owner's
 * index at the owner's next owned-streams reconcile (or a takeover of a dead owner's), so its
 * slot is freed a pass or two later; only streams outside every index are read.
 */
import type { Logger } from '../../lib/logger';
import type { Members, StreamRecords, Slots } from '../store/store';

/** An unbound slot younger than this may still belong to a create in flight. */
export const UNBOUND_SLOT_GRACE_MS = 30_000;

export async function reconcileSlots(
  store: Members & Slots & Pick<StreamRecords, 'getRecord' | 'indexedStreams'>,
  deadAfterMs: number,
  logger: Logger,
): Promise<number> {
  const m = await store.membership(deadAfterMs);
  const alive = new Set(m.alive);
  const indexed = await store.indexedStreams([...m.alive, ...m.dead]);
  let freed = 0;
  for (const kh of await store.slotKeys()) {
    for (const h of await store.slotHolders(kh)) {
      let stale: boolean;
      if (h.streamId !== null) {
        if (indexed.has(h.streamId)) continue;
        const rec = await store.getRecord(h.streamId);
        stale = !rec || rec.state === 'ended';
      } else {
        stale = (h.replica === null || !alive.has(h.replica)) && m.nowMs - h.acquiredAtMs > UNBOUND_SLOT_GRACE_MS;
      }
      if (stale && (await store.releaseSlot(kh, h.slotId))) {
        freed++;
        logger.info({ key: kh, slotId: h.slotId, streamId: h.streamId, replica: h.replica }, 'slot reconciler freed a stale slot');
      }
    }
  }
  return freed;
}
