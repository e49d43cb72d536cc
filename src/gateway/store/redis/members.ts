import type { Members, Membership } from '../store';
import { RedisRole } from './role';

/**
 * How long after a heartbeat's answer its Redis time still dates a membership read. Within it the
 * read needs no script and no TIME; past it (no heartbeat of late) the read asks Redis's clock.
 */
const CLOCK_FRESH_MS = 2_000;

/** Fleet coordination: who is alive (heartbeats on Redis's clock), who drains or cannot reach the upstream. */
export class RedisMembers extends RedisRole implements Members {
  /** Redis's time at this replica's last heartbeat and the local monotonic time its answer came. */
  private clock: { redisMs: number; localMs: number } | undefined;

  async heartbeat(replica: string): Promise<number> {
    return this.guard('heartbeat', async () => {
      const redisMs = (await this.redis.heartbeatLua(this.key.replicas(), replica)) as number;
      this.clock = { redisMs, localMs: performance.now() };
      return redisMs;
    });
  }

  /**
   * Redis's time now, dated from the last heartbeat: its answer came at or after its time was read,
   * so this never runs ahead of Redis's clock (a replica is never counted dead early by it).
   */
  private redisNow(): number | undefined {
    const c = this.clock;
    const since = c && performance.now() - c.localMs;
    return since !== undefined && since <= CLOCK_FRESH_MS ? c!.redisMs + Math.floor(since) : undefined;
  }

  async membership(deadAfterMs: number): Promise<Membership> {
    return this.guard('membership', async () => {
      const dated = this.redisNow();
      const [[nowMs, flat], marked, impaired] = await Promise.all([
        dated === undefined
          ? (this.redis.membersLua(this.key.replicas()) as Promise<[number, string[]]>)
          : this.redis.zrange(this.key.replicas(), '0', '-1', 'WITHSCORES').then((f): [number, string[]] => [dated, f]),
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
}
