import type { Claims } from '../store';
import { RedisRole } from './role';

/** Fleet-wide run-once: a key set only if absent, expiring with its claim. */
export class RedisClaims extends RedisRole implements Claims {
  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    return this.guard('claimOnce', async () => (await this.redis.set(this.key.once(key), '1', 'PX', ttlMs, 'NX')) === 'OK');
  }
}
