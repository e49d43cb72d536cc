import type { SlotHolder, Slots } from '../store';
import { scan } from './connection';
import { RedisRole } from './role';

/** Concurrency slots: each key's slots ZSET and its holders hash, changed together by one script. */
export class RedisSlots extends RedisRole implements Slots {
  private slotKeysOf(keyHash: string): string[] {
    return [this.key.slots(keyHash), this.key.slotInfo(keyHash)];
  }

  async acquireSlot(keyHash: string, slotId: string, limit: number, replica?: string): Promise<boolean> {
    return this.guard(
      'acquireSlot',
      async () => (await this.redis.acquireLua(...this.slotKeysOf(keyHash), limit, slotId, replica ?? '')) === 1,
    );
  }

  async bindSlot(keyHash: string, slotId: string, streamId: string): Promise<void> {
    return this.guard('bindSlot', async () => {
      await this.redis.bindLua(...this.slotKeysOf(keyHash), slotId, streamId);
    });
  }

  async restoreSlot(keyHash: string, slotId: string, streamId: string, replica: string): Promise<boolean> {
    return this.guard(
      'restoreSlot',
      async () => (await this.redis.restoreSlotLua(...this.slotKeysOf(keyHash), slotId, streamId, replica)) === 1,
    );
  }

  async slotHolders(keyHash: string): Promise<SlotHolder[]> {
    return this.guard('slotHolders', async () => {
      const [zset, info] = (await this.redis.holdersLua(...this.slotKeysOf(keyHash))) as [string[], string[]];
      const fields = new Map<string, string>();
      for (let i = 0; i < info.length; i += 2) fields.set(info[i], info[i + 1]);
      const out: SlotHolder[] = [];
      for (let i = 0; i < zset.length; i += 2) {
        const slotId = zset[i];
        out.push({
          slotId,
          replica: fields.get(`r:${slotId}`) ?? null,
          streamId: fields.get(`s:${slotId}`) ?? null,
          acquiredAtMs: Number(zset[i + 1]),
        });
      }
      return out;
    });
  }

  /** SCAN for slot sets (an empty ZSET does not exist, so a key found holds a slot); the reconciler's walk. */
  async slotKeys(): Promise<string[]> {
    return this.guard('slotKeys', async () => {
      const found = await scan(this.redis, this.key.slotsPattern());
      return found.map((k) => this.key.keyHashOfSlots(k)).filter((h) => h !== undefined);
    });
  }

  async releaseSlot(keyHash: string, slotId: string): Promise<boolean> {
    return this.guard('releaseSlot', async () => (await this.redis.releaseLua(...this.slotKeysOf(keyHash), slotId)) === 1);
  }
}
