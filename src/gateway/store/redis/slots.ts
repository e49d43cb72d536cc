import type { SlotHolder, Slots } from '../store';
import { pipelineReplies, scan } from './connection';
import { RedisRole } from './role';

/** Concurrency slots: each key's slots ZSET and its holders hash, changed together by one script. */
export class RedisSlots extends RedisRole implements Slots {
  private slotKeysOf(keyHash: string): [string, string] {
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
      // One pipeline, not a script: read apart, a slot released in between shows as unbound with
      // its old time, and freeing it again is a no-op; one acquired in between is not in the set.
      const [zset, fields] = await this.readHolders(keyHash);
      const out: SlotHolder[] = [];
      for (let i = 0; i < zset.length; i += 2) {
        const slotId = zset[i];
        out.push({
          slotId,
          replica: fields[`r:${slotId}`] ?? null,
          streamId: fields[`s:${slotId}`] ?? null,
          acquiredAtMs: Number(zset[i + 1]),
        });
      }
      return out;
    });
  }

  private async readHolders(keyHash: string): Promise<[string[], Record<string, string>]> {
    const [slots, info] = this.slotKeysOf(keyHash);
    const [zset, holders] = await pipelineReplies(this.redis.pipeline().zrange(slots, '0', '-1', 'WITHSCORES').hgetall(info));
    return [zset as string[], holders as Record<string, string>];
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
