import { Cluster } from 'ioredis';
import type { Counters, HashUpdate } from '../store';
import { scan } from './connection';
import { RedisRole } from './role';
import { HBATCH_FIELDS } from './scripts';

/** Telemetry counters: hashes of numbers (the deprecation usage report), written in batches. */
export class RedisCounters extends RedisRole implements Counters {
  /**
   * HBATCH scripts of at most HBATCH_FIELDS fields: on one server each carries many hashes (a flush
   * is usually one call); on a Cluster, whose hashes lie in any slot, one per hash. All in flight at once.
   */
  async hbatch(updates: readonly HashUpdate[]): Promise<void> {
    return this.guard('hbatch', () => this.hbatchCalls(updates));
  }

  private async hbatchCalls(updates: readonly HashUpdate[]): Promise<void> {
    const calls: Promise<unknown>[] = [];
    let keys: string[] = [];
    let args: (string | number)[] = [];
    let fields = 0;
    const send = () => {
      if (keys.length) calls.push(this.redis.hbatchLua(keys.length, ...keys, ...args));
      keys = [];
      args = [];
      fields = 0;
    };
    const perCall = this.redis instanceof Cluster ? 0 : HBATCH_FIELDS;
    for (const u of updates) {
      const triples = [
        ...Object.entries(u.incr ?? {}).flatMap(([f, v]) => ['+', f, v]),
        ...Object.entries(u.min ?? {}).flatMap(([f, v]) => ['<', f, v]),
        ...Object.entries(u.max ?? {}).flatMap(([f, v]) => ['>', f, v]),
      ];
      for (let i = 0; i < triples.length; i += 3 * HBATCH_FIELDS) {
        const chunk = triples.slice(i, i + 3 * HBATCH_FIELDS);
        if (fields + chunk.length / 3 > perCall) send();
        keys.push(this.key.hash(u.key));
        args.push(chunk.length / 3, ...chunk);
        fields += chunk.length / 3;
      }
    }
    send();
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
