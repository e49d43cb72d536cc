import type { Claims, Members, Membership } from '../store';
import { RedisRole } from './role';

/** Fleet coordination: who is alive (heartbeats on Redis's clock), who drains or cannot reach the upstream, and run-once claims. */
export class RedisMembership extends RedisRole implements Members, Claims {
  async heartbeat(replica: string): Promise<number> {
    return this.guard('heartbeat', async () => (await this.redis.heartbeatLua(this.key.replicas(), replica)) as number);
  }

  async membership(deadAfterMs: number): Promise<Membership> {
    return this.guard('membership', async () => {
      const [[nowMs, flat], marked, impaired] = await Promise.all([
        this.redis.membersLua(this.key.replicas()) as Promise<[number, string[]]>,
        this.redis.smembers(this.key.draining()),
        this.redis.smembers(this.key.impaired()),
      ]);
      const alive: string[] = [];
      const dead: string[] = [];
      for (let i = 0; i < flat.length; i += 2) (nowMs - Number(flat[i + 1]) > deadAfterMs ? dead : alive).push(flat[i]);
      const members = new Set([...alive, ...dead]);
      return { alive, dead, draining: marked.filter((r) => members.has(r)), impaired: impaired.filter((r) => members.has(r)), nowMs };
    });
  }

  async markDraining(replica: string): Promise<void> {
    return this.guard('markDraining', async () => void (await this.redis.sadd(this.key.draining(), replica)));
  }

  async markImpaired(replica: string, impaired: boolean): Promise<void> {
    return this.guard('markImpaired', async () => {
      if (impaired) await this.redis.sadd(this.key.impaired(), replica);
      else await this.redis.srem(this.key.impaired(), replica);
    });
  }

  /** Out of the membership; its owner index goes too (called once it owns nothing). */
  async forgetReplica(replica: string): Promise<void> {
    return this.guard('forgetReplica', async () => {
      await Promise.all([
        this.redis.zrem(this.key.replicas(), replica),
        this.redis.srem(this.key.draining(), replica),
        this.redis.srem(this.key.impaired(), replica),
        this.redis.del(this.key.owned(replica)),
      ]);
    });
  }

  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    return this.guard('claimOnce', async () => (await this.redis.set(this.key.once(key), '1', 'PX', ttlMs, 'NX')) === 'OK');
  }
}
