import type { Counters, HashUpdate } from '../store';
import { scan } from './connection';
import { RedisRole } from './role';
import { HBATCH_FIELDS } from './scripts';

/** Telemetry counters: hashes of numbers (the deprecation usage report), written in batches. */
export class RedisCounters extends RedisRole implements Counters {
  /** One HBATCH script per hash (chunked past HBATCH_FIELDS), all in flight at once. */
  async hbatch(updates: readonly HashUpdate[]): Promise<void> {
    return this.guard('hbatch', () => this.hbatchCalls(updates));
  }

  private async hbatchCalls(updates: readonly HashUpdate[]): Promise<void> {
    const calls: Promise<unknown>[] = [];
    for (const u of updates) {
      const args = [
        ...Object.entries(u.incr ?? {}).flatMap(([f, v]) => ['+', f, v]),
        ...Object.entries(u.min ?? {}).flatMap(([f, v]) => ['<', f, v]),
        ...Object.entries(u.max ?? {}).flatMap(([f, v]) => ['>', f, v]),
      ];
      for (let i = 0; i < args.length; i += 3 * HBATCH_FIELDS) {
        calls.push(this.redis.hbatchLua(this.key.hash(u.key), ...args.slice(i, i + 3 * HBATCH_FIELDS)));
      }
    }
    await Promise.all(calls);
  }

  async hgetall(key: string): Promise<Record<string, number>> {
    return this.guard('hgetall', async () => {
      const h = await this.redis.hgetall(this.key.hash(key));
      return Object.fromEntries(Object.entries(h).map(([f, v]) => [f, Number(v)]));
    });
  }

  async hdel(key: string, fields: readonly string[]): Promise<void> {
    return this.guard('hdel', async () => {
      if (fields.length) await this.redis.hdel(this.key.hash(key), ...fields);
    });
  }

  /** SCAN (the report's few calls, never a hot path). */
  async keys(prefix: string): Promise<string[]> {
    return this.guard('keys', async () => (await scan(this.redis, this.key.hashPattern(prefix))).map((k) => this.key.hashName(k)));
  }
}
