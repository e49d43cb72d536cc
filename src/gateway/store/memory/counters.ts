import type { Counters, HashUpdate } from '../store';

/** Telemetry counters: hashes of numbers. */
export class MemoryCounters implements Counters {
  private readonly hashes = new Map<string, Map<string, number>>();

  async hbatch(updates: readonly HashUpdate[]): Promise<void> {
    for (const u of updates) this.update(u);
  }

  async hgetall(key: string): Promise<Record<string, number>> {
    return Object.fromEntries(this.hashes.get(key) ?? []);
  }

  async hdel(key: string, fields: readonly string[]): Promise<void> {
    const h = this.hashes.get(key);
    if (!h) return;
    for (const f of fields) h.delete(f);
    if (h.size === 0) this.hashes.delete(key);
  }

  async keys(prefix: string): Promise<string[]> {
    return [...this.hashes.keys()].filter((k) => k.startsWith(prefix));
  }

  private update(u: HashUpdate): void {
    // No field, no hash (as in Redis, where an empty hash does not exist).
    if (!Object.keys({ ...u.incr, ...u.min, ...u.max }).length) return;
    let h = this.hashes.get(u.key);
    if (!h) this.hashes.set(u.key, (h = new Map()));
    for (const [f, by] of Object.entries(u.incr ?? {})) h.set(f, (h.get(f) ?? 0) + by);
    for (const [f, v] of Object.entries(u.min ?? {})) {
      const cur = h.get(f);
      if (cur === undefined || v < cur) h.set(f, v);
    }
    for (const [f, v] of Object.entries(u.max ?? {})) {
      const cur = h.get(f);
      if (cur === undefined || v > cur) h.set(f, v);
    }
  }
}
