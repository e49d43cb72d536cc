import type { Clock } from '../../../lib/timers';
import type { SlotHolder, Slots } from '../store';

/** Concurrency slots per key, in one process. */
export class MemorySlots implements Slots {
  private readonly held = new Map<string, Map<string, SlotHolder>>();

  constructor(private readonly clock: Pick<Clock, 'now'>) {}

  async acquireSlot(keyHash: string, slotId: string, limit: number, replica?: string): Promise<boolean> {
    const held = this.held.get(keyHash) ?? new Map<string, SlotHolder>();
    if (held.has(slotId)) return true;
    if (held.size >= limit) return false;
    held.set(slotId, { slotId, replica: replica ?? null, streamId: null, acquiredAtMs: this.clock.now() });
    this.held.set(keyHash, held);
    return true;
  }

  async bindSlot(keyHash: string, slotId: string, streamId: string): Promise<void> {
    const slot = this.held.get(keyHash)?.get(slotId);
    if (slot) slot.streamId = streamId;
  }

  async restoreSlot(keyHash: string, slotId: string, streamId: string, replica: string): Promise<boolean> {
    const held = this.held.get(keyHash) ?? new Map<string, SlotHolder>();
    if (held.has(slotId)) return false;
    held.set(slotId, { slotId, replica, streamId, acquiredAtMs: this.clock.now() });
    this.held.set(keyHash, held);
    return true;
  }

  async slotHolders(keyHash: string): Promise<SlotHolder[]> {
    return [...(this.held.get(keyHash)?.values() ?? [])].map((s) => ({ ...s }));
  }

  async slotKeys(): Promise<string[]> {
    return [...this.held.keys()];
  }

  async releaseSlot(keyHash: string, slotId: string): Promise<boolean> {
    const held = this.held.get(keyHash);
    if (!held?.delete(slotId)) return false;
    if (held.size === 0) this.held.delete(keyHash);
    return true;
  }
}
